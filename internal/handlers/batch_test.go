package handlers

import (
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
)

func TestBatchMovesCapsPerBroker(t *testing.T) {
	ch := func(p int32, before, after []int32) plan.Change {
		return plan.Change{TopicPartition: model.TopicPartition{Topic: "t", Partition: p}, ReplicasBefore: before, ReplicasAfter: after}
	}
	changes := []plan.Change{
		ch(0, []int32{1, 2}, []int32{1, 2, 3}),
		ch(1, []int32{1, 2, 4}, []int32{1, 2}), // trim: nothing to copy
		ch(2, []int32{2, 4}, []int32{2, 4, 3}),
		ch(3, []int32{1, 4}, []int32{1, 4, 3}),
		ch(4, []int32{1, 3}, []int32{1, 3, 2}),
		ch(5, []int32{2, 1}, []int32{2, 1, 3}),
	}
	batches := batchMoves(changes, 2)
	var got [][]int32
	for _, b := range batches {
		var ps []int32
		for _, c := range b {
			ps = append(ps, c.Partition)
		}
		got = append(got, ps)
	}
	// Broker 3 receives partitions 0, 2, 3 and 5: at most two per batch; the trim goes first.
	want := [][]int32{{1, 0, 2}, {3, 4, 5}}
	if len(got) != len(want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("batches %v, want %v", got, want)
			}
		}
	}
	for _, b := range batches {
		load := map[int32]int{}
		for _, c := range b {
			for _, r := range minus(c.ReplicasAfter, c.ReplicasBefore) {
				if load[r]++; load[r] > 2 {
					t.Fatalf("batch %v sends %d copies to broker %d", b, load[r], r)
				}
			}
		}
	}
	if b := batchMoves(nil, 2); len(b) != 0 {
		t.Fatalf("no changes gave batches %v", b)
	}
}
