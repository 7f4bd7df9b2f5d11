package handlers

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// reads is a cluster whose reads come from a script: each Snapshot returns the next.
type reads struct {
	script []model.Partition
	n      int
}

func (r *reads) Snapshot(context.Context, ...string) (*model.Snapshot, error) {
	p := r.script[min(r.n, len(r.script)-1)]
	r.n++
	return &model.Snapshot{Topics: map[string][]model.Partition{p.Topic: {p}}}, nil
}

func (r *reads) Placement(ctx context.Context, topics ...string) (*model.Snapshot, error) {
	return r.Snapshot(ctx, topics...)
}

func (r *reads) Reassignments(context.Context, []string) (map[model.TopicPartition]kafka.Reassignment, error) {
	return nil, nil
}

// Reads are at least as new as what the cluster's last operation left: a broker whose
// metadata lags (an older leader epoch, or the replicas from before the change at the
// same epoch) is read again until it has caught up; a state changed since, at any epoch,
// is taken at once; after the wait, the read stands.
func TestFreshReader(t *testing.T) {
	tp := model.TopicPartition{Topic: "orders", Partition: 0}
	left := model.Seen{TopicPartition: tp, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 7, Before: []int32{1, 2}}
	lagging := model.Partition{TopicPartition: tp, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 6}
	laggingReorder := model.Partition{TopicPartition: tp, Replicas: []int32{1, 2}, Leader: 2, LeaderEpoch: 7}
	caughtUp := model.Partition{TopicPartition: tp, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 7}
	changedSince := model.Partition{TopicPartition: tp, Replicas: []int32{2, 1, 3}, Leader: 2, LeaderEpoch: 7}
	for _, tc := range []struct {
		name   string
		script []model.Partition
		floor  []model.Seen
		wait   time.Duration
		reads  int
		want   []int32
	}{
		{"no floor", []model.Partition{lagging}, nil, time.Minute, 1, []int32{1, 2}},
		{"as left", []model.Partition{caughtUp}, []model.Seen{left}, time.Minute, 1, []int32{2, 1}},
		{"an older epoch, then caught up", []model.Partition{lagging, lagging, caughtUp}, []model.Seen{left}, time.Minute, 3, []int32{2, 1}},
		{"the replicas before at the same epoch, then caught up", []model.Partition{laggingReorder, caughtUp}, []model.Seen{left}, time.Minute, 2, []int32{2, 1}},
		{"changed since at the same epoch", []model.Partition{changedSince}, []model.Seen{left}, time.Minute, 1, []int32{2, 1, 3}},
		{"still older after the wait: the read stands", []model.Partition{lagging}, []model.Seen{left}, 0, 1, []int32{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reads{script: tc.script}
			snap, err := newFreshReader(r, tc.floor, tc.wait, zap.NewNop()).Snapshot(t.Context(), "orders")
			if err != nil {
				t.Fatal(err)
			}
			p, _ := snap.Partition(tp)
			if r.n != tc.reads || !slices.Equal(p.Replicas, tc.want) {
				t.Errorf("%d reads, replicas %v; want %d reads, %v", r.n, p.Replicas, tc.reads, tc.want)
			}
		})
	}
}

// The read the engine started before the plan (Prefetch) is the plan's first read when it
// is the read the plan would make (the same topics, the same capabilities) and succeeded,
// and is held to the floor like any other: a lagging one is read again.
func TestFreshReaderTakesThePrefetch(t *testing.T) {
	tp := model.TopicPartition{Topic: "orders", Partition: 0}
	left := model.Seen{TopicPartition: tp, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 7, Before: []int32{1, 2}}
	lagging := model.Partition{TopicPartition: tp, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 6}
	caughtUp := model.Partition{TopicPartition: tp, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 7}
	api := kafka.Capabilities{ElectLeaders: true, AlterPartitionAssignment: true, ListReassignments: true, IncrementalAlterConfigs: true}
	snapOf := func(p model.Partition) *model.Snapshot {
		return &model.Snapshot{Topics: map[string][]model.Partition{p.Topic: {p}}}
	}
	for _, tc := range []struct {
		name   string
		pre    *prefetched
		reads  int // reads of the cluster besides the prefetch
		want   []int32
		script []model.Partition
	}{
		{"taken", &prefetched{topics: []string{"orders"}, caps: api, snap: snapOf(caughtUp)}, 0, []int32{2, 1}, []model.Partition{caughtUp}},
		{"lagging: read again", &prefetched{topics: []string{"orders"}, caps: api, snap: snapOf(lagging)}, 1, []int32{2, 1}, []model.Partition{caughtUp}},
		{"other topics: read", &prefetched{topics: []string{"payments"}, caps: api, snap: snapOf(caughtUp)}, 1, []int32{2, 1}, []model.Partition{caughtUp}},
		{"other capabilities: read", &prefetched{topics: []string{"orders"}, caps: kafka.Capabilities{}, snap: snapOf(caughtUp)}, 1, []int32{2, 1}, []model.Partition{caughtUp}},
		{"failed: read", &prefetched{topics: []string{"orders"}, caps: api, err: context.DeadlineExceeded}, 1, []int32{2, 1}, []model.Partition{caughtUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pre.done = make(chan struct{})
			close(tc.pre.done)
			cancelled := false
			tc.pre.cancel = func() { cancelled = true }
			r := &reads{script: tc.script}
			f := newFreshReader(r, []model.Seen{left}, time.Minute, zap.NewNop())
			f.pre, f.caps = tc.pre, api
			snap, err := f.Snapshot(t.Context(), "orders")
			if err != nil {
				t.Fatal(err)
			}
			p, _ := snap.Partition(tp)
			if r.n != tc.reads || !slices.Equal(p.Replicas, tc.want) || !cancelled || f.pre != nil {
				t.Errorf("%d reads, replicas %v, prefetch let go %v, kept %v; want %d reads, %v", r.n, p.Replicas, cancelled, f.pre != nil, tc.reads, tc.want)
			}
			if _, err := f.Snapshot(t.Context(), "orders"); err != nil || r.n != tc.reads+1 {
				t.Errorf("the next read: %d reads, %v; the prefetch is taken once", r.n, err)
			}
		})
	}
}

// A read that shows a partition as the operation plans it is never older than the floor:
// the operation's own change may put it back to what it was before the last operation at
// the same epoch (KRaft: 1,2,3 → 1,2 → 1,2,3 bumps no leader epoch). Its verification
// reads take that at once instead of waiting the whole wait for a lag that is not there
// (each raise after a lowering waited 30s per read); a read showing the state before the
// last operation that is not the plan still waits.
func TestFreshReaderTakesThePlanAsNew(t *testing.T) {
	tp := model.TopicPartition{Topic: "orders", Partition: 0}
	lowered := model.Seen{TopicPartition: tp, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1, Before: []int32{1, 2, 3}}
	asLeft := model.Partition{TopicPartition: tp, Replicas: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}
	raisedAgain := model.Partition{TopicPartition: tp, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1}
	for _, tc := range []struct {
		name   string
		target []int32
		reads  int
	}{
		{"the plan raises it again", []int32{1, 2, 3}, 2},
		{"the plan is elsewhere", []int32{1, 2, 4}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &reads{script: []model.Partition{asLeft, raisedAgain, asLeft}}
			f := newFreshReader(r, []model.Seen{lowered}, time.Minute, zap.NewNop())
			if _, err := f.Snapshot(t.Context(), "orders"); err != nil { // the plan's read
				t.Fatal(err)
			}
			f.plan([]plan.Change{{TopicPartition: tp, ReplicasBefore: []int32{1, 2}, ReplicasAfter: tc.target}})
			if _, err := f.Snapshot(t.Context(), "orders"); err != nil {
				t.Fatal(err)
			}
			if r.n != tc.reads {
				t.Errorf("%d reads, want %d", r.n, tc.reads)
			}
		})
	}
}
