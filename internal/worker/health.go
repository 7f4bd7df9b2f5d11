package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/natsjs"
)

// Dependency kinds, the kind label of kafkamender_dependency_up.
const (
	kindKafka     = "kafka"
	kindZooKeeper = "zookeeper"
	kindNATS      = "nats"
)

// probeFunc checks one dependency. It returns a short description of what it
// saw when the dependency is up.
type probeFunc func(ctx context.Context) (detail string, err error)

// dependency is one server the worker relies on, and what its probes saw.
type dependency struct {
	kind     string
	name     string
	required bool // gates readiness
	probe    probeFunc

	// Guarded by health.mu.
	checked   bool
	up        bool
	detail    string
	since     time.Time // when up last changed
	checkedAt time.Time
	lastErr   string
	lastErrAt time.Time
}

// health tracks the state of every dependency, exports it as metrics and
// answers /readyz.
type health struct {
	worker  string
	logger  *zap.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	mu       sync.Mutex
	deps     []*dependency
	stopping bool
	fatal    error // what ended the process's usefulness (setFatal): /healthz says it
	// paused returns the clusters this worker last saw paused, and why (the pipeline's).
	paused func() map[string]string
	// assets returns the JetStream assets found with fewer replicas than nats.replicas.
	assets func() []natsjs.Shortfall
}

// setAssets sets where /readyz reads the JetStream assets with fewer replicas than wanted.
func (h *health) setAssets(f func() []natsjs.Shortfall) {
	h.mu.Lock()
	h.assets = f
	h.mu.Unlock()
}

// setPaused sets where /readyz reads the paused clusters.
func (h *health) setPaused(f func() map[string]string) {
	h.mu.Lock()
	h.paused = f
	h.mu.Unlock()
}

func newHealth(worker string, logger *zap.Logger, m *metrics.Metrics) *health {
	return &health{worker: worker, logger: logger, metrics: m, now: time.Now}
}

// add registers a dependency, down until its first successful probe.
func (h *health) add(kind, name string, required bool, probe probeFunc) *dependency {
	d := &dependency{kind: kind, name: name, required: required, probe: probe}
	h.mu.Lock()
	h.deps = append(h.deps, d)
	h.mu.Unlock()
	h.metrics.DependencyUp(kind, name, false)
	h.updateReady()
	return d
}

// set records the outcome of a probe of d, or of an event that says as much
// (a NATS disconnect, a ZooKeeper session change), and logs state changes.
//
// Once the worker is stopping, set does nothing: closing the clients makes
// every dependency look down, and that is neither news nor worth a warning.
func (h *health) set(d *dependency, detail string, err error) {
	now := h.now()
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return
	}
	wasChecked, wasUp := d.checked, d.up
	d.checked, d.up, d.checkedAt = true, err == nil, now
	if err == nil {
		d.detail = detail
	} else {
		d.lastErr, d.lastErrAt = err.Error(), now
	}
	changed := !wasChecked || wasUp != d.up
	if changed {
		d.since = now
	}
	h.mu.Unlock()

	h.metrics.DependencyUp(d.kind, d.name, err == nil)
	h.updateReady()
	fields := []zap.Field{zap.String("kind", d.kind), zap.String("name", d.name)}
	switch {
	case changed && err == nil:
		h.logger.Info("dependency up", append(fields, zap.String("detail", detail))...)
	case changed:
		h.logger.Warn("dependency down", append(fields, zap.Error(err))...)
	case err != nil:
		h.logger.Debug("dependency still down", append(fields, zap.Error(err))...)
	}
}

// down returns why the dependency kind/name is down, when its last check said so; nil
// while it is up, or not checked yet.
func (h *health) down(kind, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.deps {
		if d.kind == kind && d.name == name && d.checked && !d.up {
			return fmt.Errorf("%s %s is down: %s", kind, name, d.lastErr)
		}
	}
	return nil
}

// probeAll runs every probe concurrently, each bounded by timeout, and
// returns when all have finished.
func (h *health) probeAll(ctx context.Context, timeout time.Duration) {
	h.probeKinds(ctx, timeout)
}

// probeKinds runs the probes of the dependencies of the kinds given (every kind when none
// is) concurrently, each bounded by timeout, and returns when all have finished.
func (h *health) probeKinds(ctx context.Context, timeout time.Duration, kinds ...string) {
	h.mu.Lock()
	deps := append([]*dependency(nil), h.deps...)
	h.mu.Unlock()

	var wg sync.WaitGroup
	for _, d := range deps {
		if d.probe == nil || (len(kinds) > 0 && !slices.Contains(kinds, d.kind)) {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			detail, err := d.probe(pctx)
			if ctx.Err() != nil {
				return // shutting down: the outcome means nothing
			}
			h.set(d, detail, err)
		})
	}
	wg.Wait()
}

// runProbes probes at once, then every interval, until ctx is done.
func (h *health) runProbes(ctx context.Context, interval, timeout time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		h.probeAll(ctx, timeout)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// setStopping makes the worker not ready, for good.
func (h *health) setStopping() {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	h.updateReady()
}

// setFatal records what makes the process useless until it is started again (its NATS
// connection closed for good, its pipeline stopped): /healthz answers 503 with it, and Run
// returns it, so that the orchestrator restarts the worker. The first one stays.
func (h *health) setFatal(err error) {
	h.mu.Lock()
	if h.fatal == nil {
		h.fatal = err
	}
	h.mu.Unlock()
	h.updateReady()
}

// serveHealthz answers 200 while the process is of use, 503 with the reason once a fatal
// error was recorded.
func (h *health) serveHealthz(rw http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	fatal := h.fatal
	h.mu.Unlock()
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if fatal != nil {
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(rw, "fatal: %v\n", fatal)
		return
	}
	_, _ = rw.Write([]byte("ok\n"))
}

// isStopping reports whether setStopping was called.
func (h *health) isStopping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopping
}

// readiness is the body of /readyz.
type readiness struct {
	Ready        bool              `json:"ready"`
	Stopping     bool              `json:"stopping,omitempty"`
	Worker       string            `json:"worker"`
	Dependencies []dependencyState `json:"dependencies"`
	// Paused lists the clusters paused (cluster-pause) as this worker last saw them, and
	// why: their events wait. A paused cluster does not make the worker unready.
	Paused map[string]string `json:"paused,omitempty"`
	// NATSAssets lists the streams and key-value buckets (KV_<bucket>) that exist with
	// fewer replicas than nats.replicas wants: the worker never changes an existing
	// asset's replicas (nats stream edit does). They do not make the worker unready.
	NATSAssets []natsjs.Shortfall `json:"nats_assets,omitempty"`
}

type dependencyState struct {
	Kind        string    `json:"kind"`
	Name        string    `json:"name"`
	Required    bool      `json:"required"`
	State       string    `json:"state"`          // up, down, or unknown before the first probe
	Since       time.Time `json:"since,omitzero"` // when State last changed
	CheckedAt   time.Time `json:"checked_at,omitzero"`
	Detail      string    `json:"detail,omitempty"` // from the last successful probe
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

func (h *health) report() readiness {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reportLocked()
}

// updateReady sets kafkamender_ready from the dependencies' states, under the lock so
// that concurrent updates cannot leave an older answer last.
func (h *health) updateReady() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.metrics.Ready(h.reportLocked().Ready)
}

func (h *health) reportLocked() readiness {
	r := readiness{
		Ready:        !h.stopping,
		Stopping:     h.stopping,
		Worker:       h.worker,
		Dependencies: make([]dependencyState, 0, len(h.deps)),
	}
	if h.paused != nil {
		if p := h.paused(); len(p) > 0 {
			r.Paused = p
		}
	}
	if h.assets != nil {
		if a := h.assets(); len(a) > 0 {
			r.NATSAssets = a
		}
	}
	for _, d := range h.deps {
		s := dependencyState{
			Kind:        d.kind,
			Name:        d.name,
			Required:    d.required,
			State:       "unknown",
			Since:       d.since,
			CheckedAt:   d.checkedAt,
			Detail:      d.detail,
			LastError:   d.lastErr,
			LastErrorAt: d.lastErrAt,
		}
		switch {
		case d.checked && d.up:
			s.State = "up"
		case d.checked:
			s.State = "down"
		}
		if d.required && s.State != "up" {
			r.Ready = false
		}
		r.Dependencies = append(r.Dependencies, s)
	}
	return r
}

func (h *health) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	r := h.report()
	body, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if r.Ready {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(append(body, '\n'))
}
