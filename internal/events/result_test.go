package events

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// bigResult is a result of n changes, too large for one message when n is large.
func bigResult(n int) Result {
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	r := Result{ID: "big", Type: TypeBrokerOverloaded, Cluster: "local", Status: StatusSucceeded, Strategy: "api",
		Attempt: 1, Worker: "w", StartedAt: start, FinishedAt: start.Add(time.Minute), Reason: "shed",
		Changes: make([]Change, n), Skipped: make([]Skip, n/10), Noop: make([]TopicPartition, n/10)}
	for i := range r.Changes {
		r.Changes[i] = Change{TopicPartition: TopicPartition{fmt.Sprintf("orders-%03d", i/100), int32(i % 100)},
			ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 1, LeaderAfter: 2}
	}
	for i := range r.Skipped {
		r.Skipped[i] = Skip{TopicPartition{"s", int32(i)}, "not in sync", "not_in_sync"}
		r.Noop[i] = TopicPartition{"n", int32(i)}
	}
	return r
}

// A result with Truncated encodes as its head: lists cut to their first entries within
// HeadBytes, long texts cut, counts and location kept; the same head whether encoded from
// the whole result, from the head itself, or replayed; a result without Truncated encodes
// whole.
func TestHead(t *testing.T) {
	whole := bigResult(25000)
	whole.Note = strings.Repeat("é", 3000) // 6000 bytes, cut at a rune boundary
	plain, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) < 3<<20 {
		t.Fatalf("the whole result is %d bytes", len(plain))
	}
	whole.Truncated = &Truncated{Changes: 25000, Skipped: 2500, Noop: 2500, Parts: 4, Size: len(plain),
		SHA256: strings.Repeat("ab", 32), Subject: ResultPartsSubject("big", "N")}
	raw, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > HeadBytes+1024 {
		t.Fatalf("head of %d bytes, over %d", len(raw), HeadBytes)
	}
	var head Result
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatal(err)
	}
	if n := len(head.Changes); n == 0 || n >= 25000 || !reflect.DeepEqual(head.Changes, whole.Changes[:n]) {
		t.Fatalf("head lists %d changes, want a prefix of the 25000", n)
	}
	if !reflect.DeepEqual(head.Skipped, whole.Skipped[:len(head.Skipped)]) || !reflect.DeepEqual(head.Noop, whole.Noop[:len(head.Noop)]) ||
		!reflect.DeepEqual(head.Truncated, whole.Truncated) ||
		head.Status != whole.Status || head.Reason != whole.Reason || !strings.HasSuffix(head.Note, "…") || len(head.Note) > headTextBytes+3 {
		t.Fatalf("head: %d skipped, %d noop, truncated %+v, note of %d bytes", len(head.Skipped), len(head.Noop), head.Truncated, len(head.Note))
	}
	again, _ := json.Marshal(head)
	if string(again) != string(raw) {
		t.Fatal("the head of the head is not the head")
	}
	whole.Replayed = true
	replayed, _ := json.Marshal(whole)
	var rh Result
	_ = json.Unmarshal(replayed, &rh)
	if !rh.Replayed || len(rh.Changes) != len(head.Changes) {
		t.Fatalf("replayed head: %d changes, the stored head %d", len(rh.Changes), len(head.Changes))
	}

	// Small lists are whole in the head.
	small := bigResult(10)
	small.Truncated = &Truncated{Changes: 10, Skipped: 1, Noop: 1, Parts: 1, Subject: ResultPartsSubject("big", "N")}
	raw, _ = json.Marshal(small)
	var sh Result
	_ = json.Unmarshal(raw, &sh)
	if len(sh.Changes) != 10 || len(sh.Skipped) != 1 || len(sh.Noop) != 1 {
		t.Fatalf("small head: %d %d %d", len(sh.Changes), len(sh.Skipped), len(sh.Noop))
	}
	// Without Truncated, a result encodes whole.
	small.Truncated = nil
	small.Note = whole.Note
	raw, _ = json.Marshal(small)
	if !strings.Contains(string(raw), whole.Note) {
		t.Fatal("a result without truncated lost its note")
	}
}
