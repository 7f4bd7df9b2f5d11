package metrics_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{Clusters: []string{"c"}, SkipReasons: []string{"not_in_sync"}, Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// A dry run's plan moves no counter of changes, only the duration; a real run's result
// moves each; a replayed result moves nothing.
func TestOperationCountsOnlyWhatHappened(t *testing.T) {
	m, reg := newMetrics(t)
	now := time.Now()
	two := int32(2)
	changes := []events.Change{
		{TopicPartition: events.TopicPartition{Topic: "t", Partition: 0}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}, LeaderBefore: 1, LeaderAfter: 2},
		{TopicPartition: events.TopicPartition{Topic: "t", Partition: 1}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1, Bytes: 1000},
		{TopicPartition: events.TopicPartition{Topic: "t", Partition: 2}, ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{1}, LeaderBefore: 1, LeaderAfter: 1},
		{TopicPartition: events.TopicPartition{Topic: "t", Partition: 3}, ReplicasBefore: []int32{2}, ReplicasAfter: []int32{2}, LeaderBefore: 2, LeaderAfter: 2, Broker: &two, DirBefore: "/a", DirAfter: "/b", Bytes: 500},
	}
	skip := events.Skip{TopicPartition: events.TopicPartition{Topic: "t", Partition: 9}, Reason: "x", Code: "not_in_sync"}
	for _, status := range []events.Status{events.StatusPlanned, events.StatusSucceeded} {
		m.Operation(&events.Result{Type: events.TypeReplicaChangeRequested, Cluster: "c", Status: status, StartedAt: now, FinishedAt: now.Add(time.Second),
			Changes: changes, Skipped: []events.Skip{skip}})
	}
	m.Operation(&events.Result{Type: events.TypeReplicaChangeRequested, Cluster: "c", Status: events.StatusSucceeded, Replayed: true,
		StartedAt: now, FinishedAt: now, Changes: changes, Skipped: []events.Skip{skip}})

	const typ = `cluster="c",type="replica-change-requested"`
	for family, want := range map[string]string{
		"kafkamender_leaders_moved_total":                 `kafkamender_leaders_moved_total{` + typ + `} 1`,
		"kafkamender_replicas_added_total":                `kafkamender_replicas_added_total{` + typ + `} 1`,
		"kafkamender_replicas_removed_total":              `kafkamender_replicas_removed_total{` + typ + `} 2`,
		"kafkamender_bytes_copied_total":                  `kafkamender_bytes_copied_total{` + typ + `} 1500`,
		"kafkamender_partitions_skipped_total":            `kafkamender_partitions_skipped_total{cluster="c",reason="not_in_sync",type="replica-change-requested"} 1`,
		"kafkamender_operation_duration_seconds":          "kafkamender_operation_duration_seconds{status=\"planned\",type=\"replica-change-requested\"} 1\nkafkamender_operation_duration_seconds{status=\"succeeded\",type=\"replica-change-requested\"} 1",
		"kafkamender_events_total":                        "",
		"kafkamender_throttles_set_total":                 "",
		"kafkamender_operation_started_timestamp_seconds": "",
	} {
		if got := metricstest.NonZero(t, reg, family); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", family, got, want)
		}
	}
}

// Every series of the label values known at the start exists at zero, so that rules and
// dashboards never query an absent series.
func TestKnownSeriesExistFromTheStart(t *testing.T) {
	_, reg := newMetrics(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, mf := range mfs {
		count[mf.GetName()] = len(mf.GetMetric())
	}
	types, statuses := len(events.Types()), len(metrics.Statuses())
	for name, want := range map[string]int{
		"kafkamender_events_total":                        types * statuses,
		"kafkamender_event_duration_seconds":              types,
		"kafkamender_operation_duration_seconds":          types * statuses,
		"kafkamender_retries_total":                       types,
		"kafkamender_dead_letters_total":                  types,
		"kafkamender_operations_in_flight":                types,
		"kafkamender_operation_started_timestamp_seconds": 1,
		"kafkamender_lock_wait_seconds":                   1,
		"kafkamender_lock_waiting":                        1,
		"kafkamender_takeovers_total":                     1,
		"kafkamender_leaders_moved_total":                 types,
		"kafkamender_replicas_added_total":                types,
		"kafkamender_replicas_removed_total":              types,
		"kafkamender_bytes_copied_total":                  types,
		"kafkamender_partitions_skipped_total":            types,
		"kafkamender_throttles_set_total":                 1,
		"kafkamender_throttles_restored_total":            2,
		"kafkamender_alertmanager_alerts_total":           len(metrics.AlertOutcomes()),
		"kafkamender_ready":                               1,
		"kafkamender_build_info":                          1,
	} {
		if count[name] != want {
			t.Errorf("%s: %d series at the start, want %d", name, count[name], want)
		}
	}
	if v := metricstest.Value(t, reg, `kafkamender_build_info{version="v1.2.3"}`); v != 1 {
		t.Errorf("build info = %v", v)
	}
}

func TestOperationStartedAndInFlight(t *testing.T) {
	m, reg := newMetrics(t)
	const started = `kafkamender_operation_started_timestamp_seconds{cluster="c"}`
	const inFlight = `kafkamender_operations_in_flight{cluster="c",type="broker-overloaded"}`
	const waiting = `kafkamender_lock_waiting{cluster="c"}`
	handled := m.Handling("c", events.TypeBrokerOverloaded)
	waited := m.WaitingForLock("c")
	if metricstest.Value(t, reg, waiting) != 1 || metricstest.Value(t, reg, inFlight) != 1 {
		t.Fatalf("waiting %v, in flight %v; want 1, 1", metricstest.Value(t, reg, waiting), metricstest.Value(t, reg, inFlight))
	}
	waited()
	waited() // once only
	if metricstest.Value(t, reg, waiting) != 0 || metricstest.Value(t, reg, `kafkamender_lock_wait_seconds{cluster="c"}`) != 1 {
		t.Errorf("after the wait: waiting %v, waits observed %v", metricstest.Value(t, reg, waiting), metricstest.Value(t, reg, `kafkamender_lock_wait_seconds{cluster="c"}`))
	}
	at := time.Unix(1_700_000_000, 0)
	done := m.OperationStarted("c", at)
	if got := metricstest.Value(t, reg, started); got != 1_700_000_000 {
		t.Errorf("started = %v", got)
	}
	done()
	done()
	handled()
	if metricstest.Value(t, reg, started) != 0 || metricstest.Value(t, reg, inFlight) != 0 {
		t.Errorf("after the operation: started %v, in flight %v", metricstest.Value(t, reg, started), metricstest.Value(t, reg, inFlight))
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *metrics.Metrics
	m.EventDone(&events.Result{})
	m.Operation(&events.Result{})
	m.Retry("c", "t")
	m.DeadLetter("c", "t")
	m.Handling("c", "t")()
	m.WaitingForLock("c")()
	m.OperationStarted("c", time.Now())()
	m.Takeover()
	m.ThrottlesSet("c", 1)
	m.ThrottlesRestored("c", 1, 1)
	m.Alert(metrics.AlertPublished)
	m.DependencyUp("nats", "nats", true)
	m.Ready(true)
}

// docs/metrics.md lists every metric, with its type and labels, and nothing else.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(kafkamender_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	documented := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		labels := strings.Split(strings.TrimSpace(m[3]), ", ")
		slices.Sort(labels)
		documented[m[1]] = [2]string{m[2], strings.Join(labels, ", ")}
	}
	m, reg := newMetrics(t)
	m.DependencyUp("nats", "nats", true) // made by the worker for each dependency
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		d, ok := documented[mf.GetName()]
		if !ok {
			t.Errorf("docs/metrics.md does not list %s", mf.GetName())
			continue
		}
		delete(documented, mf.GetName())
		if want := strings.ToLower(mf.GetType().String()); d[0] != want {
			t.Errorf("docs/metrics.md: %s is a %s, the doc says %s", mf.GetName(), want, d[0])
		}
		if got, want := d[1], labelsOf(mf); got != want {
			t.Errorf("docs/metrics.md: %s has labels %q, the doc says %q", mf.GetName(), want, got)
		}
	}
	for name := range documented {
		t.Errorf("docs/metrics.md lists %s, which the worker does not have", name)
	}
}

// labelsOf is the label names of a family as the doc writes them: `a`, `b` (sorted).
func labelsOf(mf *dto.MetricFamily) string {
	var names []string
	for _, l := range mf.GetMetric()[0].GetLabel() {
		names = append(names, "`"+l.GetName()+"`")
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
