package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestDecisionUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"approve: no id", []string{"approve", "--cluster", "local"},
			[]string{"--id is required: the id of the plan to approve", "Run 'emitter approve --help' for usage."}},
		{"approve: bad id", []string{"approve", "--cluster", "local", "--id", "a.b"}, []string{`--id "a.b"`}},
		{"approve: bad cluster", []string{"approve", "--cluster", "a.b", "--id", "plan-1"}, []string{`--cluster "a.b": not a valid subject token`}},
		{"approve: no dry run", []string{"approve", "--cluster", "local", "--id", "plan-1", "--dry-run"},
			[]string{"--dry-run: an answer to a plan has no plan of its own ('emitter plan show --id plan-1' shows the plan)"}},
		{"approve: its own id is --approve-id", []string{"approve", "--cluster", "local", "--id", "plan-1", "--approve-id", "a.b"},
			[]string{`--id "a.b"`}},
		{"approve: print and wait", []string{"approve", "--cluster", "local", "--id", "plan-1", "--print", "--wait"},
			[]string{"--print and --wait exclude each other"}},
		{"approve: no deny-id", []string{"approve", "--cluster", "local", "--id", "plan-1", "--deny-id", "d"},
			[]string{"flag provided but not defined: -deny-id"}},
		{"deny: no reason", []string{"deny", "--cluster", "local", "--id", "plan-1"},
			[]string{"--reason is required: say why the plan is denied", "Run 'emitter deny --help' for usage."}},
		{"deny: blank reason", []string{"deny", "--cluster", "local", "--id", "plan-1", "--reason", "  "},
			[]string{"--reason is required"}},
		{"deny: nothing given", []string{"deny"}, []string{"--id is required: the id of the plan to deny", "--reason is required"}},
		{"deny: no dry run", []string{"deny", "--cluster", "local", "--id", "plan-1", "--reason", "r", "--dry-run"},
			[]string{"--dry-run: an answer to a plan has no plan of its own"}},
		{"deny: no approve-id", []string{"deny", "--cluster", "local", "--id", "plan-1", "--reason", "r", "--approve-id", "a"},
			[]string{"flag provided but not defined: -approve-id"}},
	})
}

// approve and deny without --cluster pass the flag checks (the cluster is read from the
// plan); with the other flags as they are.
func TestParseDecisionFlags(t *testing.T) {
	e, _, _ := testEnv(nil)
	o, err := parseDecisionFlags([]string{"--id", "plan-1", "--reason", "INC-7"}, e, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.cluster != "" || o.plan != "plan-1" || o.reason != "INC-7" || o.id != "generated-id" || o.source != "emitter/alice@box" ||
		o.timeout != defaultRFWaitTimeout || o.natsURL == "" {
		t.Errorf("approve options: %+v", o)
	}
	o, err = parseDecisionFlags([]string{"--id", "plan-1", "--reason", "no", "--deny-id", "d-1"}, e, true)
	if err != nil {
		t.Fatal(err)
	}
	if !o.deny || o.id != "d-1" || o.timeout != defaultWaitTimeout {
		t.Errorf("deny options: %+v", o)
	}
}

// The plan is --id; the answer's own id is --approve-id or --deny-id.
func TestDecisionEventData(t *testing.T) {
	for _, tt := range []struct {
		name, typ string
		args      []string
		data, id  string
	}{
		{"approve", events.TypePlanApproved, []string{"--cluster", "local", "--id", "plan-1", "--approve-id", "a-1"}, `{"plan_id":"plan-1"}`, "a-1"},
		{"approve with a reason", events.TypePlanApproved, []string{"--cluster", "local", "--id", "plan-1", "--reason", "INC-7"},
			`{"plan_id":"plan-1","reason":"INC-7"}`, "generated-id"},
		{"deny", events.TypePlanDenied, []string{"--cluster", "local", "--id", "plan-1", "--reason", "not now", "--deny-id", "d-1"},
			`{"plan_id":"plan-1","reason":"not now"}`, "d-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			deny := tt.typ == events.TypePlanDenied
			parse := func(args []string, e env) (decisionOptions, error) { return parseDecisionFlags(args, e, deny) }
			build := func(o decisionOptions, now time.Time) (events.Envelope, string, []byte, error) { return o.build(now) }
			o, b := buildFromArgs(t, tt.args, parse, build)
			dec := b.decode(t, o.cluster, "kafkamender.events.local."+tt.typ, tt.data)
			if dec.Type != tt.typ || dec.ID != tt.id {
				t.Errorf("event %s %s", dec.Type, dec.ID)
			}
			if pd, ok := dec.Payload.(*events.PlanDecision); !ok || pd.PlanID != "plan-1" {
				t.Errorf("payload %#v", dec.Payload)
			}
		})
	}
}

// --print with --cluster prints the event without reading the plan (no NATS).
func TestDecisionPrint(t *testing.T) {
	ev, stderr := printEvent(t, []string{"approve", "--cluster", "local", "--id", "plan-1", "--expires-in", "5m", "--print",
		"--nats-url", "nats://127.0.0.1:1"})
	checkPrintedEvent(t, ev, stderr, events.TypePlanApproved, "kafkamender.events.local.plan-approved")
	ev, stderr = printEvent(t, []string{"deny", "--cluster", "local", "--id", "plan-1", "--reason", "no", "--expires-in", "5m", "--print",
		"--nats-url", "nats://127.0.0.1:1"})
	checkPrintedEvent(t, ev, stderr, events.TypePlanDenied, "kafkamender.events.local.plan-denied")
}

// Without --cluster, the plan must be read: a NATS server that cannot be reached is a
// failure that says to give --cluster.
func TestDecisionWithoutClusterUnreachable(t *testing.T) {
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"approve", "--id", "plan-1", "--nats-url", "nats://127.0.0.1:1", "--timeout", "1s"}, e)
	if code != exitFailure || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	if want := "(give --cluster to send the answer without reading the plan)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

func TestDecisionHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"approve", "--help"}, []string{"Usage: emitter approve --id PLAN-ID [--cluster CLUSTER]", "plan-approved",
			`{"plan_id":PLAN-ID,"reason":...}`, "kafkamender.results.<approve-id>", "  --approve-id ID", "  --cluster CLUSTER",
			"approval.approvers", "(default 2h0m0s)"}},
		{[]string{"help", "approve"}, []string{"Usage: emitter approve"}},
		{[]string{"deny", "--help"}, []string{"Usage: emitter deny --id PLAN-ID [--cluster CLUSTER] --reason WORDS", "plan-denied",
			"kafkamender.results.<deny-id>", "  --deny-id ID", "(default 2m0s)"}},
	}, nil)
}
