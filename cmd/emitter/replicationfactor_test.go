package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestParseByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"1048576", 1048576},
		{"1", 1},
		{" 7 ", 7},
		{"100B", 100},
		{"100 b", 100},
		{"1KB", 1000},
		{"50MB", 50_000_000},
		{"2GB", 2_000_000_000},
		{"1KiB", 1024},
		{"10MiB", 10 << 20},
		{"10 MiB", 10 << 20},
		{"10mib", 10 << 20},
		{"10MIB", 10 << 20},
		{"1GiB", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"0.5KB", 500},
		{"1.1KiB", 1126}, // 1126.4: the fraction of a byte is dropped
		{"10MiB/s", 10 << 20},
		{"10 MB/s", 10_000_000},
		{"8589934591GiB", 8589934591 << 30},
	} {
		got, err := parseByteSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}

	for _, tt := range []struct{ in, want string }{
		{"", "is not a size"},
		{"MiB", "is not a size"},
		{"-1MB", "is not a size"},
		{".5MB", "is not a size"},
		{"1.MB", "is not a size"},
		{"1..5MB", "is not a size"},
		{"1.2.3", "is not a size"},
		{"10k", `unknown unit "k" (want B, KB, MB, GB, KiB, MiB or GiB; no unit: bytes)`},
		{"10 MiBs", `unknown unit "MiBs"`},
		{"10mbps", `unknown unit "mbps"`},
		{"1TB", `unknown unit "TB"`},
		{"1e6", `unknown unit "e6"`},
		{"10 M iB", `unknown unit "M iB"`},
		{"8589934592GiB", "too large"},
		{"99999999999999999999", "too large"},
	} {
		got, err := parseByteSize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseByteSize(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRFFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--topic", "orders", "--rf", "3"}
	defaults := rfOptions{
		eventOptions: eventOptions{
			cluster: "local", timeout: 2 * time.Hour, output: outputTable,
			id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
		},
		topic: "orders", factor: 3,
	}
	with := func(f func(*rfOptions)) rfOptions {
		o := defaults
		f(&o)
		return o
	}
	tests := []parseTest[rfOptions]{
		{"defaults: --timeout is 2h", base, defaults},
		{"rf 1", []string{"--cluster", "local", "--topic", "orders", "--rf", "1"},
			with(func(o *rfOptions) { o.factor = 1 })},
		{"partitions", append(base, "--partition", "4", "--partitions", "0,2"),
			with(func(o *rfOptions) { o.partitions = []int32{4, 0, 2} })},
		{"throttle in MiB", append(base, "--throttle", "10MiB"),
			with(func(o *rfOptions) { o.throttle = 10 << 20 })},
		{"throttle in MB", append(base, "--throttle=50MB"),
			with(func(o *rfOptions) { o.throttle = 50_000_000 })},
		{"throttle in bytes", append(base, "--throttle", "1048576"),
			with(func(o *rfOptions) { o.throttle = 1 << 20 })},
		{"operation timeout and wait timeout are apart", append(base, "--timeout-op", "30m", "--wait", "--timeout", "45m"),
			with(func(o *rfOptions) { o.opTimeout, o.wait, o.timeout = 30*time.Minute, true, 45*time.Minute })},
		{"everything", append(base, "--partitions", "7", "--strategy", "zk-reassign", "--throttle", "1.5GiB", "--timeout-op", "3h",
			"--reason", "more copies", "--dry-run", "--wait", "--timeout", "4h", "-o", "json", "--id", "ev-1", "--source", "me",
			"--expires-in", "10m", "--nats-url", "nats://flag:4222"),
			with(func(o *rfOptions) {
				o.partitions, o.strategy, o.throttle, o.opTimeout = []int32{7}, "zk-reassign", 3<<29, 3*time.Hour
				o.reason, o.dryRun, o.wait, o.timeout, o.output = "more copies", true, true, 4*time.Hour, outputJSON
				o.id, o.source, o.expiresIn, o.natsURL = "ev-1", "me", 10*time.Minute, "nats://flag:4222"
			})},
		{"print", append(base, "--print", "--strategy", "api"),
			with(func(o *rfOptions) { o.print, o.strategy = true, "api" })},
	}
	testParse(t, parseRFFlags, tests)
}

func TestRFUsageErrors(t *testing.T) {
	base := []string{"replication-factor", "--cluster", "local", "--topic", "orders", "--rf", "3"}
	tests := []usageErrorTest{
		{"nothing given", []string{"replication-factor"},
			[]string{"--cluster is required", "--topic is required", "--rf is required", "Run 'emitter replication-factor --help' for usage."}},
		{"rf 0", []string{"replication-factor", "--cluster", "local", "--topic", "orders", "--rf", "0"}, []string{"--rf 0: must be at least 1"}},
		{"negative rf", []string{"replication-factor", "--cluster", "local", "--topic", "orders", "--rf", "-2"}, []string{"--rf -2: must be at least 1"}},
		{"rf not a number", []string{"replication-factor", "--cluster", "local", "--topic", "orders", "--rf", "three"},
			[]string{`invalid value "three" for flag -rf: "three" is not an integer`}},
		{"zk-nudge refused", append(base, "--strategy", "zk-nudge"),
			[]string{"--strategy zk-nudge: not for replication-factor: zk-nudge never changes a replica set, and the worker rejects it (want auto, api or zk-reassign)"}},
		{"unknown strategy", append(base, "--strategy", "kraft"), []string{`--strategy "kraft": unknown strategy (want auto, api or zk-reassign)`}},
		{"throttle with a bad unit", append(base, "--throttle", "10mbps"),
			[]string{`invalid value "10mbps" for flag -throttle: "10mbps": unknown unit "mbps" (want B, KB, MB, GB, KiB, MiB or GiB; no unit: bytes)`}},
		{"throttle not a size", append(base, "--throttle", "fast"), []string{`invalid value "fast" for flag -throttle: "fast" is not a size`}},
		{"negative throttle", append(base, "--throttle", "-1MiB"), []string{`invalid value "-1MiB" for flag -throttle: "-1MiB" is not a size`}},
		{"zero throttle", append(base, "--throttle", "0"), []string{"--throttle: must be at least 1 byte per second"}},
		{"less than a byte", append(base, "--throttle", "0.5B"), []string{"--throttle: must be at least 1 byte per second"}},
		{"zero operation timeout", append(base, "--timeout-op", "0s"), []string{"--timeout-op 0s: must be positive"}},
		{"negative operation timeout", append(base, "--timeout-op", "-5m"), []string{"--timeout-op -5m0s: must be positive"}},
		{"operation timeout not a duration", append(base, "--timeout-op", "30"), []string{`invalid value "30" for flag -timeout-op`}},
		{"zero wait timeout", append(base, "--timeout", "0s"), []string{"--timeout 0s: must be positive"}},
		{"bad topic", []string{"replication-factor", "--cluster", "local", "--topic", "a b", "--rf", "2"},
			[]string{`--topic "a b": ' ' is not allowed in a Kafka topic name`}},
		{"duplicate partition", append(base, "--partitions", "1,1"), []string{"partition 1: given more than once"}},
		{"negative partition", append(base, "--partition", "-1"), []string{"partition -1: not a partition number (want 0 or more)"}},
		{"broker is not a flag here", append(base, "--broker", "1"), []string{"flag provided but not defined: -broker"}},
		{"print and wait", append(base, "--print", "--wait"), []string{"--print and --wait exclude each other"}},
		{"every problem at once", []string{"replication-factor", "--cluster", "a.b", "--rf", "0", "--strategy", "zk-nudge",
			"--throttle", "0", "--timeout-op", "-1s", "-o", "yaml"},
			[]string{`--cluster "a.b"`, "--topic is required", "--rf 0", "--strategy zk-nudge", "--throttle:", "--timeout-op -1s", `-o "yaml"`}},
	}
	testUsageErrors(t, tests)
}

// TestRFEventData checks the data of the event built for typical flag sets,
// and that the workers' decoder accepts it and reads what was asked.
func TestRFEventData(t *testing.T) {
	base := []string{"--cluster", "local", "--topic", "orders", "--rf", "3"}
	tests := []eventDataTest{
		{"every partition", base,
			`{"topic":"orders","replication_factor":3}`},
		{"throttle and operation timeout", append(base, "--throttle", "10MiB", "--timeout-op", "30m"),
			`{"topic":"orders","replication_factor":3,"throttle_bytes_per_sec":10485760,"timeout":"30m0s"}`},
		{"some partitions, strategy, dry run and reason", append(base, "--partitions", "2,0", "--strategy", "api", "--dry-run", "--reason", "rack \"b\" added"),
			`{"topic":"orders","partitions":[2,0],"replication_factor":3,"strategy":"api","dry_run":true,"reason":"rack \"b\" added"}`},
		{"lower to 1, 1000-based throttle", []string{"--cluster", "c", "--topic", "t.v1", "--rf", "1", "--throttle", "50MB", "--strategy", "zk-reassign"},
			`{"topic":"t.v1","replication_factor":1,"strategy":"zk-reassign","throttle_bytes_per_sec":50000000}`},
		{"flags of the emitter stay out of the data", append(base, "--wait", "--timeout", "3h", "-o", "json", "--id", "x", "--nats-url", "nats://n:4222"),
			`{"topic":"orders","replication_factor":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, b := buildFromArgs(t, tt.args, parseRFFlags, buildRFEvent)
			dec := b.decode(t, o.cluster, "kafkamender.events."+o.cluster+".replica-change-requested", tt.want)
			if dec.ID != o.id || dec.Type != events.TypeReplicaChangeRequested {
				t.Errorf("decoded envelope: %+v", dec.Envelope)
			}
			p := dec.Payload.(*events.ReplicaChange)
			if p.ReplicationFactor == nil || *p.ReplicationFactor != int(o.factor) || p.PreferredLeader != nil ||
				p.Topic != o.topic || !reflect.DeepEqual(p.Partitions, o.partitions) || p.Strategy != o.strategy ||
				p.ThrottleBytesPerSec != o.throttle || p.Timeout.Duration != o.opTimeout || p.DryRun != o.dryRun || p.Reason != o.reason {
				t.Errorf("decoded payload: %+v", p)
			}
		})
	}
}

func TestRFHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"--help"}, []string{
			"emitter replication-factor --cluster CLUSTER --topic TOPIC --rf N [flags]",
			"    replication-factor\n                      give the partitions of a topic N replicas each",
			"a live progress bar\nwhen stderr is a terminal, a line per report otherwise",
		}},
		{[]string{"replication-factor", "--help"}, []string{
			"Usage: emitter replication-factor --cluster CLUSTER --topic TOPIC --rf N [flags]",
			"--rf N\n", "--partition PARTITION", "--partitions LIST",
			"--strategy STRATEGY\n        cluster backend (strategy) the worker uses: auto, api or zk-reassign",
			"zk-nudge cannot change replica sets",
			"--throttle SIZE", "KiB, MiB, GiB: of 1024",
			"--timeout-op DURATION", "--timeout is how long the emitter waits",
			"--timeout DURATION\n        with --wait, give up waiting after duration (connecting and publishing included) (default 2h0m0s)",
			`"replication_factor":N`, `"throttle_bytes_per_sec":BYTES`, `"timeout":"30m0s"`,
			"kafkamender.results.<id>", "kafkamender.progress.<id>", "--timeout is 2h\nby default",
			"-o FORMAT", "--wait", "--print", "--dry-run", "3  with --wait: no result within --timeout",
		}},
		{[]string{"help", "replication-factor"}, []string{"Usage: emitter replication-factor"}},
	}, nil)

	// The other event commands keep their own default --timeout.
	e, stdout, _ := testEnv(nil)
	run(t.Context(), []string{"preferred-leader", "--help"}, e)
	if !strings.Contains(stdout.String(), "(default 2m0s)") || strings.Contains(stdout.String(), "2h0m0s") {
		t.Errorf("preferred-leader --timeout default changed:\n%s", stdout)
	}
}

func TestRFPrint(t *testing.T) {
	ev, _ := printEvent(t, []string{"replication-factor", "--print", "--cluster", "local", "--topic", "orders",
		"--rf", "3", "--throttle", "10MiB", "--timeout-op", "30m", "--nats-url", "nats://127.0.0.1:1"})
	if got, want := string(compact(t, ev.Data)), `{"topic":"orders","replication_factor":3,"throttle_bytes_per_sec":10485760,"timeout":"30m0s"}`; got != want {
		t.Errorf("data %s, want %s", got, want)
	}
}

// TestRFWait runs replication-factor --wait against a NATS server in the test
// process, with a fake worker that reports the copy's progress: a line per
// report on stderr (the test's stderr is no terminal), then the result table.
func TestRFWait(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	answerRF := func(ev *events.Event) events.Result {
		p := ev.Payload.(*events.ReplicaChange)
		for _, rep := range [][]byte{
			progressJSON(0, 2, 0, 200*mib, 1, 2),
			progressJSON(1, 2, 150*mib, 200*mib, 2, 2),
		} {
			_ = nc.Publish(events.ProgressSubject(ev.ID), rep)
		}
		res := events.Result{Status: events.StatusSucceeded, Strategy: "api", Reason: p.Reason}
		for _, part := range p.Partitions {
			res.Changes = append(res.Changes, events.Change{
				TopicPartition: events.TopicPartition{Topic: p.Topic, Partition: part},
				ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1,
			})
		}
		return res
	}
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, answerRF)
	published := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(events.Subject("local", events.TypeReplicaChangeRequested), published)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil { // the server knows the subscription before the emitter publishes
		t.Fatal(err)
	}

	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"replication-factor", "--nats-url", url, "--cluster", "local", "--topic", "orders",
		"--rf", "3", "--partitions", "0,1", "--throttle", "10MiB", "--timeout-op", "30m", "--id", "rf-1", "--wait", "--timeout", "10s"}, e)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"event rf-1 published to stream KAFKAMENDER_EVENTS at sequence 1\n",
		"waiting up to 10s for the result on kafkamender.results.rf-1\n",
		`progress: {"id":"rf-1","step":"plan","partitions":1}` + "\n", // a shape the emitter does not know: as it came
		"progress: 0/2 partitions  0 B / 200.0 MiB  batch 1/2\n",
		"progress: 1/2 partitions  150.0 MiB / 200.0 MiB  batch 2/2\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr.String(), "\r") {
		t.Errorf("a progress bar was drawn on stderr, which is no terminal:\n%q", stderr)
	}
	for _, want := range []string{"event rf-1: succeeded\n", "changes: 2\n", "orders-0   1,2              1,2,3           1              1\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	m := <-published
	ev, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Payload.(*events.ReplicaChange); *got.ReplicationFactor != 3 || got.ThrottleBytesPerSec != 10<<20 || got.Timeout.Duration != 30*time.Minute {
		t.Errorf("published data: %+v", got)
	}
}

// TestRFWaitLive: when stderr is a terminal, the progress reports redraw one
// bar line, ended before the emitter stops.
func TestRFWaitLive(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, func(ev *events.Event) events.Result {
		_ = nc.Publish(events.ProgressSubject(ev.ID), progressJSON(1, 4, 0, 0, 1, 1))
		_ = nc.Publish(events.ProgressSubject(ev.ID), progressJSON(3, 4, 0, 0, 1, 1))
		return events.Result{Status: events.StatusSucceeded}
	})

	e, stdout, stderr := testEnv(nil)
	e.stderrIsTerminal = true
	code := run(t.Context(), []string{"replication-factor", "--nats-url", url, "--cluster", "local", "--topic", "orders",
		"--rf", "2", "--id", "rf-live", "--wait", "--timeout", "10s"}, e)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	want := `progress: {"id":"rf-live","step":"plan","partitions":1}` + "\n" +
		"\r[=====>                  ] 1/4 partitions  batch 1/1" +
		"\r[=================>      ] 3/4 partitions  batch 1/1\n"
	if !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr does not end with %q:\n%q", want, stderr)
	}
	if !strings.HasPrefix(stdout.String(), "event rf-live: succeeded\n") {
		t.Errorf("stdout:\n%s", stdout)
	}
}
