// Command demo shows kafkamender fixing the local stack: it starts bin/worker with
// deployments/local/worker.yaml, waits until the worker is ready, creates a topic whose
// partitions are led by the wrong brokers, asks (with bin/emitter, as an alerting system
// would) for broker 3 to become the preferred leader of two of them, then posts the alert
// KafkaBrokerOverloaded for broker 3 to the local Alertmanager, which sends it to the
// worker's webhook (and repeats it: the same event), printing the worker's results and the
// placement after each step; then it stops the worker with SIGTERM.
// `go tool task demo` brings the stack up and builds bin/ first.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/stack"
)

const (
	config = "deployments/local/worker.yaml"
	base   = "http://127.0.0.1:8080"
	logf   = ".state/demo-worker.log"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	if err := os.MkdirAll(".state", 0o755); err != nil {
		return err
	}
	out, err := os.Create(logf)
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Printf("==> starting the worker: bin/worker --config %s (log: %s)\n", config, logf)
	worker := exec.Command("bin/worker", "--config", config)
	worker.Stdout, worker.Stderr = out, out
	if err := worker.Start(); err != nil {
		return fmt.Errorf("start bin/worker (run `go tool task build`): %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	defer worker.Process.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var ready string
	started := time.Now()
	for ready == "" {
		select {
		case err := <-exited:
			return fmt.Errorf("the worker exited (%v); its log:\n%s", err, readFile(logf))
		case <-time.After(time.Until(started.Add(time.Minute))):
			body, _ := get("/readyz")
			return fmt.Errorf("the worker was not ready within a minute; /readyz: %s\n%s", body, readFile(logf))
		case <-time.After(500 * time.Millisecond):
		}
		if body, err := get("/readyz"); err == nil {
			ready = body
		}
	}
	health, err := get("/healthz")
	if err != nil {
		return err
	}
	fmt.Printf("==> GET /healthz\n%s\n==> GET /readyz\n%s\n", strings.TrimSpace(health), strings.TrimSpace(ready))
	metrics, err := get("/metrics")
	if err != nil {
		return err
	}
	fmt.Println("==> GET /metrics (kafkamender_*)")
	sc := bufio.NewScanner(strings.NewReader(metrics))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "kafkamender_") {
			fmt.Println(sc.Text())
		}
	}
	if err := fix(ctx); err != nil {
		return fmt.Errorf("%w\nworker log:\n%s", err, readFile(logf))
	}

	fmt.Println("==> stopping the worker (SIGTERM)")
	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("the worker did not exit cleanly: %w\n%s", err, readFile(logf))
		}
	case <-time.After(30 * time.Second):
		return errors.New("the worker did not exit within 30s of SIGTERM")
	}
	fmt.Printf("worker exited cleanly; its log: %s\n", logf)
	fmt.Println("The stack keeps running: go tool task stack:status | stack:logs | stack:down")
	return nil
}

// get returns the body of a 200 answer; any other status is an error carrying the body.
func get(path string) (string, error) {
	resp, err := http.Get(base + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("%s: %s", path, resp.Status)
	}
	return string(body), nil
}

func readFile(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

const demoTopic = "demo-orders"

// fix creates demoTopic on the "local" cluster with partitions 0 and 1 led by brokers 1 and
// 2, has the worker make broker 3 their preferred leader, and shows the placement before
// and after.
func fix(ctx context.Context) error {
	c, err := stack.ClusterByName("local")
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Start from a known placement: drop the topic a previous demo left.
	if _, err := adm.DeleteTopic(ctx, demoTopic); err == nil {
		for {
			md, err := adm.Metadata(ctx, demoTopic)
			if err == nil && md.Topics[demoTopic].Err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// And forget a previous demo's shedding of broker 3, or its cool-down would make
	// this run's alert a noop.
	if nc, err := nats.Connect(stack.NATSURL); err == nil {
		if js, err := jetstream.New(nc); err == nil {
			if kv, err := js.KeyValue(ctx, handlers.OverloadedBucket); err == nil {
				_ = kv.Purge(ctx, "local.3")
			}
		}
		nc.Close()
	}
	assignment := [][]int32{{1, 2, 3}, {2, 3, 4}, {3, 4, 1}}
	for {
		err := kafka.CreateTopic(ctx, cl, demoTopic, assignment, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond) // deletion still in progress
	}
	if err := show(ctx, cl, "==> topic "+demoTopic+" on cluster local, before"); err != nil {
		return err
	}
	args := []string{"preferred-leader", "--cluster", "local", "--topic", demoTopic,
		"--partition", "0", "--partition", "1", "--broker", "3", "--reason", "demo: broker 1 and 2 are overloaded", "--wait"}
	if err := emitter(ctx, args...); err != nil {
		return err
	}
	if err := show(ctx, cl, "==> topic "+demoTopic+" on cluster local, after"); err != nil {
		return err
	}
	// Now broker 3 leads everything and Prometheus fires KafkaBrokerOverloaded for it:
	// Alertmanager sends it to the worker's webhook, which sheds broker 3's leadership.
	// Alertmanager repeats the notification while the alert fires: the same event.
	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	alert := map[string]any{
		"labels":      map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": "local", "broker_id": "3"},
		"annotations": map[string]string{"summary": "demo: broker 3 cpu 97%"},
		"startsAt":    startsAt.Format(time.RFC3339Nano),
	}
	fmt.Printf("==> POST %s/api/v2/alerts  (KafkaBrokerOverloaded, cluster=local, broker_id=3)\n", stack.AlertmanagerURL)
	if err := postAlert(alert); err != nil {
		return err
	}
	fp, err := fingerprint(ctx)
	if err != nil {
		return err
	}
	id := alertmanager.ID(alertmanager.Alert{Fingerprint: fp, StartsAt: startsAt})
	fmt.Printf("==> Alertmanager sends it to the worker's webhook: event %s; its result, from the audit trail:\n", id)
	if err := waitStored(ctx, id); err != nil {
		return err
	}
	if err := emitter(ctx, "result", "--id", id); err != nil {
		return err
	}
	if err := show(ctx, cl, "==> topic "+demoTopic+" on cluster local, after shedding broker 3"); err != nil {
		return err
	}
	fmt.Println("==> Alertmanager repeats the notification every 5s while the alert fires; the worker's counter:")
	for deadline := time.Now().Add(30 * time.Second); ; {
		m, _ := get("/metrics")
		if line := sample(m, `kafkamender_alertmanager_alerts_total{outcome="duplicate"}`); line != "" && !strings.HasSuffix(line, " 0") {
			fmt.Println("  " + line + "   (the same event id: stored once, not run again)")
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no repeated notification from Alertmanager within 30s")
		}
		time.Sleep(time.Second)
	}
	alert["endsAt"] = time.Now().UTC().Format(time.RFC3339Nano)
	fmt.Println("==> the alert resolves (the repair stays)")
	return postAlert(alert)
}

// waitStored waits until the result of event id is in the results stream.
func waitStored(ctx context.Context, id string) error {
	nc, err := nats.Connect(stack.NATSURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		s, err := js.Stream(wctx, events.ResultsStream)
		if err == nil {
			if _, err = s.GetLastMsgForSubject(wctx, events.ResultSubject(id)); err == nil {
				return nil
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("no result of %s within 2 minutes: %w", id, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// emitter runs bin/emitter with args, its output on the screen.
func emitter(ctx context.Context, args ...string) error {
	fmt.Printf("==> bin/emitter %s\n", strings.Join(args, " "))
	em := exec.CommandContext(ctx, "bin/emitter", args...)
	em.Stdout, em.Stderr = os.Stdout, os.Stderr
	if err := em.Run(); err != nil {
		return fmt.Errorf("emitter: %w", err)
	}
	return nil
}

// postAlert posts one alert to the local Alertmanager, as Prometheus would.
func postAlert(alert map[string]any) error {
	body, err := json.Marshal([]map[string]any{alert})
	if err != nil {
		return err
	}
	resp, err := http.Post(stack.AlertmanagerURL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("alertmanager: %s %s", resp.Status, out)
	}
	return nil
}

// fingerprint is Alertmanager's fingerprint of the demo's alert.
func fingerprint(ctx context.Context) (string, error) {
	for ctx.Err() == nil {
		resp, err := http.Get(stack.AlertmanagerURL + "/api/v2/alerts?active=true&filter=" + url.QueryEscape(`alertname="KafkaBrokerOverloaded"`) +
			"&filter=" + url.QueryEscape(`cluster="local"`) + "&filter=" + url.QueryEscape(`broker_id="3"`))
		if err == nil {
			var got []struct {
				Fingerprint string `json:"fingerprint"`
			}
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err == nil && len(got) == 1 {
				return got[0].Fingerprint, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", ctx.Err()
}

// sample returns the line of /metrics output m that starts with name.
func sample(m, name string) string {
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

func show(ctx context.Context, cl *kgo.Client, title string) error {
	var snap *kafka.Snapshot
	var err error
	for range 50 { // a new topic needs a moment to have leaders everywhere
		snap, err = kafka.ReadSnapshot(ctx, cl, demoTopic)
		if err == nil && len(snap.Topics[demoTopic]) > 0 && allLed(snap.Topics[demoTopic]) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	fmt.Println(title)
	for _, p := range snap.Topics[demoTopic] {
		fmt.Printf("  partition %d: replicas %v, leader %d\n", p.Partition, p.Replicas, p.Leader)
	}
	return nil
}

func allLed(ps []kafka.Partition) bool {
	for _, p := range ps {
		if p.Leader < 0 {
			return false
		}
	}
	return true
}
