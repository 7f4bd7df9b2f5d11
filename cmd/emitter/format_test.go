package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func tp(topic string, p int32) events.TopicPartition {
	return events.TopicPartition{Topic: topic, Partition: p}
}

var started = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// sampleResults are the results of the golden tests, by golden file name.
var sampleResults = map[string]events.Result{
	"result-succeeded": {
		ID: "a1b2", Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: events.StatusSucceeded,
		Strategy: "api", Attempt: 1, Worker: "host-1234",
		StartedAt: started, FinishedAt: started.Add(2345678 * time.Microsecond),
		Changes: []events.Change{
			{TopicPartition: tp("orders", 1), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 1, 3}, LeaderBefore: 1, LeaderAfter: 2},
			{TopicPartition: tp("orders", 12), ReplicasBefore: []int32{3, 4, 2}, ReplicasAfter: []int32{2, 4, 3}, LeaderBefore: 3, LeaderAfter: 2},
			{TopicPartition: tp("orders", 7), ReplicasBefore: []int32{2, 4}, ReplicasAfter: []int32{2, 4}, LeaderBefore: -1, LeaderAfter: 2},
		},
		Skipped: []events.Skip{{TopicPartition: tp("orders", 4), Reason: "broker 2 is not in the in-sync replicas"}},
		Noop:    []events.TopicPartition{tp("orders", 0), tp("orders", 3)},
		Reason:  "broker 1 is hot",
	},
	"result-rejected": {
		ID: "bad-1", Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: events.StatusRejected,
		Error:   "data.topic: required\ndata.strategy: unknown strategy \"x\" (want auto, api, zk-reassign or zk-nudge)",
		Attempt: 1, Worker: "host-1234", StartedAt: started, FinishedAt: started.Add(3 * time.Millisecond),
		Changes: []events.Change{}, Skipped: []events.Skip{},
	},
	"result-planned-replayed": {
		ID: "plan-7", Type: events.TypeReplicaChangeRequested, Cluster: "kraft", Status: events.StatusPlanned,
		Strategy: "zk-nudge", Attempt: 2, Worker: "host-9", ControllerFailover: true,
		StartedAt: started, FinishedAt: started.Add(90 * time.Second), Replayed: true,
		Changes: []events.Change{
			{TopicPartition: tp("payments.v2", 0), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{3, 2, 1}, LeaderBefore: 1, LeaderAfter: 3},
		},
	},
	"result-rf-raise": {
		ID: "rf-1", Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: events.StatusSucceeded,
		Strategy: "api", Attempt: 1, Worker: "host-1234", StartedAt: started, FinishedAt: started.Add(21 * time.Second),
		Changes: []events.Change{
			{TopicPartition: tp("events", 0), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 4}, LeaderBefore: 1, LeaderAfter: 1, Bytes: 8 << 20},
			{TopicPartition: tp("events", 1), ReplicasBefore: []int32{2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 2, LeaderAfter: 2, Bytes: 1536},
		},
	},
	"result-broker-failed": {
		ID: "bf-3", Type: events.TypeBrokerFailed, Cluster: "local", Status: events.StatusPartial,
		Strategy: "api", Attempt: 1, Worker: "host-1234", StartedAt: started, FinishedAt: started.Add(95 * time.Second),
		Changes: []events.Change{
			{TopicPartition: tp("orders", 0), ReplicasBefore: []int32{3, 1, 2}, ReplicasAfter: []int32{4, 1, 2}, LeaderBefore: 1, LeaderAfter: 1, Bytes: 3 << 20},
			{TopicPartition: tp("orders", 5), ReplicasBefore: []int32{1, 3}, ReplicasAfter: []int32{1, 2}, LeaderBefore: 1, LeaderAfter: 1, Bytes: 1 << 20,
				Note: "spans 1 rack instead of 2: no live broker outside rack a is free"},
		},
		Skipped: []events.Skip{{TopicPartition: tp("logs", 0), Reason: "every other live broker already holds a replica", Code: "no_spare_broker"}},
	},
	"result-partition-offline": {
		ID: "po-1", Type: events.TypePartitionOffline, Cluster: "local", Status: events.StatusPartial,
		Strategy: "api", Attempt: 1, Worker: "host-1234", StartedAt: started, FinishedAt: started.Add(3 * time.Second),
		Changes: []events.Change{
			{TopicPartition: tp("orders", 0), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: -1, LeaderAfter: 2,
				Note: "clean election: 2 was in the last ISR [1 2]"},
			{TopicPartition: tp("orders", 3), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: -1, LeaderAfter: 3,
				LostOffsets: &events.OffsetRange{From: 1200, To: new(int64(1350))}, Note: "unclean election: 3 becomes the leader"},
			{TopicPartition: tp("orders", 5), ReplicasBefore: []int32{1, 3}, ReplicasAfter: []int32{1, 3}, LeaderBefore: -1, LeaderAfter: 3,
				LostOffsets: &events.OffsetRange{From: 80}, Note: "unclean election: 3 becomes the leader; the last ISR [1] cannot be read"},
		},
		Skipped: []events.Skip{{TopicPartition: tp("logs", 0), Reason: "no replica is alive (replicas [1 2], last ISR [1])", Code: "no_live_replica"}},
	},
	"result-failed": {
		ID: "f-3", Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: events.StatusFailed,
		Error: "gave up after 10 attempts: not controller", Strategy: "zk-reassign", Attempt: 10,
		Changes: []events.Change{
			{TopicPartition: tp("t", 0), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}, LeaderBefore: 1, LeaderAfter: 1},
		},
	},
}

func TestResultTable(t *testing.T) {
	for name, res := range sampleResults {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeResultTable(&b, &res, false); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".txt"), b.Bytes())
		})
	}
}

func TestResultTableStored(t *testing.T) {
	res := sampleResults["result-succeeded"]
	var b bytes.Buffer
	if err := writeResultTable(&b, &res, true); err != nil {
		t.Fatal(err)
	}
	if want := "(stored: this event id was published before; this is its earlier result)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	res.Replayed = true
	b.Reset()
	_ = writeResultTable(&b, &res, true)
	if !strings.Contains(b.String(), "(replayed: this event id ran before; this is its earlier result)") || strings.Contains(b.String(), "(stored:") {
		t.Errorf("a replayed result says so, once:\n%s", b.String())
	}
}

// golden compares got with the file at path; with -update it rewrites the file.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run go test -update to accept it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestWriteResultJSON(t *testing.T) {
	raw := []byte("{\"id\":\"a1b2\",  \"status\":\"noop\",\n\"worker\":\"w\"}")
	got, err := decodeResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeResult(&b, got, outputJSON); err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"a1b2","status":"noop","worker":"w"}` + "\n"; b.String() != want {
		t.Errorf("json output %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := writeResult(&b, got, outputTable); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "event a1b2: noop\n") {
		t.Errorf("table output:\n%s", b.String())
	}
}

func TestDecodeResultErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`not json`:            "the result is not valid JSON",
		`{"id":"x"}`:          "the result has no status",
		`{"status":1}`:        "the result is not valid JSON",
		`{"status":"failed"}`: "",
	} {
		_, err := decodeResult([]byte(raw))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want %q", raw, err, want)
		}
	}
}

func TestExitForStatus(t *testing.T) {
	for status, want := range map[events.Status]int{
		events.StatusSucceeded: exitOK,
		events.StatusNoop:      exitOK,
		events.StatusPlanned:   exitOK,
		events.StatusPartial:   exitFailure,
		events.StatusFailed:    exitFailure,
		events.StatusRejected:  exitFailure,
		events.StatusExpired:   exitFailure,
		events.StatusCancelled: exitFailure,
		"some-future-status":   exitFailure,
	} {
		if got := exitForStatus(status); got != want {
			t.Errorf("exitForStatus(%q) = %d, want %d", status, got, want)
		}
	}
	// The exit statuses are part of the command line interface: scripts test them.
	if exitOK != 0 || exitFailure != 1 || exitUsage != 2 || exitNoReply != 3 || exitNoStore != 4 {
		t.Error("exit statuses changed")
	}
}
