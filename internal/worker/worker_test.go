package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/config"
)

// closedPort returns a loopback address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// unreachableConfig points every dependency at a port nobody listens on.
func unreachableConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
worker: {id: test-worker}
http: {listen: "127.0.0.1:0"}
nats: {url: "nats://%s"}
lock: {zookeeper: "%s", session_timeout: 2s}
clusters:
  local:
    bootstrap_servers: ["%s"]
    zookeeper: "%s/kafka"
    strategy: zk-reassign
  kraft:
    bootstrap_servers: ["%s"]
`, closedPort(t), closedPort(t), closedPort(t), closedPort(t), closedPort(t)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// TestRunWithEverythingDown starts a worker whose servers are all down: it
// must start, serve, report not-ready with reasons, and stop cleanly.
func TestRunWithEverythingDown(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	w, err := New(unreachableConfig(t), zap.New(core), reg)
	if err != nil {
		t.Fatal(err)
	}
	w.probeTimeout = 300 * time.Millisecond

	ctx, cancel := context.WithCancel(t.Context())
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runErr = w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	eventually(t, 5*time.Second, "the http listener", func() bool { return w.Addr() != "" })
	base := "http://" + w.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}

	var r readiness
	eventually(t, 10*time.Second, "every dependency probed", func() bool {
		code, body := get(t, base+"/readyz")
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz = %d with everything down:\n%s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		for _, d := range r.Dependencies {
			if d.State != "down" {
				return false
			}
		}
		return true
	})
	if r.Ready || r.Worker != "test-worker" {
		t.Errorf("readiness: %+v", r)
	}
	want := map[string]bool{ // kind/name -> required
		"nats/nats": true, "zookeeper/@lock": true,
		"kafka/kraft": true, "kafka/local": true, "zookeeper/local": true,
		"nats/jetstream": true,
	}
	if len(r.Dependencies) != len(want) {
		t.Errorf("dependencies: %+v", r.Dependencies)
	}
	for _, d := range r.Dependencies {
		req, ok := want[d.Kind+"/"+d.Name]
		if !ok || req != d.Required || d.LastError == "" {
			t.Errorf("dependency %+v", d)
		}
	}

	code, metrics := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, line := range []string{
		`kafkamender_build_info{version=`,
		`kafkamender_dependency_up{kind="kafka",name="local"} 0`,
		`kafkamender_dependency_up{kind="nats",name="nats"} 0`,
		`kafkamender_dependency_up{kind="zookeeper",name="@lock"} 0`,
		`kafkamender_ready 0`,
		`kafkamender_events_total{status="failed",type="broker-overloaded"} 0`,
		`kafkamender_lock_waiting{cluster="local"} 0`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}

	if logs.FilterMessage("kafkamender worker started").Len() != 1 {
		t.Error("no startup summary logged")
	}

	cancel()
	select {
	case <-done:
		if runErr != nil {
			t.Errorf("Run() = %v, want nil after cancel", runErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if logs.FilterMessage("stopped").Len() != 1 {
		t.Error(`"stopped" not logged`)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("http server still serving after Run returned")
	}
	if err := w.Run(t.Context()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestRunFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := unreachableConfig(t)
	cfg.HTTP.Listen = ln.Addr().String()
	w, err := New(cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "listen on "+cfg.HTTP.Listen) {
		t.Errorf("Run() = %v, want a listen error", err)
	}
}

func TestNewRejects(t *testing.T) {
	logger := zaptest.NewLogger(t)

	cfg := unreachableConfig(t)
	cfg.NATS.URL = "http://x"
	if _, err := New(cfg, logger, prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), "nats.url") {
		t.Errorf("New(bad config) = %v", err)
	}

	reg := prometheus.NewRegistry()
	if _, err := New(unreachableConfig(t), logger, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(unreachableConfig(t), logger, reg); err == nil {
		t.Error("New registered its metrics twice on one registry")
	}

	if _, err := New(nil, logger, reg); err == nil {
		t.Error("New(nil config) succeeded")
	}
}

func TestStaticHostProvider(t *testing.T) {
	var p staticHostProvider
	if err := p.Init(nil); err == nil {
		t.Error("Init(nil) succeeded")
	}
	if err := p.Init([]string{"a:1", "b:2"}); err != nil {
		t.Fatal(err)
	}
	type step struct {
		server string
		retry  bool
	}
	var got []step
	for range 3 {
		s, r := p.Next()
		got = append(got, step{s, r})
	}
	want := []step{{"a:1", false}, {"b:2", false}, {"a:1", true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Next() sequence %v, want %v", got, want)
	}
	p.Connected() // connected to a:1
	s1, r1 := p.Next()
	s2, r2 := p.Next()
	if s1 != "b:2" || r1 || s2 != "a:1" || !r2 {
		t.Errorf("after Connected: %s %v, %s %v", s1, r1, s2, r2)
	}
	if p.Len() != 2 {
		t.Errorf("Len() = %d", p.Len())
	}
}

func TestNewLogger(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		l, err := NewLogger(config.Log{Level: "warn", Format: format})
		if err != nil {
			t.Fatalf("NewLogger(%s): %v", format, err)
		}
		if l.Core().Enabled(zap.InfoLevel) || !l.Core().Enabled(zap.WarnLevel) {
			t.Errorf("NewLogger(%s): level not warn", format)
		}
	}
	if _, err := NewLogger(config.Log{Level: "loud", Format: "json"}); err == nil {
		t.Error("NewLogger accepted level loud")
	}
	if _, err := NewLogger(config.Log{Level: "info", Format: "xml"}); err == nil {
		t.Error("NewLogger accepted format xml")
	}
}
