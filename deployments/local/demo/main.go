// Command demo shows kafkamender working against the local stack: it starts bin/worker with
// deployments/local/worker.yaml, waits until the worker says it is ready, shows its health,
// readiness and metrics, and stops it with SIGTERM. `go tool task demo` brings the stack up
// and builds bin/ first.
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

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ready string
	for ready == "" {
		select {
		case err := <-exited:
			return fmt.Errorf("the worker exited (%v); its log:\n%s", err, readFile(logf))
		case <-ctx.Done():
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
