// Package metrics defines every Prometheus metric of a kafkamender worker: its name,
// labels and help, and what moves it. The pipeline, the handlers, the Alertmanager bridge
// and the worker's health record through one *Metrics; nothing else registers metrics
// (the Go and process collectors aside). docs/metrics.md lists them all, and a test keeps
// that list and this package in step.
//
// Every series of a known label value exists from the start, at zero: event types,
// statuses, configured clusters, skip reasons and alert outcomes are known when the
// worker starts, so an alert rule or a dashboard never queries a series that is absent
// because nothing has happened yet.
//
// Counters of changes (leaders moved, replicas added and removed, bytes copied,
// partitions skipped) count only what happened on a cluster: a dry run's result is a
// plan and moves none of them, and a replayed result (an event id that ran before)
// counts nothing at all.
//
// A nil *Metrics records nothing, so that tests may leave it out.
package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Namespace prefixes every metric name.
const Namespace = "kafkamender"

// Alert outcomes of the Alertmanager bridge (kafkamender_alertmanager_alerts_total).
const (
	AlertPublished = "published" // made an event and published it
	AlertDuplicate = "duplicate" // a re-notification of an event stored already
	AlertResolved  = "resolved"  // a resolved alert: ignored
	AlertUnmatched = "unmatched" // no rule matched
	AlertInvalid   = "invalid"   // a rule matched but the labels do not fit it
)

// AlertOutcomes lists the alert outcomes.
func AlertOutcomes() []string {
	return []string{AlertPublished, AlertDuplicate, AlertResolved, AlertUnmatched, AlertInvalid}
}

// Why the webhook refused a request (kafkamender_webhook_refused_total).
const (
	WebhookUnauthorized = "unauthorized" // no valid credential: 401
	WebhookTooMany      = "too_many"     // more alerts than alertmanager.max_alerts: 413
	WebhookBusy         = "busy"         // max_concurrent_requests in hand already: 503
	WebhookRateLimited  = "rate_limited" // its events would pass events_per_second: 503
)

// WebhookRefusals lists why the webhook refuses requests.
func WebhookRefusals() []string {
	return []string{WebhookUnauthorized, WebhookTooMany, WebhookBusy, WebhookRateLimited}
}

// Throttle outcomes when an operation ends (kafkamender_throttles_restored_total).
const (
	ThrottleRestored = "restored" // held our value: put back as it was before
	ThrottleKept     = "kept"     // someone else changed it meanwhile: left as they set it
)

// Statuses lists every final result status.
func Statuses() []events.Status {
	return []events.Status{events.StatusSucceeded, events.StatusPartial, events.StatusNoop, events.StatusPlanned,
		events.StatusFailed, events.StatusRejected, events.StatusExpired, events.StatusCancelled, events.StatusDenied}
}

// Options are the label values known at start-up, whose series exist from the start.
type Options struct {
	// Clusters are the configured cluster names.
	Clusters []string
	// Types are the event types. Default: every type of the contract.
	Types []string
	// SkipReasons are the reason codes of skipped partitions.
	SkipReasons []string
	// Version labels kafkamender_build_info.
	Version string
}

// Metrics records a worker's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	events        *prometheus.CounterVec
	eventDuration *prometheus.HistogramVec
	retries       *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec

	opDuration *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	opStarted  *prometheus.GaugeVec
	lockWait   *prometheus.HistogramVec
	lockWaits  *prometheus.GaugeVec
	takeovers  prometheus.Counter
	paused     *prometheus.GaugeVec
	plans      *prometheus.GaugeVec

	leadersMoved      *prometheus.CounterVec
	replicasAdded     *prometheus.CounterVec
	replicasRemoved   *prometheus.CounterVec
	bytesCopied       *prometheus.CounterVec
	skipped           *prometheus.CounterVec
	throttlesSet      *prometheus.CounterVec
	throttlesRestored *prometheus.CounterVec

	alerts       *prometheus.CounterVec
	refused      *prometheus.CounterVec
	dependencyUp *prometheus.GaugeVec
	ready        prometheus.Gauge
	buildInfo    *prometheus.GaugeVec

	mu      sync.Mutex
	running map[string]int // cluster: operations this worker runs on it now
}

// durationBuckets span 50 ms to about 7 minutes; lockBuckets 1 ms to about 16 minutes.
var (
	durationBuckets = prometheus.ExponentialBuckets(0.05, 2, 14)
	lockBuckets     = prometheus.ExponentialBuckets(0.001, 4, 11)
)

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

// New defines the metrics, registers them on reg and creates the series of every known
// label value at zero.
func New(reg prometheus.Registerer, o Options) (*Metrics, error) {
	if len(o.Types) == 0 {
		for _, ti := range events.Types() {
			o.Types = append(o.Types, ti.Name)
		}
	}
	m := &Metrics{
		events: counter("events_total",
			"Events this worker stored a final result for, by event type and result status.", "type", "status"),
		eventDuration: histogram("event_duration_seconds",
			"Time from the start of handling an event to its stored result, by event type.", durationBuckets, "type"),
		retries: counter("retries_total",
			"Deliveries of events given back for a later retry after a transient failure, by cluster and event type.", "cluster", "type"),
		deadLetters: counter("dead_letters_total",
			"Events this worker copied to kafkamender.dead.<cluster> (delivery limit reached, or the handler panicked), by cluster and event type.", "cluster", "type"),

		opDuration: histogram("operation_duration_seconds",
			"Duration of operations run under the cluster lock (plan, change, verify), by event type and result status.", durationBuckets, "type", "status"),
		inFlight: gauge("operations_in_flight",
			"Events this worker is handling now, by cluster and event type.", "cluster", "type"),
		opStarted: gauge("operation_started_timestamp_seconds",
			"Unix time at which the operation this worker runs on the cluster under its lock started; 0 when it runs none.", "cluster"),
		lockWait: histogram("lock_wait_seconds",
			"Time from asking for a cluster's lock to holding it (or giving up), by cluster.", lockBuckets, "cluster"),
		lockWaits: gauge("lock_waiting",
			"Operations of this worker waiting for a cluster's lock now, by cluster.", "cluster"),
		paused: gauge("cluster_paused",
			"1 while the cluster is paused (cluster-pause: its events wait, not run), as this worker last saw it; else 0.", "cluster"),
		plans: gauge("plans_awaiting_approval",
			"Plans of the cluster that wait for a person's approval (plan-approved), as this worker's last sweep of the plans counted them.", "cluster"),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "takeovers_total",
			Help: "Operations of other events, left in the journal by a worker that is gone, that this worker finished or rolled back."}),

		leadersMoved: counter("leaders_moved_total",
			"Partitions whose leader an operation moved (verified), by cluster and event type.", "cluster", "type"),
		replicasAdded: counter("replicas_added_total",
			"Replicas an operation added to partitions (verified), by cluster and event type.", "cluster", "type"),
		replicasRemoved: counter("replicas_removed_total",
			"Replicas an operation removed from partitions (verified), by cluster and event type.", "cluster", "type"),
		bytesCopied: counter("bytes_copied_total",
			"Bytes copied by the replicas an operation added and the log-dir moves it made, by cluster and event type.", "cluster", "type"),
		skipped: counter("partitions_skipped_total",
			"Partitions an operation left alone, by cluster, event type and reason code.", "cluster", "type", "reason"),
		throttlesSet: counter("throttles_set_total",
			"Throttle configs (rates and throttled-replica lists) an operation set, by cluster.", "cluster"),
		throttlesRestored: counter("throttles_restored_total",
			"Throttle configs an operation had set, when it ended: restored (put back as before) or kept (someone else changed them meanwhile), by cluster.", "cluster", "outcome"),

		alerts: counter("alertmanager_alerts_total",
			"Alerts received on POST /v1/alertmanager, by outcome: published, duplicate, resolved, unmatched, invalid.", "outcome"),
		refused: counter("webhook_refused_total",
			"Requests to POST /v1/alertmanager refused before any alert was read, by reason: unauthorized, too_many, busy, rate_limited.", "reason"),
		dependencyUp: gauge("dependency_up",
			"Whether the last probe of a dependency succeeded (1) or not (0), by kind (nats, kafka, zookeeper) and name.", "kind", "name"),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "ready",
			Help: "1 when the worker is ready (/readyz answers 200), else 0."}),
		buildInfo: gauge("build_info", "Always 1; the version label says which build runs.", "version"),
		running:   map[string]int{},
	}
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.initSeries(o)
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.eventDuration, m.retries, m.deadLetters,
		m.opDuration, m.inFlight, m.opStarted, m.lockWait, m.lockWaits, m.paused, m.plans, m.takeovers,
		m.leadersMoved, m.replicasAdded, m.replicasRemoved, m.bytesCopied, m.skipped, m.throttlesSet, m.throttlesRestored,
		m.alerts, m.refused, m.dependencyUp, m.ready, m.buildInfo}
}

// initSeries creates the series of every known label value.
func (m *Metrics) initSeries(o Options) {
	m.buildInfo.WithLabelValues(o.Version).Set(1)
	for _, typ := range o.Types {
		m.eventDuration.WithLabelValues(typ)
		for _, s := range Statuses() {
			m.events.WithLabelValues(typ, string(s))
			m.opDuration.WithLabelValues(typ, string(s))
		}
	}
	for _, outcome := range AlertOutcomes() {
		m.alerts.WithLabelValues(outcome)
	}
	for _, reason := range WebhookRefusals() {
		m.refused.WithLabelValues(reason)
	}
	for _, c := range o.Clusters {
		m.opStarted.WithLabelValues(c)
		m.lockWait.WithLabelValues(c)
		m.lockWaits.WithLabelValues(c)
		m.paused.WithLabelValues(c)
		m.plans.WithLabelValues(c)
		m.throttlesSet.WithLabelValues(c)
		m.throttlesRestored.WithLabelValues(c, ThrottleRestored)
		m.throttlesRestored.WithLabelValues(c, ThrottleKept)
		for _, typ := range o.Types {
			for _, v := range []*prometheus.CounterVec{m.retries, m.deadLetters, m.leadersMoved, m.replicasAdded, m.replicasRemoved, m.bytesCopied} {
				v.WithLabelValues(c, typ)
			}
			m.inFlight.WithLabelValues(c, typ)
			for _, r := range o.SkipReasons {
				m.skipped.WithLabelValues(c, typ, r)
			}
		}
	}
}

// PlansAwaiting records how many plans of each cluster wait for approval.
func (m *Metrics) PlansAwaiting(n map[string]int) {
	if m == nil {
		return
	}
	for c, v := range n {
		m.plans.WithLabelValues(c).Set(float64(v))
	}
}

// Paused records whether cluster is paused, as this worker saw it last.
func (m *Metrics) Paused(cluster string, paused bool) {
	if m == nil {
		return
	}
	v := 0.0
	if paused {
		v = 1
	}
	m.paused.WithLabelValues(cluster).Set(v)
}

// EventDone records a result this worker stored for an event (not a replay).
func (m *Metrics) EventDone(res *events.Result) {
	if m == nil || res == nil {
		return
	}
	m.events.WithLabelValues(res.Type, string(res.Status)).Inc()
	if !res.StartedAt.IsZero() && !res.FinishedAt.IsZero() {
		m.eventDuration.WithLabelValues(res.Type).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	}
}

// Retry records an event given back for a later delivery after a transient failure.
func (m *Metrics) Retry(cluster, typ string) {
	if m != nil {
		m.retries.WithLabelValues(cluster, typ).Inc()
	}
}

// DeadLetter records an event copied to the dead letters.
func (m *Metrics) DeadLetter(cluster, typ string) {
	if m != nil {
		m.deadLetters.WithLabelValues(cluster, typ).Inc()
	}
}

// Handling records an event whose handling starts; the function returned records its end.
func (m *Metrics) Handling(cluster, typ string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.inFlight.WithLabelValues(cluster, typ)
	g.Inc()
	return sync.OnceFunc(g.Dec)
}

// WaitingForLock records an operation that asks for a cluster's lock; the function
// returned records the end of the wait (lock held or given up).
func (m *Metrics) WaitingForLock(cluster string) (done func()) {
	if m == nil {
		return func() {}
	}
	start := time.Now()
	g := m.lockWaits.WithLabelValues(cluster)
	g.Inc()
	return sync.OnceFunc(func() {
		g.Dec()
		m.lockWait.WithLabelValues(cluster).Observe(time.Since(start).Seconds())
	})
}

// OperationStarted records an operation starting under a cluster's lock at start; the
// function returned records its end.
func (m *Metrics) OperationStarted(cluster string, start time.Time) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.opStarted.WithLabelValues(cluster)
	m.mu.Lock()
	m.running[cluster]++
	g.Set(float64(start.UnixNano()) / 1e9)
	m.mu.Unlock()
	return sync.OnceFunc(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.running[cluster]--; m.running[cluster] <= 0 {
			delete(m.running, cluster)
			g.Set(0)
		}
	})
}

// Takeover records an operation of another event, left in the journal by a worker that is
// gone, that this worker finished or rolled back.
func (m *Metrics) Takeover() {
	if m != nil {
		m.takeovers.Inc()
	}
}

// ThrottlesSet records throttle configs an operation set.
func (m *Metrics) ThrottlesSet(cluster string, n int) {
	if m != nil && n > 0 {
		m.throttlesSet.WithLabelValues(cluster).Add(float64(n))
	}
}

// ThrottlesRestored records the throttle configs an operation had set when it ended:
// restored ones and kept ones (changed by someone else meanwhile).
func (m *Metrics) ThrottlesRestored(cluster string, restored, kept int) {
	if m == nil {
		return
	}
	if restored > 0 {
		m.throttlesRestored.WithLabelValues(cluster, ThrottleRestored).Add(float64(restored))
	}
	if kept > 0 {
		m.throttlesRestored.WithLabelValues(cluster, ThrottleKept).Add(float64(kept))
	}
}

// Operation records the result of an operation run by the handlers: its duration, and,
// unless it is a plan (dry run) or a replay, the changes it made and the partitions it
// skipped.
func (m *Metrics) Operation(res *events.Result) {
	if m == nil || res == nil || res.Replayed {
		return
	}
	if !res.StartedAt.IsZero() && !res.FinishedAt.IsZero() {
		m.opDuration.WithLabelValues(res.Type, string(res.Status)).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	}
	// A plan (a dry run's, or one awaiting approval) changed nothing; an approval's result
	// repeats the changes of the event it ran, which are counted under that event.
	if res.Status == events.StatusPlanned || res.Status.Interim() || res.Type == events.TypePlanApproved {
		return
	}
	var moved, added, removed, bytes int
	for _, c := range res.Changes {
		if c.LeaderAfter != c.LeaderBefore {
			moved++
		}
		added += countMissing(c.ReplicasAfter, c.ReplicasBefore)
		removed += countMissing(c.ReplicasBefore, c.ReplicasAfter)
		bytes += int(c.Bytes)
	}
	add := func(v *prometheus.CounterVec, n int) {
		if n > 0 {
			v.WithLabelValues(res.Cluster, res.Type).Add(float64(n))
		}
	}
	add(m.leadersMoved, moved)
	add(m.replicasAdded, added)
	add(m.replicasRemoved, removed)
	add(m.bytesCopied, bytes)
	for _, s := range res.Skipped {
		code := string(s.Code)
		if code == "" {
			code = "other"
		}
		m.skipped.WithLabelValues(res.Cluster, res.Type, code).Inc()
	}
}

// countMissing counts the brokers of a that b lacks.
func countMissing(a, b []int32) int {
	n := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			n++
		}
	}
	return n
}

// Alert records an alert received by the Alertmanager bridge.
func (m *Metrics) Alert(outcome string) {
	if m != nil {
		m.alerts.WithLabelValues(outcome).Inc()
	}
}

// WebhookRefused counts a webhook request refused, by reason.
func (m *Metrics) WebhookRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// DependencyUp records the outcome of a dependency's probe.
func (m *Metrics) DependencyUp(kind, name string, up bool) {
	if m != nil {
		m.dependencyUp.WithLabelValues(kind, name).Set(boolValue(up))
	}
}

// Ready records whether the worker is ready.
func (m *Metrics) Ready(ready bool) {
	if m != nil {
		m.ready.Set(boolValue(ready))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
