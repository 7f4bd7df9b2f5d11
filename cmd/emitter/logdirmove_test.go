package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestParseLogDirFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--broker", "1"}
	defaults := logDirOptions{
		eventOptions: eventOptions{
			cluster: "local", timeout: 2 * time.Hour, output: outputTable,
			id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
		},
		broker: 1,
	}
	with := func(f func(*logDirOptions)) logDirOptions {
		o := defaults
		f(&o)
		return o
	}
	testParse(t, parseLogDirFlags, []parseTest[logDirOptions]{
		{"balance fullest to emptiest", base, defaults},
		{"balance between two", append(base, "--from-dir", "/a", "--to-dir", "/b", "--throttle", "10MiB", "--timeout-op", "20m"),
			with(func(o *logDirOptions) {
				o.fromDir, o.toDir, o.throttle, o.opTimeout = "/a", "/b", 10<<20, 20*time.Minute
			})},
		{"one replica", append(base, "--topic", "orders", "--partition", "0", "--to-dir", "/b", "--dry-run", "--wait"),
			with(func(o *logDirOptions) {
				o.topic, o.partition, o.hasPart, o.toDir, o.dryRun, o.wait = "orders", 0, true, "/b", true, true
			})},
	})
}

func TestLogDirUsageErrors(t *testing.T) {
	base := []string{"logdir-move", "--cluster", "local", "--broker", "1"}
	testUsageErrors(t, []usageErrorTest{
		{"nothing given", []string{"logdir-move"}, []string{"--cluster is required", "--broker is required"}},
		{"negative broker", []string{"logdir-move", "--cluster", "local", "--broker", "-1"}, []string{"--broker -1: must not be negative"}},
		{"topic without partition", append(base, "--topic", "o", "--to-dir", "/b"), []string{"--topic and --partition go together"}},
		{"one replica without target", append(base, "--topic", "o", "--partition", "1"), []string{"--to-dir is required to move one replica"}},
		{"both kinds", append(base, "--topic", "o", "--partition", "1", "--from-dir", "/a", "--to-dir", "/b"), []string{"--from-dir is for a balance"}},
		{"same dirs", append(base, "--from-dir", "/a", "--to-dir", "/a"), []string{`--from-dir and --to-dir are the same directory "/a"`}},
		{"negative partition", append(base, "--topic", "o", "--partition", "-3", "--to-dir", "/b"), []string{"--partition -3: must not be negative"}},
		{"zero throttle", append(base, "--throttle", "0"), []string{"--throttle: must be at least 1 byte per second"}},
		{"bad operation timeout", append(base, "--timeout-op", "-1m"), []string{"--timeout-op -1m0s: must be positive"}},
	})
}

func TestLogDirPrint(t *testing.T) {
	ev, _ := printEvent(t, []string{"logdir-move", "--print", "--cluster", "local", "--broker", "1", "--topic", "orders",
		"--partition", "2", "--to-dir", "/data2", "--throttle", "1MiB", "--nats-url", "nats://127.0.0.1:1"})
	if got, want := string(compact(t, ev.Data)), `{"broker":1,"topic":"orders","partition":2,"to_dir":"/data2","throttle_bytes_per_sec":1048576}`; got != want {
		t.Errorf("data %s, want %s", got, want)
	}
}

func TestLogDirResultTable(t *testing.T) {
	b := int32(1)
	r := &events.Result{ID: "x", Type: events.TypeLogDirMoveRequested, Cluster: "local", Status: events.StatusPlanned,
		Note: "Broker 1: /a holds 10.0 MiB and /b holds 0 B; moving 1 replicas (5.0 MiB) leaves 5.0 MiB and 5.0 MiB, within the tolerance (1.0 MiB).",
		Changes: []events.Change{{TopicPartition: events.TopicPartition{Topic: "orders", Partition: 3}, Broker: &b, DirBefore: "/a", DirAfter: "/b", Bytes: 5 << 20,
			ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2}, LeaderBefore: 1, LeaderAfter: 1}}}
	var out bytes.Buffer
	if err := writeResultTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PARTITION  BROKER  DIR BEFORE  DIR AFTER  BYTES", "orders-3   1       /a          /b         5242880", "within the tolerance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestLogDirWait runs logdir-move --wait against a NATS server in the test process, with a
// fake worker that reports the copy's progress, then answers with the move.
func TestLogDirWait(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeLogDirMoveRequested), 0, func(ev *events.Event) events.Result {
		p := ev.Payload.(*events.LogDirMove)
		_ = nc.Publish(events.ProgressSubject(ev.ID), progressJSON(0, 1, 10*mib, 40*mib, 1, 1))
		return events.Result{Status: events.StatusSucceeded, Strategy: "api", Changes: []events.Change{{
			TopicPartition: events.TopicPartition{Topic: p.Topic, Partition: *p.Partition}, Broker: p.Broker,
			DirBefore: "/data1", DirAfter: p.ToDir, Bytes: 40 * mib}}}
	})
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"logdir-move", "--nats-url", url, "--cluster", "local", "--broker", "1", "--topic", "orders",
		"--partition", "3", "--to-dir", "/data2", "--id", "ld-1", "--wait", "--timeout", "10s"}, e)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if want := "progress: 0/1 partitions  10.0 MiB / 40.0 MiB  batch 1/1\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	for _, want := range []string{"event ld-1: succeeded\n", "orders-3   1       /data1      /data2     41943040"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}
