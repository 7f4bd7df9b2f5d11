package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
)

func newTestHealth(t *testing.T) (*health, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{Clusters: []string{"local"}})
	if err != nil {
		t.Fatal(err)
	}
	return newHealth("w1", zap.New(core), m), reg, logs
}

func readyz(t *testing.T, h *health) (int, readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.serveReadyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var r readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("readyz body %q: %v", rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return rec.Code, r
}

// switchable is a probe whose outcome the test sets.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) fail(err error) { s.err.Store(&err) }
func (s *switchable) heal()          { s.err.Store(nil) }
func (s *switchable) probe(context.Context) (string, error) {
	if e := s.err.Load(); e != nil {
		return "", *e
	}
	return "fine", nil
}

func TestReadiness(t *testing.T) {
	h, reg, logs := newTestHealth(t)
	var natsP, kafkaP, optZK switchable
	nats := h.add(kindNATS, "nats", true, natsP.probe)
	h.add(kindKafka, "local", true, kafkaP.probe)
	h.add(kindZooKeeper, "local", false, optZK.probe)

	// Before any probe: unknown, not ready, gauges at 0.
	code, r := readyz(t, h)
	if code != http.StatusServiceUnavailable || r.Ready {
		t.Fatalf("before probes: %d %+v", code, r)
	}
	for _, d := range r.Dependencies {
		if d.State != "unknown" {
			t.Errorf("before probes: %s/%s state %q", d.Kind, d.Name, d.State)
		}
	}
	if got := gauge(t, reg, `kafkamender_dependency_up{kind="kafka",name="local"}`); got != 0 {
		t.Errorf("kafka gauge before probes = %v", got)
	}
	checkReady(t, reg, 0)

	// Kafka down, optional ZooKeeper down.
	kafkaP.fail(errors.New("dial tcp: connection refused"))
	optZK.fail(errors.New("no session (connecting)"))
	h.probeAll(t.Context(), time.Second)
	code, r = readyz(t, h)
	if code != http.StatusServiceUnavailable || r.Ready {
		t.Fatalf("kafka down: %d %+v", code, r)
	}
	kafka := find(t, r, "kafka", "local")
	if kafka.State != "down" || kafka.LastError != "dial tcp: connection refused" || kafka.LastErrorAt.IsZero() || !kafka.Required {
		t.Errorf("kafka: %+v", kafka)
	}
	if n := logs.FilterMessage("dependency down").Len(); n != 2 {
		t.Errorf("%d 'dependency down' logs, want 2", n)
	}
	checkReady(t, reg, 0)

	// Kafka back: ready although the optional ZooKeeper is still down.
	kafkaP.heal()
	h.probeAll(t.Context(), time.Second)
	code, r = readyz(t, h)
	if code != http.StatusOK || !r.Ready || r.Worker != "w1" {
		t.Fatalf("kafka up: %d %+v", code, r)
	}
	kafka = find(t, r, "kafka", "local")
	if kafka.State != "up" || kafka.Detail != "fine" || kafka.LastError == "" {
		t.Errorf("kafka after recovery keeps its last error: %+v", kafka)
	}
	if zk := find(t, r, "zookeeper", "local"); zk.State != "down" || zk.Required {
		t.Errorf("optional zookeeper: %+v", zk)
	}
	checkReady(t, reg, 1)
	if got := gauge(t, reg, `kafkamender_dependency_up{kind="kafka",name="local"}`); got != 1 {
		t.Errorf("kafka gauge = %v, want 1", got)
	}
	if got := gauge(t, reg, `kafkamender_dependency_up{kind="zookeeper",name="local"}`); got != 0 {
		t.Errorf("zookeeper gauge = %v, want 0", got)
	}
	if n := logs.FilterMessage("dependency down").Len(); n != 2 {
		t.Errorf("a dependency still down was logged again as down: %d", n)
	}

	// An event (NATS disconnect) changes readiness before the next probe.
	h.set(nats, "", errors.New("disconnected: EOF"))
	if code, _ := readyz(t, h); code != http.StatusServiceUnavailable {
		t.Errorf("after nats disconnect: %d", code)
	}
	checkReady(t, reg, 0)
	h.probeAll(t.Context(), time.Second)
	if code, _ := readyz(t, h); code != http.StatusOK {
		t.Errorf("after nats probe: %d", code)
	}

	// Stopping: never ready again.
	h.setStopping()
	code, r = readyz(t, h)
	if code != http.StatusServiceUnavailable || r.Ready || !r.Stopping {
		t.Errorf("stopping: %d %+v", code, r)
	}
	checkReady(t, reg, 0)

	want := `
# HELP kafkamender_dependency_up Whether the last probe of a dependency succeeded (1) or not (0), by kind (nats, kafka, zookeeper) and name.
# TYPE kafkamender_dependency_up gauge
kafkamender_dependency_up{kind="kafka",name="local"} 1
kafkamender_dependency_up{kind="nats",name="nats"} 1
kafkamender_dependency_up{kind="zookeeper",name="local"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafkamender_dependency_up"); err != nil {
		t.Error(err)
	}
}

func TestProbeTimeout(t *testing.T) {
	h, _, _ := newTestHealth(t)
	h.add(kindKafka, "slow", true, func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	start := time.Now()
	h.probeAll(t.Context(), 50*time.Millisecond)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("probeAll took %v despite a 50ms timeout", d)
	}
	_, r := readyz(t, h)
	if d := find(t, r, "kafka", "slow"); d.State != "down" || !strings.Contains(d.LastError, "deadline exceeded") {
		t.Errorf("slow probe: %+v", d)
	}
}

func find(t *testing.T, r readiness, kind, name string) dependencyState {
	t.Helper()
	for _, d := range r.Dependencies {
		if d.Kind == kind && d.Name == name {
			return d
		}
	}
	t.Fatalf("no dependency %s/%s in %+v", kind, name, r.Dependencies)
	return dependencyState{}
}

func gauge(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, series)
}

// checkReady checks that kafkamender_ready says what /readyz says.
func checkReady(t *testing.T, reg *prometheus.Registry, want float64) {
	t.Helper()
	if got := gauge(t, reg, "kafkamender_ready"); got != want {
		t.Errorf("kafkamender_ready = %v, want %v", got, want)
	}
}
