package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// buildWorker builds the worker binary once per test into a temp dir.
func buildWorker(t *testing.T) string {
	t.Helper()
	return buildBinary(t, ".", "worker")
}

// TestBadConfigExitsNonZero runs the real binary: a bad config must stop it before it
// connects to anything, with a non-zero exit and a message that names the field.
func TestBadConfigExitsNonZero(t *testing.T) {
	bin := buildWorker(t)
	valid := testenv.LocalWorkerYAML(t)
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"unknown cluster field", "bootstrap_servers: [127.0.0.1:19192", "bootstrap_server: [127.0.0.1:19192",
			`clusters.kraft: unknown field "bootstrap_server"`},
		{"empty bootstrap list", "bootstrap_servers: [127.0.0.1:19192, 127.0.0.1:29192, 127.0.0.1:39192]", "bootstrap_servers: []",
			"clusters.kraft.bootstrap_servers"},
		{"malformed zookeeper address", "zookeeper: 127.0.0.1:2181/kafka", "zookeeper: 127.0.0.1:21x81/kafka",
			"clusters.local.zookeeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(valid, []byte(tc.from)) {
				t.Fatalf("worker.yaml no longer contains %q", tc.from)
			}
			cfg := filepath.Join(t.TempDir(), "worker.yaml")
			if err := os.WriteFile(cfg, bytes.Replace(valid, []byte(tc.from), []byte(tc.to), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "--config", cfg)
			cmd.Env = testenv.WorkerEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("worker exited with %v, want a non-zero exit; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr does not name the field (%q):\n%s", tc.want, stderr.String())
			}
		})
	}
}

// TestWorkerAgainstLocalStack runs the binary with deployments/local/worker.yaml (on a
// free HTTP port) against the real stack: it must become ready, report every dependency
// up in /metrics, and exit 0 on SIGTERM.
func TestWorkerAgainstLocalStack(t *testing.T) {
	env := testenv.Get(t)
	env.FreeEventsStream(t)
	bin := buildWorker(t)
	valid := testenv.LocalWorkerYAML(t)
	const addr = "127.0.0.1:18080"
	cfg := filepath.Join(t.TempDir(), "worker.yaml")
	// Its own consumer and subjects, so it takes no event of other tests (or of a real
	// worker) and does not block their consumers on the work-queue stream.
	consumer := testenv.Name(t, "w")
	t.Cleanup(func() {
		js := testenv.JetStream(t, env.NATS(t))
		testenv.DeleteConsumers(context.Background(), js, consumer)
	})
	// Its NATS lock bucket, made beforehand with one replica, as a worker of an earlier
	// version (or with nats.replicas 1) made it: the worker keeps it as it is and lists it
	// on /readyz, which stays ready.
	plain, err := jetstream.New(env.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	bucket := testenv.Name(t, "LOCKS")
	old, err := locks.NewKV(plain, locks.KVConfig{Bucket: bucket, Worker: "earlier", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.DeleteKeyValue(context.Background(), bucket) })
	// The KRaft cluster under a name of its own: the fleet records where each cluster's
	// lock lives (events.LockBackendsBucket), and this worker's lock bucket is not the
	// fleet's. Under the name kraft its record would make every later worker of the stack
	// refuse the cluster. The record goes with the test.
	kraft := "kraft-" + consumer[len(consumer)-8:]
	t.Cleanup(func() {
		js := testenv.JetStream(t, env.NATS(t))
		if kv, err := js.KeyValue(context.Background(), events.LockBackendsBucket); err == nil {
			_ = kv.Purge(context.Background(), kraft)
		}
	})
	yaml := bytes.Replace(valid, []byte("listen: 127.0.0.1:8080"), []byte("listen: "+addr), 1)
	for from, to := range map[string]string{
		"consumer: kafkamender-workers":    "consumer: " + consumer,
		"subjects: [kafkamender.events.>]": "subjects: [kafkamender.events." + consumer + ".>]",
		"bucket: KAFKAMENDER_LOCKS":        "bucket: " + bucket,
		"\n  kraft: ":                      "\n  " + kraft + ": ",
	} {
		if !bytes.Contains(yaml, []byte(from)) {
			t.Fatalf("worker.yaml no longer contains %q", from)
		}
		yaml = bytes.Replace(yaml, []byte(from), []byte(to), 1)
	}
	if err := os.WriteFile(cfg, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Env = testenv.WorkerEnv()
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-exited:
			t.Fatalf("the worker exited before it was ready: %v\n%s", err, logs.String())
		default:
		}
		code, body, err := get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return &notReady{body}
		}
		return nil
	})
	_, readyz, err := get("/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		NATSAssets []natsjs.Shortfall `json:"nats_assets"`
	}
	if err := json.Unmarshal([]byte(readyz), &ready); err != nil {
		t.Fatal(err)
	}
	// The streams it set up have the stack's three replicas; the bucket made with one is
	// listed, and kept.
	want := natsjs.Shortfall{Asset: "KV_" + bucket, Replicas: 1, Want: 3}
	if !slices.Equal(ready.NATSAssets, []natsjs.Shortfall{want}) {
		t.Errorf("/readyz nats_assets %+v, want only %+v:\n%s", ready.NATSAssets, want, readyz)
	}
	if s, err := plain.Stream(t.Context(), "KV_"+bucket); err != nil || s.CachedInfo().Config.Replicas != 1 {
		t.Errorf("the bucket made with one replica: %v; the worker must keep it as it is", err)
	}
	// The console worker.yaml turns on: a credential or 401; the stack's operator token.
	if code, _, err := get("/ui/"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("GET /ui/ without a credential: %d %v, want 401", code, err)
	}
	sec, err := env.Stack.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+addr+"/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+sec.ConsoleOperatorToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/ with the stack's operator token: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	_, metrics, err := get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`kafkamender_dependency_up{kind="kafka",name="local"} 1`,
		`kafkamender_dependency_up{kind="kafka",name="` + kraft + `"} 1`,
		`kafkamender_dependency_up{kind="nats",name="nats"} 1`,
		`kafkamender_dependency_up{kind="zookeeper",name="local"} 1`,
		`kafkamender_dependency_up{kind="nats",name="jetstream"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("worker exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("worker did not exit within 30s of SIGTERM\n%s", logs.String())
	}
	// Read once the worker has exited (its output is written meanwhile).
	if !strings.Contains(logs.String(), "fewer replicas than nats.replicas wants") || !strings.Contains(logs.String(), "nats stream edit KV_"+bucket+" --replicas 3") {
		t.Errorf("the log does not say which asset has fewer replicas and how to scale it:\n%s", logs.String())
	}
}

type notReady struct{ body string }

func (e *notReady) Error() string { return "not ready: " + e.body }
