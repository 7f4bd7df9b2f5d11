package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestParsePreferredFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--topic", "orders", "--broker", "2"}
	defaults := preferredOptions{
		eventOptions: eventOptions{
			cluster: "local", timeout: defaultWaitTimeout, output: outputTable,
			id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
		},
		topic: "orders", broker: 2,
	}
	with := func(f func(*preferredOptions)) preferredOptions {
		o := defaults
		f(&o)
		return o
	}
	tests := []parseTest[preferredOptions]{
		{"defaults", base, defaults},
		{"broker 0", []string{"--cluster", "local", "--topic", "orders", "--broker", "0"},
			with(func(o *preferredOptions) { o.broker = 0 })},
		{"one partition", append(base, "--partition", "1"),
			with(func(o *preferredOptions) { o.partitions = []int32{1} })},
		{"repeated and listed partitions keep their order", append(base, "--partition", "4", "--partitions", "0, 2,3", "--partition", "1"),
			with(func(o *preferredOptions) { o.partitions = []int32{4, 0, 2, 3, 1} })},
		{"everything", append(base, "--partitions", "7", "--strategy", "zk-nudge", "--reason", "broker 1 is hot",
			"--dry-run", "--wait", "--timeout", "30s", "-o", "json", "--id", "ev-1", "--source", "me",
			"--expires-in", "10m", "--nats-url", "nats://flag:4222"),
			with(func(o *preferredOptions) {
				o.partitions, o.strategy, o.reason, o.dryRun, o.wait = []int32{7}, "zk-nudge", "broker 1 is hot", true, true
				o.timeout, o.output, o.id, o.source, o.expiresIn, o.natsURL = 30*time.Second, outputJSON, "ev-1", "me", 10*time.Minute, "nats://flag:4222"
			})},
		{"double-dash o and print", append(base, "--o", "json", "--print"),
			with(func(o *preferredOptions) { o.output, o.print = outputJSON, true })},
	}
	testParse(t, parsePreferredFlags, tests)

	e, _, _ := testEnv(map[string]string{envNATSURL: "nats://env:4222"})
	if got, _ := parsePreferredFlags(base, e); got.natsURL != "nats://env:4222" {
		t.Errorf("nats url from $%s = %q", envNATSURL, got.natsURL)
	}
}

func TestPreferredUsageErrors(t *testing.T) {
	base := []string{"preferred-leader", "--cluster", "local", "--topic", "orders", "--broker", "2"}
	tests := []usageErrorTest{
		{"nothing given", []string{"preferred-leader"},
			[]string{"--cluster is required", "--topic is required", "--broker is required", "Run 'emitter preferred-leader --help' for usage."}},
		{"bad cluster", []string{"preferred-leader", "--cluster", "prod.eu", "--topic", "t", "--broker", "1"},
			[]string{`--cluster "prod.eu": not a valid subject token`}},
		{"wildcard cluster", []string{"preferred-leader", "--cluster", ">", "--topic", "t", "--broker", "1"},
			[]string{`--cluster ">": not a valid subject token`}},
		{"topic with a space", []string{"preferred-leader", "--cluster", "local", "--topic", "my topic", "--broker", "1"},
			[]string{`--topic "my topic": ' ' is not allowed in a Kafka topic name`}},
		{"topic dot", []string{"preferred-leader", "--cluster", "local", "--topic", "..", "--broker", "1"},
			[]string{`--topic "..": "." and ".." are not topic names`}},
		{"topic too long", []string{"preferred-leader", "--cluster", "local", "--topic", strings.Repeat("t", 250), "--broker", "1"},
			[]string{"longer than Kafka's limit of 249 characters (250)"}},
		{"negative broker", []string{"preferred-leader", "--cluster", "local", "--topic", "t", "--broker", "-1"},
			[]string{"--broker -1: not a broker id (want 0 or more)"}},
		{"broker not a number", []string{"preferred-leader", "--cluster", "local", "--topic", "t", "--broker", "two"},
			[]string{`invalid value "two" for flag -broker: "two" is not an integer`}},
		{"broker too big", []string{"preferred-leader", "--cluster", "local", "--topic", "t", "--broker", "2147483648"},
			[]string{`invalid value "2147483648" for flag -broker`}},
		{"negative partition", append(base, "--partition", "-1"), []string{"partition -1: not a partition number (want 0 or more)"}},
		{"partition not a number", append(base, "--partition", "x"), []string{`invalid value "x" for flag -partition: "x" is not a partition number`}},
		{"partition list with a hole", append(base, "--partitions", "1,,2"), []string{`invalid value "1,,2" for flag -partitions: empty partition number in "1,,2"`}},
		{"duplicate partition", append(base, "--partition", "3", "--partitions", "1,3"), []string{"partition 3: given more than once"}},
		{"unknown strategy", append(base, "--strategy", "kraft"),
			[]string{`--strategy "kraft": unknown strategy (want auto, api, zk-reassign or zk-nudge)`}},
		{"unknown output", append(base, "-o", "yaml"), []string{`-o "yaml": unknown output format (want table or json)`}},
		{"print and wait", append(base, "--print", "--wait"), []string{"--print and --wait exclude each other"}},
		{"bad id", append(base, "--id", "a.b"), []string{`--id "a.b": not a valid subject token`}},
		{"zero timeout", append(base, "--timeout", "0s"), []string{"--timeout 0s: must be positive"}},
		{"negative expiry", append(base, "--expires-in", "-5m"), []string{"--expires-in -5m0s: must be positive"}},
		{"unknown flag", append(base, "--type", "x"), []string{"flag provided but not defined: -type"}},
		{"extra argument", append(base, "orders"), []string{`unexpected arguments ["orders"]`}},
		{"every problem at once", []string{"preferred-leader", "--cluster", "a b", "--broker", "-3", "--partitions", "-1,-1", "--strategy", "x"},
			[]string{`--cluster "a b"`, "--topic is required", "--broker -3", "partition -1: not a partition number", "partition -1: given more than once", `--strategy "x"`}},
	}
	testUsageErrors(t, tests)
}

// TestPreferredEventData checks the data of the event built for typical flag
// sets, and that the workers' decoder accepts it.
func TestPreferredEventData(t *testing.T) {
	base := []string{"--cluster", "local", "--topic", "orders", "--broker", "2"}
	tests := []eventDataTest{
		{"all partitions with the broker", base,
			`{"topic":"orders","preferred_leader":2}`},
		{"one partition", append(base, "--partition", "1"),
			`{"topic":"orders","partitions":[1],"preferred_leader":2}`},
		{"several partitions", append(base, "--partitions", "3,0", "--partition", "5"),
			`{"topic":"orders","partitions":[3,0,5],"preferred_leader":2}`},
		{"strategy, dry run and reason", append(base, "--partition", "0", "--strategy", "api", "--dry-run", "--reason", "broker 1 is \"hot\""),
			`{"topic":"orders","partitions":[0],"preferred_leader":2,"strategy":"api","dry_run":true,"reason":"broker 1 is \"hot\""}`},
		{"broker 0 is a broker", []string{"--cluster", "c", "--topic", "t.v1", "--broker", "0", "--strategy", "auto"},
			`{"topic":"t.v1","preferred_leader":0,"strategy":"auto"}`},
		{"flags of the emitter stay out of the data", append(base, "--wait", "--timeout", "5s", "-o", "json", "--id", "x", "--nats-url", "nats://n:4222"),
			`{"topic":"orders","preferred_leader":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, b := buildFromArgs(t, tt.args, parsePreferredFlags, buildPreferredEvent)
			dec := b.decode(t, o.cluster, "kafkamender.events."+o.cluster+".replica-change-requested", tt.want)
			if dec.ID != o.id || dec.Type != events.TypeReplicaChangeRequested || dec.Source != "emitter/alice@box" {
				t.Errorf("decoded envelope: %+v", dec.Envelope)
			}
			p := dec.Payload.(*events.ReplicaChange)
			if p.PreferredLeader == nil || *p.PreferredLeader != o.broker || p.DryRun != o.dryRun {
				t.Errorf("decoded payload: %+v", p)
			}
		})
	}
}

func TestPreferredPrint(t *testing.T) {
	ev, stderr := printEvent(t, []string{"preferred-leader", "--print",
		"--cluster", "local", "--topic", "orders", "--broker", "2", "--partition", "1",
		"--expires-in", "5m", "--nats-url", "nats://127.0.0.1:1",
	})
	checkPrintedEvent(t, ev, stderr, events.TypeReplicaChangeRequested, "kafkamender.events.local.replica-change-requested")
	if got, want := string(compact(t, ev.Data)), `{"topic":"orders","partitions":[1],"preferred_leader":2}`; got != want {
		t.Errorf("data %s, want %s", got, want)
	}
}

func TestPreferredPublishUnreachable(t *testing.T) {
	for _, wait := range []bool{false, true} {
		e, stdout, stderr := testEnv(nil)
		args := []string{"preferred-leader", "--cluster", "local", "--topic", "orders", "--broker", "2",
			"--nats-url", "nats://user:secret@127.0.0.1:1", "--timeout", "2s"}
		if wait {
			args = append(args, "--wait")
		}
		if code := run(t.Context(), args, e); code != exitFailure {
			t.Errorf("wait=%v: exit %d, want %d", wait, code, exitFailure)
		}
		if !strings.Contains(stderr.String(), "connect to nats nats://user:xxxxx@127.0.0.1:1") || strings.Contains(stderr.String(), "secret") {
			t.Errorf("wait=%v: stderr: %s", wait, stderr)
		}
		if stdout.Len() != 0 {
			t.Errorf("wait=%v: stdout: %s", wait, stdout)
		}
	}
}

func TestCommandHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"--help"}, []string{"emitter preferred-leader --cluster", "emitter result --id", "preferred-leader  make a broker",
			"result            print the stored result", "3  --wait: no result within --timeout", "4  result: no result stored"}},
		{[]string{"preferred-leader", "--help"}, []string{"Usage: emitter preferred-leader", "--broker ID", "--partition PARTITION",
			"--partitions LIST", "--strategy STRATEGY", "auto, api, zk-reassign or zk-nudge", "-o FORMAT", "--wait", "--print",
			"--timeout DURATION", "(default 2m0s)", "kafkamender.results.<id>", "3  with --wait: no result within --timeout"}},
		{[]string{"help", "preferred-leader"}, []string{"Usage: emitter preferred-leader"}},
		{[]string{"result", "-h"}, []string{"Usage: emitter result --id ID", "KAFKAMENDER_RESULTS", "4  no result stored", "-o FORMAT"}},
		{[]string{"help", "result"}, []string{"Usage: emitter result"}},
	}, nil)

	e, _, stderr := testEnv(nil)
	if code := run(t.Context(), []string{"help", "nope"}, e); code != exitUsage || !strings.Contains(stderr.String(), `unknown command "nope"`) {
		t.Errorf("help nope: exit %d, stderr %s", code, stderr)
	}
}

func TestResultUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"result"}, "--id is required"},
		{[]string{"result", "--id", "a.*"}, `--id "a.*": not a valid event id`},
		{[]string{"result", "--id", "a", "-o", "xml"}, `-o "xml": unknown output format (want table or json)`},
		{[]string{"result", "--id", "a", "--timeout", "-1s"}, "--timeout -1s: must be positive"},
		{[]string{"result", "--id", "a", "b"}, `unexpected arguments ["b"]`},
	} {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), tt.args, e); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tt.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), tt.want) || stdout.Len() != 0 {
			t.Errorf("%v: stderr lacks %q (or stdout not empty):\n%s%s", tt.args, tt.want, stderr, stdout)
		}
	}
}
