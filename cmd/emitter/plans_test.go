package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
)

// planAt is when the sample plans were made.
var planAt = time.Date(2026, 12, 4, 17, 30, 0, 0, time.UTC)

// samplePlans are the plans of the golden tests, by golden file name.
func samplePlans() map[string]*approval.Plan {
	awaiting := &approval.Plan{
		ID: "plan-5c0e1d2a3b4c5d6e7f80", Cluster: "prod-eu", Event: "rf-orders-3", Type: events.TypeReplicaChangeRequested,
		Source: "alertmanager/prod", Reason: "orders needs 3 replicas", Request: json.RawMessage(`{}`), Strategy: "api",
		Changes: []events.Change{
			{TopicPartition: tp("orders", 0), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1},
			{TopicPartition: tp("orders", 1), ReplicasBefore: []int32{2, 3}, ReplicasAfter: []int32{4, 3, 2}, LeaderBefore: 2, LeaderAfter: 4},
			{TopicPartition: tp("orders", 2), ReplicasBefore: []int32{3, 1}, ReplicasAfter: []int32{3, 1, 2}, LeaderBefore: -1, LeaderAfter: 3,
				Note: "spans 1 rack instead of 2"},
		},
		Skipped:   []events.Skip{{TopicPartition: tp("orders", 5), Reason: "under-replicated: waits for its ISR"}},
		Noop:      []events.TopicPartition{tp("orders", 4)},
		Notes:     []string{"throttle 50.0 MiB/s"},
		Timeout:   time.Hour,
		Size:      approval.Size{Partitions: 3, Bytes: 3 << 30, LeadersMoved: 2},
		Why:       "3221225472 bytes to copy, over 1073741824",
		PlannedBy: "worker-a", CreatedAt: planAt, ExpiresAt: planAt.Add(time.Hour), State: approval.Awaiting,
	}
	broker := int32(2)
	logdir := &approval.Plan{
		ID: "plan-0a1b2c3d4e5f60718293", Cluster: "kraft", Event: "ld-7", Type: events.TypeLogDirMoveRequested, Source: "emitter/alice@box",
		Changes: []events.Change{
			{TopicPartition: tp("logs", 0), ReplicasBefore: []int32{2, 3}, ReplicasAfter: []int32{2, 3}, LeaderBefore: 2, LeaderAfter: 2,
				Broker: &broker, DirBefore: "/data/1", DirAfter: "/data/2", Bytes: 700 << 20},
		},
		Size: approval.Size{Partitions: 1, Bytes: 700 << 20},
		Why:  "the event asks for approval (data.approval)", PlannedBy: "worker-b", CreatedAt: planAt.Add(time.Minute),
		ExpiresAt: planAt.Add(-time.Minute + 2*time.Hour), State: approval.Denied,
		DecidedBy: "emitter/bob@box", DecidedEvent: "d-1", DecidedAt: planAt.Add(10 * time.Minute), DecidedWhy: "not during the sale",
	}
	stale := &approval.Plan{
		ID: "plan-99887766554433221100", Cluster: "prod-eu", Event: "bo-2", Type: events.TypeBrokerOverloaded, Source: "alertmanager/prod",
		Changes: []events.Change{
			{TopicPartition: tp("orders", 3), ReplicasBefore: []int32{2, 4}, ReplicasAfter: []int32{4, 2}, LeaderBefore: 2, LeaderAfter: 4},
		},
		Size:        approval.Size{Partitions: 1, LeadersMoved: 1},
		Why:         "the policy requires approval of every plan of broker-overloaded on prod-eu",
		PlannedBy:   "worker-a",
		CreatedAt:   planAt.Add(2 * time.Minute),
		ExpiresAt:   planAt.Add(62 * time.Minute),
		State:       approval.Stale,
		DecidedBy:   "emitter/alice@box",
		DecidedAt:   planAt.Add(5 * time.Minute),
		Differences: []string{"orders-3: leader 2 → 4", "brokers: 5 added"},
	}
	return map[string]*approval.Plan{"plan-awaiting": awaiting, "plan-logdir-denied": logdir, "plan-stale": stale}
}

// The plans' time: 20 minutes after the first was made.
var plansNow = planAt.Add(20 * time.Minute)

func TestPlanShowTable(t *testing.T) {
	for name, p := range samplePlans() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writePlan(&b, p, plansNow); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".txt"), b.Bytes())
		})
	}
}

func TestPlansTable(t *testing.T) {
	s := samplePlans()
	all := []*approval.Plan{s["plan-awaiting"], s["plan-logdir-denied"], s["plan-stale"]}
	var b bytes.Buffer
	if err := writePlans(&b, all[:1], false, plansNow); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "plans.txt"), b.Bytes())
	b.Reset()
	if err := writePlans(&b, all, true, plansNow); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "plans-all.txt"), b.Bytes())

	// An awaiting plan past its expiry, not swept yet.
	b.Reset()
	if err := writePlans(&b, all[:1], false, planAt.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if want := "2026-12-04T18:30:00Z (passed)"; !strings.Contains(b.String(), want) {
		t.Errorf("an expired plan's table lacks %q:\n%s", want, b.String())
	}
}

func TestNoPlans(t *testing.T) {
	for _, tt := range []struct {
		cluster      string
		all, missing bool
		want         string
	}{
		{"", false, false, "no plan awaits approval"},
		{"local", false, false, "no plan awaits approval on cluster local"},
		{"", true, false, "no plan stored"},
		{"local", false, true, "no plan awaits approval on cluster local (bucket KAFKAMENDER_PLANS does not exist: no plan has waited for approval on this NATS server)"},
	} {
		if got := noPlans(tt.cluster, tt.all, tt.missing); got != tt.want {
			t.Errorf("noPlans(%q, %v, %v) = %q, want %q", tt.cluster, tt.all, tt.missing, got, tt.want)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		42 * time.Second: "42s", 42*time.Minute + 59*time.Second: "42m", time.Hour: "1h", 65 * time.Minute: "1h5m", 167 * time.Hour: "167h",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestPlansUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"plans: bad cluster", []string{"plans", "--cluster", "a b"}, []string{`--cluster "a b"`, "Run 'emitter plans --help' for usage."}},
		{"plans: bad output", []string{"plans", "-o", "yaml"}, []string{`-o "yaml": unknown output format`}},
		{"plans: bad long output", []string{"plans", "--output", "yaml"}, []string{`-o "yaml": unknown output format`}},
		{"plans: zero timeout", []string{"plans", "--timeout", "0s"}, []string{"--timeout 0s: must be positive"}},
		{"plans: no id flag", []string{"plans", "--id", "x"}, []string{"flag provided but not defined: -id"}},
		{"plans: extra argument", []string{"plans", "show"}, []string{`unexpected arguments ["show"]`}},
		{"plan: no subcommand", []string{"plan"}, []string{"emitter plan: want a subcommand: emitter plan show --id PLAN-ID"}},
		{"plan: unknown subcommand", []string{"plan", "list"}, []string{`emitter plan: unknown subcommand "list" (want show)`}},
		{"plan show: no id", []string{"plan", "show"}, []string{"--id is required: the id of the plan", "Run 'emitter plan show --help' for usage."}},
		{"plan show: bad id", []string{"plan", "show", "--id", "a.b"}, []string{`--id "a.b"`}},
		{"plan show: bad cluster", []string{"plan", "show", "--id", "p", "--cluster", "*"}, []string{`--cluster "*"`}},
		{"plan show: no all flag", []string{"plan", "show", "--id", "p", "--all"}, []string{"flag provided but not defined: -all"}},
	})
}

func TestPlansHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"plans", "--help"}, []string{"Usage: emitter plans [--cluster CLUSTER] [--all]", "KAFKAMENDER_PLANS", "  --all", "  --cluster CLUSTER", "  -o FORMAT"}},
		{[]string{"help", "plans"}, []string{"Usage: emitter plans"}},
		{[]string{"plan", "show", "--help"}, []string{"Usage: emitter plan show --id PLAN-ID", "  --id ID", "  --cluster CLUSTER"}},
		{[]string{"plan", "--help"}, []string{"Usage: emitter plan show --id PLAN-ID"}},
		{[]string{"help", "plan"}, []string{"Usage: emitter plan show --id PLAN-ID"}},
		{[]string{"--help"}, []string{"emitter approve --id PLAN-ID", "emitter deny --id PLAN-ID", "emitter plans [--cluster CLUSTER]",
			"emitter plan show --id PLAN-ID", "awaiting_approval", "rejected, denied, expired or cancelled"}},
	}, nil)
}
