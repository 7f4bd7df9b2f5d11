package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/plan"
)

func TestParseOverloadedFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--broker", "1"}
	defaults := overloadedOptions{
		eventOptions: eventOptions{
			cluster: "local", timeout: defaultWaitTimeout, output: outputTable,
			id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
		},
		broker: 1,
	}
	with := func(f func(*overloadedOptions)) overloadedOptions {
		o := defaults
		f(&o)
		return o
	}
	tests := []parseTest[overloadedOptions]{
		{"defaults", base, defaults},
		{"broker 0", []string{"--cluster", "local", "--broker", "0"},
			with(func(o *overloadedOptions) { o.broker = 0 })},
		{"repeated and listed topics keep their order", append(base, "--topic", "orders", "--topics", "a.v1, b_2,c-3", "--topic", "z"),
			with(func(o *overloadedOptions) { o.topics = []string{"orders", "a.v1", "b_2", "c-3", "z"} })},
		{"excluded topics", append(base, "--exclude-topics", "__consumer_offsets,_schemas", "--exclude-topic", "audit"),
			with(func(o *overloadedOptions) { o.excludeTopics = []string{"__consumer_offsets", "_schemas", "audit"} })},
		{"max partitions 0 is no limit", append(base, "--max-partitions", "0"), defaults},
		{"everything", append(base, "--topics", "orders,payments", "--exclude-topic", "audit", "--max-partitions", "25",
			"--demote-to-end", "--reason", "broker 1 is hot", "--dry-run", "--wait", "--timeout", "30s", "-o", "json",
			"--id", "ev-1", "--source", "me", "--expires-in", "10m", "--nats-url", "nats://flag:4222"),
			with(func(o *overloadedOptions) {
				o.topics, o.excludeTopics, o.maxPartitions, o.demoteToEnd = []string{"orders", "payments"}, []string{"audit"}, 25, true
				o.reason, o.dryRun, o.wait = "broker 1 is hot", true, true
				o.timeout, o.output, o.id, o.source, o.expiresIn, o.natsURL = 30*time.Second, outputJSON, "ev-1", "me", 10*time.Minute, "nats://flag:4222"
			})},
		{"double-dash o and print", append(base, "--o", "json", "--print"),
			with(func(o *overloadedOptions) { o.output, o.print = outputJSON, true })},
	}
	testParse(t, parseOverloadedFlags, tests)

	e, _, _ := testEnv(map[string]string{envNATSURL: "nats://env:4222"})
	if got, _ := parseOverloadedFlags(base, e); got.natsURL != "nats://env:4222" {
		t.Errorf("nats url from $%s = %q", envNATSURL, got.natsURL)
	}
}

func TestOverloadedUsageErrors(t *testing.T) {
	base := []string{"broker-overloaded", "--cluster", "local", "--broker", "1"}
	tests := []usageErrorTest{
		{"nothing given", []string{"broker-overloaded"},
			[]string{"--cluster is required", "--broker is required", "Run 'emitter broker-overloaded --help' for usage."}},
		{"bad cluster", []string{"broker-overloaded", "--cluster", "prod.eu", "--broker", "1"},
			[]string{`--cluster "prod.eu": not a valid subject token`}},
		{"wildcard cluster", []string{"broker-overloaded", "--cluster", "*", "--broker", "1"},
			[]string{`--cluster "*": not a valid subject token`}},
		{"negative broker", []string{"broker-overloaded", "--cluster", "local", "--broker", "-1"},
			[]string{"--broker -1: not a broker id (want 0 or more)"}},
		{"broker not a number", []string{"broker-overloaded", "--cluster", "local", "--broker", "one"},
			[]string{`invalid value "one" for flag -broker: "one" is not an integer`}},
		{"broker too big", []string{"broker-overloaded", "--cluster", "local", "--broker", "2147483648"},
			[]string{`invalid value "2147483648" for flag -broker`}},
		{"topic with a space", append(base, "--topic", "my topic"),
			[]string{`--topic "my topic": ' ' is not allowed in a Kafka topic name`}},
		{"listed topic dot", append(base, "--topics", "orders,.."),
			[]string{`--topic "..": "." and ".." are not topic names`}},
		{"topic too long", append(base, "--topic", strings.Repeat("t", 250)),
			[]string{"longer than Kafka's limit of 249 characters (250)"}},
		{"excluded topic with a slash", append(base, "--exclude-topic", "a/b"),
			[]string{`--exclude-topic "a/b": '/' is not allowed in a Kafka topic name`}},
		{"empty topic", append(base, "--topic", ""),
			[]string{`invalid value "" for flag -topic: empty topic name in ""`}},
		{"topic list with a hole", append(base, "--topics", "a,,b"),
			[]string{`invalid value "a,,b" for flag -topics: empty topic name in "a,,b"`}},
		{"excluded list with a trailing comma", append(base, "--exclude-topics", "a,"),
			[]string{`invalid value "a," for flag -exclude-topics: empty topic name in "a,"`}},
		{"duplicate topic", append(base, "--topic", "orders", "--topics", "payments,orders", "--topic", "orders"),
			[]string{`--topic "orders": given more than once`}},
		{"duplicate excluded topic", append(base, "--exclude-topics", "audit,audit"),
			[]string{`--exclude-topic "audit": given more than once`}},
		{"topic included and excluded", append(base, "--topics", "orders,payments", "--exclude-topic", "payments"),
			[]string{`topic "payments": both included (--topic) and excluded (--exclude-topic)`}},
		{"negative max partitions", append(base, "--max-partitions", "-1"),
			[]string{"--max-partitions -1: must be 0 (no limit) or more"}},
		{"max partitions not a number", append(base, "--max-partitions", "all"),
			[]string{`invalid value "all" for flag -max-partitions`}},
		{"unknown output", append(base, "-o", "yaml"), []string{`-o "yaml": unknown output format (want table or json)`}},
		{"print and wait", append(base, "--print", "--wait"), []string{"--print and --wait exclude each other"}},
		{"bad id", append(base, "--id", "a.b"), []string{`--id "a.b": not a valid subject token`}},
		{"zero timeout", append(base, "--timeout", "0s"), []string{"--timeout 0s: must be positive"}},
		{"negative expiry", append(base, "--expires-in", "-5m"), []string{"--expires-in -5m0s: must be positive"}},
		{"no strategy in this event", append(base, "--strategy", "api"), []string{"flag provided but not defined: -strategy"}},
		{"no partitions in this event", append(base, "--partition", "1"), []string{"flag provided but not defined: -partition"}},
		{"extra argument", append(base, "orders"), []string{`unexpected arguments ["orders"]`}},
		{"every problem at once", []string{"broker-overloaded", "--cluster", "a b", "--broker", "-3", "--topics", "x,x,y z",
			"--exclude-topic", "x", "--max-partitions", "-2", "-o", "xml", "--print", "--wait"},
			[]string{`--cluster "a b"`, "--broker -3", `--topic "x": given more than once`, `--topic "y z"`,
				`topic "x": both included`, "--max-partitions -2", `-o "xml"`, "--print and --wait"}},
	}
	testUsageErrors(t, tests)

	// Each problem is reported once, however often the topic repeats.
	e, _, stderr := testEnv(nil)
	run(t.Context(), append(base, "--topics", "x,x,x", "--exclude-topics", "x,x"), e)
	for _, w := range []string{`--topic "x": given more than once`, `--exclude-topic "x": given more than once`, `topic "x": both included`} {
		if n := strings.Count(stderr.String(), w); n != 1 {
			t.Errorf("%q reported %d times:\n%s", w, n, stderr)
		}
	}
}

// TestOverloadedEventData checks the data of the event built for typical flag
// sets, and that the workers' decoder accepts it.
func TestOverloadedEventData(t *testing.T) {
	base := []string{"--cluster", "local", "--broker", "1"}
	tests := []eventDataTest{
		{"every topic", base, `{"broker":1}`},
		{"broker 0 is a broker", []string{"--cluster", "c", "--broker", "0"}, `{"broker":0}`},
		{"some topics", append(base, "--topic", "orders", "--topics", "payments,t.v1"),
			`{"broker":1,"topics":["orders","payments","t.v1"]}`},
		{"every topic but some", append(base, "--exclude-topics", "__consumer_offsets,_schemas"),
			`{"broker":1,"exclude_topics":["__consumer_offsets","_schemas"]}`},
		{"capped and demoted", append(base, "--max-partitions", "50", "--demote-to-end"),
			`{"broker":1,"max_partitions":50,"demote_to_end":true}`},
		{"dry run with a reason", append(base, "--dry-run", "--reason", `alert "BrokerHot" fired`),
			`{"broker":1,"dry_run":true,"reason":"alert \"BrokerHot\" fired"}`},
		{"everything", append(base, "--topic", "orders", "--exclude-topic", "audit", "--max-partitions", "3",
			"--demote-to-end", "--dry-run", "--reason", "hot"),
			`{"broker":1,"topics":["orders"],"exclude_topics":["audit"],"max_partitions":3,"demote_to_end":true,"dry_run":true,"reason":"hot"}`},
		{"flags of the emitter stay out of the data", append(base, "--wait", "--timeout", "5s", "-o", "json", "--id", "x",
			"--source", "s", "--expires-in", "1m", "--nats-url", "nats://n:4222"),
			`{"broker":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, b := buildFromArgs(t, tt.args, parseOverloadedFlags, buildOverloadedEvent)
			dec := b.decode(t, o.cluster, "kafkamender.events."+o.cluster+".broker-overloaded", tt.want)
			if dec.ID != o.id || dec.Type != events.TypeBrokerOverloaded || dec.Source != o.source {
				t.Errorf("decoded envelope: %+v", dec.Envelope)
			}
			p := dec.Payload.(*events.BrokerOverloaded)
			if p.Broker == nil || *p.Broker != o.broker || !reflect.DeepEqual(p.Topics, o.topics) ||
				!reflect.DeepEqual(p.ExcludeTopics, o.excludeTopics) || p.MaxPartitions != o.maxPartitions ||
				p.DemoteToEnd != o.demoteToEnd || p.DryRun != o.dryRun || p.Reason != o.reason {
				t.Errorf("decoded payload: %+v", p)
			}
		})
	}
}

func TestOverloadedPrint(t *testing.T) {
	ev, stderr := printEvent(t, []string{"broker-overloaded", "--print",
		"--cluster", "local", "--broker", "1", "--exclude-topic", "audit", "--demote-to-end",
		"--expires-in", "5m", "--nats-url", "nats://127.0.0.1:1",
	})
	checkPrintedEvent(t, ev, stderr, events.TypeBrokerOverloaded, "kafkamender.events.local.broker-overloaded")
	if got, want := string(compact(t, ev.Data)), `{"broker":1,"exclude_topics":["audit"],"demote_to_end":true}`; got != want {
		t.Errorf("data %s, want %s", got, want)
	}
}

func TestOverloadedHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"--help"}, []string{"emitter broker-overloaded --cluster CLUSTER --broker BROKER [flags]",
			"    broker-overloaded\n                      move partition leadership off a broker"}},
		{[]string{"broker-overloaded", "--help"}, []string{"Usage: emitter broker-overloaded", "--broker ID",
			"--topic TOPIC", "--topics LIST", "--exclude-topic TOPIC", "--exclude-topics LIST", "--max-partitions N",
			"--demote-to-end", "--dry-run", "--reason WORDS", "-o FORMAT", "--wait", "--print", "--timeout DURATION",
			"(default 2m0s)", "kafkamender.events.<cluster>.broker-overloaded", "kafkamender.results.<id>",
			`"demote_to_end":true`, "3  with --wait: no result within --timeout"}},
		{[]string{"help", "broker-overloaded"}, []string{"Usage: emitter broker-overloaded"}},
	}, func(args []string, stdout string) {
		if strings.Contains(stdout, "(default 0)") {
			t.Errorf("%v: help shows a zero default:\n%s", args, stdout)
		}
	})
}

// overloadedResult is a broker-overloaded result with many changes: broker 1
// sheds the leadership of 150 partitions to brokers 2-5, with
// --demote-to-end. orders-7 was led by broker 5 already (broker 1 only headed
// its assigned replicas): a change, but no leader moved.
func overloadedResult() events.Result {
	r := events.Result{
		ID: "shed-1", Type: events.TypeBrokerOverloaded, Cluster: "local", Status: events.StatusPartial,
		Strategy: "api", Attempt: 1, Worker: "host-1234",
		StartedAt: started, FinishedAt: started.Add(8765 * time.Millisecond),
		Reason: "alert BrokerLeaderSkew fired for broker 1",
		Skipped: []events.Skip{
			{TopicPartition: tp("logs", 0), Reason: "no live in-sync replica other than broker 1 (isr [1])", Code: plan.SkipNoCandidate},
			{TopicPartition: tp("logs", 3), Reason: "under reassignment (adding [4], removing [1])", Code: plan.SkipReassigning},
			{TopicPartition: tp("payments", 50), Reason: "beyond max_partitions 150", Code: plan.SkipCapped},
			{TopicPartition: tp("payments", 51), Reason: "an older worker's skip,\nwithout a code"},
		},
		Noop: []events.TopicPartition{tp("audit", 0)},
	}
	for i := range 150 {
		p := tp("orders", int32(i))
		if i >= 100 {
			p = tp("payments", int32(i-100))
		}
		to, other := int32(2+i%4), int32(2+(i+1)%4)
		c := events.Change{TopicPartition: p, ReplicasBefore: []int32{1, to, other}, ReplicasAfter: []int32{to, other, 1},
			LeaderBefore: 1, LeaderAfter: to}
		if i == 7 {
			c.LeaderBefore = to
		}
		r.Changes = append(r.Changes, c)
	}
	return r
}

func TestOverloadedResultTable(t *testing.T) {
	res := overloadedResult()
	var b bytes.Buffer
	if err := writeResultTable(&b, &res, false); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "result-broker-overloaded.txt"), b.Bytes())

	out := b.String()
	for _, want := range []string{
		"changes: 150\n",
		"payments-49  1,3,4            3,4,1           1              3\n",
		"leaders moved: 149; per broker after: 2=38 3=38 4=37 5=36\n",
		"PARTITION    CODE                  REASON\n",
		"payments-51  -                     an older worker's skip,; without a code\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n < 150 {
		t.Errorf("table has %d lines for 150 changes", n)
	}
}

func TestLeadersMovedLine(t *testing.T) {
	ch := func(before, after int32) events.Change {
		return events.Change{TopicPartition: tp("t", 0), LeaderBefore: before, LeaderAfter: after}
	}
	for _, tt := range []struct {
		name    string
		status  events.Status
		changes []events.Change
		want    string
	}{
		{"by broker id, numerically", events.StatusSucceeded, []events.Change{ch(1, 10), ch(1, 2), ch(1, 10), ch(-1, 3)},
			"leaders moved: 4; per broker after: 2=1 3=1 10=2\n"},
		{"a dry run plans", events.StatusPlanned, []events.Change{ch(1, 2)},
			"leaders to move: 1; per broker after: 2=1\n"},
		{"reorders only", events.StatusSucceeded, []events.Change{ch(2, 2), ch(3, 3)},
			"leaders moved: 0\n"},
		{"no leader after is no move", events.StatusFailed, []events.Change{ch(1, -1), ch(1, 4)},
			"leaders moved: 1; per broker after: 4=1\n"},
	} {
		if got := leadersMoved(tt.status, tt.changes); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestResultTableOnlyOverloadedSummary: the leaders line is for
// broker-overloaded results; the CODE column is for any result whose skipped
// partitions have codes.
func TestResultTableOnlyOverloadedSummary(t *testing.T) {
	res := sampleResults["result-succeeded"] // replica-change-requested
	res.Skipped = []events.Skip{{TopicPartition: tp("orders", 4), Reason: "broker 2 is not in the ISR [1 3]", Code: plan.SkipNotInSync}}
	var b bytes.Buffer
	if err := writeResultTable(&b, &res, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "leaders moved") {
		t.Errorf("a replica-change-requested result has the leaders line:\n%s", b.String())
	}
	if want := "PARTITION  CODE         REASON\norders-4   not_in_sync  broker 2 is not in the ISR [1 3]\n"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}

	res = overloadedResult()
	res.Changes, res.Status = nil, events.StatusNoop
	b.Reset()
	if err := writeResultTable(&b, &res, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "changes: none\n") || strings.Contains(b.String(), "leaders moved") {
		t.Errorf("a broker-overloaded result without changes:\n%s", b.String())
	}
}

// answerOverloaded answers a broker-overloaded request by moving three
// leaders off the broker (planned on a dry run); a reason of the form
// "status:<status>" asks for that status.
func answerOverloaded(ev *events.Event) events.Result {
	p := ev.Payload.(*events.BrokerOverloaded)
	status := events.StatusSucceeded
	if p.DryRun {
		status = events.StatusPlanned
	}
	if s, ok := strings.CutPrefix(p.Reason, "status:"); ok {
		status = events.Status(s)
	}
	res := events.Result{Status: status, Strategy: "api", Reason: p.Reason, Skipped: []events.Skip{}}
	if status == events.StatusFailed {
		res.Error = "not controller"
	}
	b := *p.Broker
	for i, to := range []int32{b + 1, b + 2, b + 1} {
		res.Changes = append(res.Changes, events.Change{
			TopicPartition: events.TopicPartition{Topic: "orders", Partition: int32(i)},
			ReplicasBefore: []int32{b, to}, ReplicasAfter: []int32{to, b}, LeaderBefore: b, LeaderAfter: to,
		})
	}
	return res
}

// TestEventCommandsExitStatus: preferred-leader and broker-overloaded map
// results, usage errors and timeouts to the same exit statuses, and the
// result command maps stored results the same way.
func TestEventCommandsExitStatus(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, answerPreferred)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeBrokerOverloaded), 0, answerOverloaded)

	commands := map[string]func(cluster, id string, extra ...string) []string{
		"preferred-leader": func(cluster, id string, extra ...string) []string {
			return preferredArgs(url, cluster, id, extra...)
		},
		"broker-overloaded": func(cluster, id string, extra ...string) []string {
			return append([]string{"broker-overloaded", "--nats-url", url, "--cluster", cluster, "--broker", "1", "--id", id}, extra...)
		},
	}
	for name, args := range commands {
		for _, tt := range []struct {
			extra  []string
			status events.Status
		}{
			{nil, events.StatusSucceeded},
			{[]string{"--dry-run"}, events.StatusPlanned},
			{[]string{"--reason", "status:noop"}, events.StatusNoop},
			{[]string{"--reason", "status:partial"}, events.StatusPartial},
			{[]string{"--reason", "status:failed"}, events.StatusFailed},
			{[]string{"--reason", "status:rejected"}, events.StatusRejected},
			{[]string{"--reason", "status:expired"}, events.StatusExpired},
		} {
			want := exitForStatus(tt.status)
			id := fmt.Sprintf("%s-%s", name, tt.status)
			e, stdout, stderr := testEnv(nil)
			if code := run(t.Context(), args("local", id, append(tt.extra, "--wait", "--timeout", "10s")...), e); code != want {
				t.Errorf("%s %s: exit %d, want %d; stderr:\n%s", name, tt.status, code, want, stderr)
			}
			if line := fmt.Sprintf("event %s: %s\n", id, tt.status); !strings.HasPrefix(stdout.String(), line) {
				t.Errorf("%s %s: stdout does not start with %q:\n%s", name, tt.status, line, stdout)
			}
			if name == "broker-overloaded" && tt.status != events.StatusPlanned &&
				!strings.Contains(stdout.String(), "leaders moved: 3; per broker after: 2=2 3=1\n") {
				t.Errorf("%s %s: no leaders line:\n%s", name, tt.status, stdout)
			}
			waitStored(t, js, id)
			e, _, stderr = testEnv(nil)
			if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", id, "-o", "json"}, e); code != want {
				t.Errorf("result %s: exit %d, want %d; stderr:\n%s", id, code, want, stderr)
			}
		}

		// Usage errors.
		e, _, _ := testEnv(nil)
		if code := run(t.Context(), args("local", "bad.id"), e); code != exitUsage {
			t.Errorf("%s with a bad id: exit %d, want %d", name, code, exitUsage)
		}
		// No worker for this cluster: no result in time.
		e, _, stderr := testEnv(nil)
		if code := run(t.Context(), args("nobody", name+"-slow", "--wait", "--timeout", "300ms"), e); code != exitNoReply {
			t.Errorf("%s without a worker: exit %d, want %d; stderr:\n%s", name, code, exitNoReply, stderr)
		}
		if want := "emitter " + name + ": no result for event " + name + "-slow after 300ms"; !strings.Contains(stderr.String(), want) {
			t.Errorf("%s without a worker: stderr lacks %q:\n%s", name, want, stderr)
		}
		// Without --wait: published, exit 0.
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), args("nobody", name+"-nowait"), e); code != exitOK ||
			!strings.HasPrefix(stdout.String(), "event "+name+"-nowait published to stream KAFKAMENDER_EVENTS") {
			t.Errorf("%s without --wait: exit %d, stdout %q; stderr:\n%s", name, code, stdout, stderr)
		}
	}
}
