package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
)

// answerLarge answers a preferred-leader request with a result of 25,000 changes, about
// 3 MiB: too large for one message at NATS's default max_payload (1 MiB).
func answerLarge(ev *events.Event) events.Result {
	res := events.Result{Status: events.StatusSucceeded, Strategy: "api", Changes: make([]events.Change, 25000), Skipped: []events.Skip{}}
	for i := range res.Changes {
		res.Changes[i] = events.Change{TopicPartition: events.TopicPartition{Topic: fmt.Sprintf("orders-%03d", i/100), Partition: int32(i % 100)},
			ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 1, LeaderAfter: 2}
	}
	return res
}

// A result too large for one message reaches the waiter (--wait) and the result command
// whole: the head on the subject says where its parts are, and the emitter reads them
// from the results stream.
func TestWaitForLargeResult(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	if nc.MaxPayload() != 1<<20 {
		t.Fatalf("max_payload %d, want the default", nc.MaxPayload())
	}
	ensureStreams(t, js)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, answerLarge)
	want := answerLarge(nil).Changes

	check := func(what string, out []byte) {
		t.Helper()
		var res events.Result
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Truncated != nil || !reflect.DeepEqual(res.Changes, want) || res.Worker != "fake-worker" {
			t.Fatalf("%s: %d changes (truncated %v), want the whole result of %d", what, len(res.Changes), res.Truncated, len(want))
		}
	}
	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), preferredArgs(url, "local", "big-1", "--wait", "--timeout", "20s", "-o", "json"), e); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	check("--wait", stdout.Bytes())

	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", "big-1", "-o", "json"}, e); code != exitOK {
		t.Fatalf("result: exit %d; stderr:\n%s", code, stderr)
	}
	check("result", stdout.Bytes())

	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", "big-1"}, e); code != exitOK {
		t.Fatalf("result: exit %d; stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stdout.String(), "\norders-"); n != 25000 {
		t.Fatalf("result table: %d change rows, want 25000:\n%.2000s", n, stdout)
	}
}
