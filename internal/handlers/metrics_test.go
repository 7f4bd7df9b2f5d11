package handlers

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// A dry run's plan changes no counter of changes; a real run's result does.
func TestMetricsCountOnlyWhatHappened(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	change := plan.Change{TopicPartition: events.TopicPartition{Topic: "t", Partition: 0}, LeaderBefore: 1, LeaderAfter: 2}
	skip := plan.Skip{TopicPartition: events.TopicPartition{Topic: "t", Partition: 1}, Reason: "x", Code: plan.SkipNotInSync}
	for _, status := range []events.Status{events.StatusPlanned, events.StatusSucceeded} {
		m.observe(&events.Result{Type: events.TypeBrokerOverloaded, Cluster: "c", Status: status, StartedAt: now, FinishedAt: now,
			Changes: []plan.Change{change}, Skipped: []plan.Skip{skip}})
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kafkamender_leaders_moved_total Partitions whose leader a handler moved (verified), by cluster and event type.
# TYPE kafkamender_leaders_moved_total counter
kafkamender_leaders_moved_total{cluster="c",type="broker-overloaded"} 1
# HELP kafkamender_partitions_skipped_total Partitions a handler left alone, by cluster, event type and reason code.
# TYPE kafkamender_partitions_skipped_total counter
kafkamender_partitions_skipped_total{cluster="c",reason="not_in_sync",type="broker-overloaded"} 1
`), "kafkamender_leaders_moved_total", "kafkamender_partitions_skipped_total"); err != nil {
		t.Error(err)
	}
}
