package handlers

import (
	"reflect"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
)

func TestBatchMovesCapsPerBroker(t *testing.T) {
	ch := func(p int32, before, after []int32, leaders ...int32) plan.Change {
		lb, la := before[0], before[0]
		if len(leaders) == 2 {
			lb, la = leaders[0], leaders[1]
		}
		return plan.Change{TopicPartition: model.TopicPartition{Topic: "t", Partition: p}, ReplicasBefore: before, ReplicasAfter: after,
			LeaderBefore: lb, LeaderAfter: la}
	}
	all := func(int32) bool { return true }
	for _, tc := range []struct {
		name    string
		changes []plan.Change
		max     int
		live    func(int32) bool
		want    [][]int32 // partitions per batch
	}{
		{
			name: "copies onto a broker: the trim goes first",
			changes: []plan.Change{
				ch(0, []int32{1, 2}, []int32{1, 2, 3}),
				ch(1, []int32{1, 2, 4}, []int32{1, 2}), // trim: nothing to copy
				ch(2, []int32{2, 4}, []int32{2, 4, 3}),
				ch(3, []int32{4, 1}, []int32{4, 1, 3}),
				ch(4, []int32{4, 3}, []int32{4, 3, 2}),
			},
			max: 2, live: all,
			// 3 receives 0, 2 and 3: the third opens a batch.
			want: [][]int32{{1, 0, 2}, {3, 4}},
		},
		{
			name: "copies out of a leader count too",
			changes: []plan.Change{
				ch(0, []int32{1, 2}, []int32{1, 2, 3}),
				ch(1, []int32{1, 4}, []int32{1, 4, 5}),
				ch(2, []int32{1, 6}, []int32{1, 6, 7}),
			},
			max: 2, live: all,
			// 1 leads all three: each new replica copies from it.
			want: [][]int32{{0, 1}, {2}},
		},
		{
			name: "a live broker leaving the replicas counts; a dead one does not",
			changes: []plan.Change{
				ch(0, []int32{9, 2}, []int32{2, 3}, 2, 2),
				ch(1, []int32{9, 4}, []int32{4, 5}, 4, 4),
				ch(2, []int32{9, 6}, []int32{6, 7}, 6, 6),
				ch(3, []int32{8, 1}, []int32{1, 5}, 1, 1),
				ch(4, []int32{8, 2}, []int32{2, 5}, 2, 2),
			},
			max:  2,
			live: func(b int32) bool { return b != 9 },
			// 9 is gone: 0-2 load only their leaders and new brokers, and 8, live,
			// leaves 3; 4 would be 5's third copy.
			want: [][]int32{{0, 1, 2, 3}, {4}},
		},
		{
			name: "a drain's copy is served by the replica that took its leadership",
			changes: []plan.Change{
				ch(0, []int32{4, 1}, []int32{1, 2}, 4, 1),
				ch(1, []int32{4, 1}, []int32{1, 3}, 4, 1),
			},
			max: 1, live: all,
			want: [][]int32{{0}, {1}},
		},
		{name: "nothing", max: 2, live: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches := batchMoves(tc.changes, tc.max, tc.live)
			var got [][]int32
			for _, b := range batches {
				var ps []int32
				for _, c := range b {
					ps = append(ps, c.Partition)
				}
				got = append(got, ps)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("batches %v, want %v", got, tc.want)
			}
			for _, b := range batches {
				load := map[int32]int{}
				for _, c := range b {
					for _, r := range copyLoad(c, tc.live) {
						if load[r]++; load[r] > tc.max {
							t.Fatalf("batch %v has %d copies in or out of broker %d", b, load[r], r)
						}
					}
				}
			}
		})
	}
}
