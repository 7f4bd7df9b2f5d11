// Command demo shows kafkamender fixing the local stack: it starts bin/worker with
// deployments/local/worker.yaml, waits until the worker is ready, creates a topic whose
// partitions are led by the wrong brokers, asks (with bin/emitter, as an alerting system
// would) for broker 3 to become the preferred leader of two of them, then reports broker 3
// overloaded (twice, as alerting systems repeat alerts), printing the worker's results and
// the placement after each step; then it stops the worker with SIGTERM.
// `go tool task demo` brings the stack up and builds bin/ first.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	fmt.Println("worker exited cleanly; its log:")
	fmt.Println(readFile(logf))
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
	fmt.Printf("==> bin/emitter %s\n", strings.Join(args, " "))
	em := exec.CommandContext(ctx, "bin/emitter", args...)
	em.Stdout, em.Stderr = os.Stdout, os.Stderr
	if err := em.Run(); err != nil {
		return fmt.Errorf("emitter: %w", err)
	}
	if err := show(ctx, cl, "==> topic "+demoTopic+" on cluster local, after"); err != nil {
		return err
	}
	// Now broker 3 leads everything and an alert says it is overloaded: shed its
	// leadership; then the alert comes again a minute later, as alerts do.
	shed := []string{"broker-overloaded", "--cluster", "local", "--broker", "3", "--topic", demoTopic,
		"--demote-to-end", "--reason", "demo: broker 3 cpu 97%", "--wait"}
	for i := range 2 {
		fmt.Printf("==> bin/emitter %s\n", strings.Join(shed, " "))
		em := exec.CommandContext(ctx, "bin/emitter", shed...)
		em.Stdout, em.Stderr = os.Stdout, os.Stderr
		if err := em.Run(); err != nil {
			return fmt.Errorf("emitter: %w", err)
		}
		if i == 0 {
			if err := show(ctx, cl, "==> topic "+demoTopic+" on cluster local, after shedding broker 3"); err != nil {
				return err
			}
			fmt.Println("==> the same alert again, within the cool-down:")
		}
	}
	return nil
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
