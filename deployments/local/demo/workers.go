package main

// The demo's worker processes (bin/worker), and the configuration of the second.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// deriveConfig writes to dst the worker configuration at src with http.listen set to
// listen: decoded as a tree of YAML nodes (so that its comments stay), changed, encoded.
// The copy is then loaded as a worker would, so a mistake shows here, not in a worker log.
func deriveConfig(src, dst, listen string) error {
	raw, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	n, err := lookup(&doc, "http", "listen")
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	n.Value = listen
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by the demo (deployments/local/demo): %s with http.listen %s.\n", src, listen)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(dst, b.Bytes(), 0o644); err != nil {
		return err
	}
	_, err = config.Load(dst)
	return err
}

// lookup returns the value node at the path of mapping keys below the document doc.
func lookup(doc *yaml.Node, keys ...string) (*yaml.Node, error) {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for i, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s is not a mapping", strings.Join(keys[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				next = n.Content[j+1]
				break
			}
		}
		if next == nil {
			return nil, fmt.Errorf("no %s", strings.Join(keys[:i+1], "."))
		}
		n = next
	}
	return n, nil
}

// worker is a bin/worker process started by the demo.
type worker struct {
	name   string // worker-1, worker-2
	config string // its configuration file
	log    string // its log file: stdout and stderr
	base   string // http://<its http.listen>
	id     string // the worker id it reports, once ready

	cmd  *exec.Cmd
	done chan struct{} // closed when it exited; then err is Wait's error
	err  error
}

// startWorker starts bin/worker with the configuration at cfgPath, its output to logPath.
func startWorker(name, cfgPath, logPath string) (*worker, error) {
	// The workers' configuration is their file's: a KAFKAMENDER_ variable of the shell
	// (KAFKAMENDER_HTTP_LISTEN, say) would put both on one address.
	env := config.WithoutOverrides(os.Environ())
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	cfg, err := config.ParseEnv(data, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bin/worker", "--config", cfgPath)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start bin/worker (go tool task build makes it): %w", err)
	}
	w := &worker{name: name, config: cfgPath, log: logPath, base: "http://" + cfg.HTTP.Listen, cmd: cmd, done: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		out.Close()
		close(w.done)
	}()
	return w, nil
}

// waitReady polls /readyz until the worker says it is ready.
func (w *worker) waitReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		// /readyz answers 503 with the same body while a dependency is down.
		body, _, err := get(ctx, w.base+"/readyz")
		if err == nil {
			var r struct {
				Ready  bool   `json:"ready"`
				Worker string `json:"worker"`
			}
			if json.Unmarshal(body, &r) == nil && r.Ready {
				w.id = r.Worker
				return nil
			}
			last = strings.TrimSpace(string(body))
		}
		select {
		case <-w.done:
			return fmt.Errorf("%s exited (%v) before it was ready; the end of its log (%s):\n%s", w.name, w.err, w.log, stack.Tail(w.log, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s; /readyz: %s", w.name, within, last)
		case <-tick.C:
		}
	}
}

// duplicates is the worker's count of repeated Alertmanager notifications: the sample
// kafkamender_alertmanager_alerts_total{outcome="duplicate"} of its /metrics.
func (w *worker) duplicates() (string, error) {
	const name = `kafkamender_alertmanager_alerts_total{outcome="duplicate"}`
	body, status, err := get(context.Background(), w.base+"/metrics")
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("%s/metrics: %d", w.base, status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line, nil
		}
	}
	return "", fmt.Errorf("%s/metrics has no %s", w.base, name)
}

// waitDuplicates waits until the duplicate count is other than before, and returns it.
func (w *worker) waitDuplicates(ctx context.Context, before string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		now, err := w.duplicates()
		if err != nil {
			return "", err
		}
		if now != before {
			return now, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no repeated notification from Alertmanager within %s (%s)", within, now)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for the worker to exit, killing it after grace. It says
// how long the worker took; exiting with an error status is an error.
func (w *worker) stop(grace time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("%s: SIGTERM: %w", w.name, err)
	}
	select {
	case <-w.done:
	case <-time.After(grace):
		_ = w.cmd.Process.Kill()
		<-w.done
		return 0, fmt.Errorf("%s did not exit within %s of SIGTERM: killed (log %s)", w.name, grace, w.log)
	}
	if w.err != nil {
		return 0, fmt.Errorf("%s did not exit cleanly: %w; the end of its log (%s):\n%s", w.name, w.err, w.log, stack.Tail(w.log, 20))
	}
	return time.Since(start), nil
}

// kill stops the worker if it still runs: SIGTERM, then SIGKILL after 10s.
func (w *worker) kill() {
	select {
	case <-w.done:
	default:
		_, _ = w.stop(10 * time.Second)
	}
}

// get returns the body and status of a GET of url.
func get(ctx context.Context, url string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}
