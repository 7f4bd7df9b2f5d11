package handlers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Metrics are the handlers' Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	takeovers    prometheus.Counter
	leadersMoved *prometheus.CounterVec
	skipped      *prometheus.CounterVec
	duration     *prometheus.HistogramVec
}

// NewMetrics registers the handlers' metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafkamender_takeovers_total",
			Help: "Operations of other events, left in the journal by a worker that is gone, that this worker finished.",
		}),
		leadersMoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamender_leaders_moved_total",
			Help: "Partitions whose leader a handler moved (verified), by cluster and event type.",
		}, []string{"cluster", "type"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamender_partitions_skipped_total",
			Help: "Partitions a handler left alone, by cluster, event type and reason code.",
		}, []string{"cluster", "type", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kafkamender_operation_duration_seconds",
			Help:    "Duration of operations under the cluster lock, by event type and status.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"type", "status"}),
	}
	for _, c := range []prometheus.Collector{m.takeovers, m.leadersMoved, m.skipped, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records a finished operation's result. A dry run's result (planned) counts
// only in the duration: its changes and skips are a plan, not what happened.
func (m *Metrics) observe(res *events.Result) {
	if m == nil || res == nil || res.Replayed {
		return
	}
	if !res.StartedAt.IsZero() && !res.FinishedAt.IsZero() {
		m.duration.WithLabelValues(res.Type, string(res.Status)).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	}
	if res.Status == events.StatusPlanned {
		return
	}
	moved := 0
	for _, c := range res.Changes {
		if c.LeaderAfter != c.LeaderBefore {
			moved++
		}
	}
	if moved > 0 {
		m.leadersMoved.WithLabelValues(res.Cluster, res.Type).Add(float64(moved))
	}
	for _, s := range res.Skipped {
		code := string(s.Code)
		if code == "" {
			code = "other"
		}
		m.skipped.WithLabelValues(res.Cluster, res.Type, code).Inc()
	}
}

// takeover counts an operation finished for a worker that is gone.
func (m *Metrics) takeover() {
	if m != nil {
		m.takeovers.Inc()
	}
}
