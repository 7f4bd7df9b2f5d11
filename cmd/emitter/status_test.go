package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/pause"
)

func TestWriteStatus(t *testing.T) {
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	st := []clusterStatus{
		{Cluster: "kraft", Lock: lockStatus{Location: "nats kv KAFKAMENDER_LOCKS", Holder: &lockHolder{Worker: "w-1", Event: "rf-3"}},
			InFlight: &inFlight{Event: "rf-3", Type: "replica-change-requested", Step: journal.StepCopying, Worker: "w-1", Attempt: 2,
				Started: now.Add(-90 * time.Second), Partitions: 8, Reassignments: 6},
			Waiting: 3, Out: 1, PlansAwaiting: []string{"plan-1", "plan-2", "plan-3", "plan-4", "plan-5", "plan-6", "plan-7"}},
		{Cluster: "local", Paused: &pause.Pause{Cluster: "local", Reason: "INC-42", By: "oncall", Event: "p-1", Since: now.Add(-time.Hour)},
			Lock: lockStatus{Location: "zookeeper 127.0.0.1:2181 /kafkamender/locks"}, ControlWaiting: 1},
	}
	var b strings.Builder
	writeStatus(&b, st, now)
	want := `cluster kraft
  paused:     no
  lock:       held by w-1 for event rf-3 (nats kv KAFKAMENDER_LOCKS)
  in flight:  rf-3 (replica-change-requested): step copying, attempt 2 by w-1, started 1m30s ago; 8 partitions planned, 6 copies submitted
  waiting:    3 events, 1 out; 0 control events
  approval:   7 plans awaiting: plan-1, plan-2, plan-3, plan-4, plan-5 and 2 more (emitter plans --cluster kraft)

cluster local
  paused:     yes: cluster local paused by oncall since 2026-12-04T17:00:00Z (event p-1): INC-42
  lock:       in zookeeper 127.0.0.1:2181 /kafkamender/locks (its holder is the worker of the operation in flight)
  in flight:  none
  waiting:    0 events, 0 out; 1 control events
  approval:   none awaiting
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	writeStatus(&b, nil, now)
	if !strings.Contains(b.String(), "no cluster") {
		t.Errorf("no clusters: %q", b.String())
	}
}

func TestStatusUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"bad cluster", []string{"status", "--cluster", "a b"}, []string{`--cluster "a b"`}},
		{"bad consumer", []string{"status", "--consumer", "a.b"}, []string{`--consumer "a.b": not a consumer name`}},
		{"bad output", []string{"status", "-o", "yaml"}, []string{`-o "yaml": unknown output format`}},
		{"bad long output", []string{"status", "--output", "yaml"}, []string{`-o "yaml": unknown output format`}},
	})
}
