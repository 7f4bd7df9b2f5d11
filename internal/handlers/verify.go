package handlers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// What every task shares to read and verify: reads at least as new as what the cluster's
// last operation left (a broker's metadata lags the controller), the wait until a fresh
// read shows a plan, and what changed and what is left from such a read.

// snapshotReader reads the cluster's placement (kafka.Reader, freshReader).
type snapshotReader interface {
	Snapshot(ctx context.Context, topics ...string) (*model.Snapshot, error)
}

// freshReader reads the cluster at least as new as floor: what the cluster's previous
// operation left on the partitions it changed, as its verification read them. A read that
// shows one of them older (a broker whose metadata lags: a lower leader epoch, or the same
// epoch and other replicas) is read again, backing off, for at most wait; after that the
// read stands (the partition was changed since by someone else, at the same epoch).
//
// A read that shows a partition as the operation itself plans it (target) is never
// older: the operation's own change may put a partition back to what it was before the
// last operation, at the same epoch (KRaft bumps no leader epoch for a replica added or
// removed: 1,2,3 → 1,2 → 1,2,3), which the floor alone cannot tell from a lagging read;
// its verification then waited the whole wait on every read.
type freshReader struct {
	rd    clusterReader
	floor map[model.TopicPartition]model.Seen
	wait  time.Duration
	log   *zap.Logger

	// target is the operation's planned replicas of each partition, once it has a plan
	// (plan).
	target map[model.TopicPartition][]int32

	// pre is the first Snapshot read, started before the plan by the engine (Prefetch);
	// caps, the capabilities the reader reads with. Taken by the first Snapshot.
	pre  *prefetched
	caps kafka.Capabilities
}

// clusterReader reads a cluster's placement and its ongoing reassignments (kafka.Reader).
type clusterReader interface {
	snapshotReader
	// Placement is Snapshot without the ongoing reassignments, where the cluster lists
	// them apart (see kafka.Reader.Placement).
	Placement(ctx context.Context, topics ...string) (*model.Snapshot, error)
	Reassignments(ctx context.Context, topics []string) (map[model.TopicPartition]kafka.Reassignment, error)
}

func newFreshReader(rd clusterReader, floor []model.Seen, wait time.Duration, log *zap.Logger) *freshReader {
	f := &freshReader{rd: rd, wait: wait, log: log}
	if len(floor) > 0 {
		f.floor = make(map[model.TopicPartition]model.Seen, len(floor))
		for _, s := range floor {
			f.floor[s.TopicPartition] = s
		}
	}
	return f
}

// Snapshot implements snapshotReader. The first read may be one started before the plan
// (prefetch), held to the floor as any other.
func (f *freshReader) Snapshot(ctx context.Context, topics ...string) (*model.Snapshot, error) {
	if p := f.pre; p != nil {
		f.pre = nil
		if snap := p.take(ctx, f.caps, topics); snap != nil {
			return f.readFrom(ctx, snap, f.rd.Snapshot, topics)
		}
	}
	return f.read(ctx, f.rd.Snapshot, topics)
}

// prefetch gives the reader the read the engine started for the run's plan, if any (see
// operation.Prefetcher), made with the capabilities caps the reader reads with.
func (f *freshReader) prefetch(r *operation.Run, caps kafka.Capabilities) {
	if p, ok := r.Prefetched().(*prefetched); ok {
		if f.pre != nil {
			f.pre.Discard()
		}
		f.pre, f.caps = p, caps
	}
}

// placements reads as Snapshot does, without the ongoing reassignments (one request
// instead of two: see kafka.Reader.Placement): for verifying reorders only, whose
// reassignments complete at once.
func (f *freshReader) placements() snapshotReader { return placementReader{f} }

type placementReader struct{ f *freshReader }

func (p placementReader) Snapshot(ctx context.Context, topics ...string) (*model.Snapshot, error) {
	return p.f.read(ctx, p.f.rd.Placement, topics)
}

func (f *freshReader) read(ctx context.Context, read func(context.Context, ...string) (*model.Snapshot, error), topics []string) (*model.Snapshot, error) {
	return f.readFrom(ctx, nil, read, topics)
}

// readFrom is read, its first read first (nil: none yet).
func (f *freshReader) readFrom(ctx context.Context, first *model.Snapshot, read func(context.Context, ...string) (*model.Snapshot, error), topics []string) (*model.Snapshot, error) {
	deadline := time.Now().Add(f.wait)
	for i := 0; ; i++ {
		snap := first
		first = nil
		if snap == nil {
			var err error
			if snap, err = read(ctx, topics...); err != nil {
				return nil, err
			}
		}
		stale := f.stale(snap)
		if stale == nil {
			return snap, nil
		}
		if time.Now().After(deadline) {
			f.log.Warn("a partition the last operation changed still reads older than it left it; taking the read as the cluster's (changed since by someone else?)",
				zap.Stringer("partition", stale.TopicPartition), zap.Int32s("replicas", stale.Replicas), zap.Int32("leader_epoch", stale.LeaderEpoch))
			return snap, nil
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// Reassignments lists ongoing reassignments (see kafka.Reader).
func (f *freshReader) Reassignments(ctx context.Context, topics []string) (map[model.TopicPartition]kafka.Reassignment, error) {
	return f.rd.Reassignments(ctx, topics)
}

// plan tells the reader the operation's planned changes (see freshReader); a reader
// without a plan holds every read to the floor.
func (f *freshReader) plan(changes []plan.Change) {
	if f.target != nil || len(f.floor) == 0 {
		return
	}
	f.target = make(map[model.TopicPartition][]int32, len(changes))
	for _, ch := range changes {
		if _, ok := f.floor[ch.TopicPartition]; ok {
			f.target[ch.TopicPartition] = ch.ReplicasAfter
		}
	}
}

// stale returns a partition the snapshot shows older than the floor, or nil.
func (f *freshReader) stale(snap *model.Snapshot) *model.Partition {
	for tp, seen := range f.floor {
		if p, ok := snap.Partition(tp); ok && seen.Older(p) && !(f.target[tp] != nil && slices.Equal(p.Replicas, f.target[tp])) {
			return &p
		}
	}
	return nil
}

// observe reads the planned partitions until each shows its planned replicas and leader
// (those in skip are not waited for) or timeout passes, and returns the last read. A read
// that fails is tried again; when none succeeded, the error is returned (transient):
// nothing counts as verified without a fresh read.
//
// With leaders false only the replica lists are compared (replication-factor changes do
// not move leadership, but a broker restart may).
func observe(ctx context.Context, rd snapshotReader, planned []plan.Change, timeout time.Duration, skip map[model.TopicPartition]bool, leaders bool) (map[model.TopicPartition]model.Partition, error) {
	deadline := time.Now().Add(timeout)
	names := topicsOf(planned)
	var last map[model.TopicPartition]model.Partition
	for i := 0; ; i++ {
		snap, err := rd.Snapshot(ctx, names...)
		if err == nil {
			last = map[model.TopicPartition]model.Partition{}
			done := true
			for _, ch := range planned {
				p, ok := snap.Partition(ch.TopicPartition)
				if !ok {
					continue
				}
				last[ch.TopicPartition] = p
				if !skip[ch.TopicPartition] && !shows(p, ch, leaders) {
					done = false
				}
			}
			if done {
				return last, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if last != nil {
				return last, nil
			}
			if err == nil {
				err = context.Cause(ctx)
			}
			return nil, transient(fmt.Errorf("verify: no fresh read of the cluster: %w", err))
		}
		select {
		case <-ctx.Done():
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// observeUndone reads the planned partitions after a rollback until those back lists show
// their replicas before the event (and their leader before, with leaders), no longer
// reassigning, or until wait passes, and returns the last read. A rollback's own writes
// return once one broker shows them, and the next read may come from another whose
// metadata lags: read once, it would list as left a change just undone. The wait takes at
// most half the time ctx has left: the rollback's journal write and result come after it.
func observeUndone[V any](ctx context.Context, rd snapshotReader, planned []plan.Change, back map[model.TopicPartition]V, wait time.Duration, leaders bool) (map[model.TopicPartition]model.Partition, error) {
	undone := make([]plan.Change, len(planned))
	skip := make(map[model.TopicPartition]bool, len(planned))
	for i, ch := range planned {
		undone[i] = ch
		undone[i].ReplicasAfter, undone[i].LeaderAfter = ch.ReplicasBefore, ch.LeaderBefore
		if _, ok := back[ch.TopicPartition]; !ok {
			skip[ch.TopicPartition] = true
		}
	}
	return observe(ctx, rd, undone, halfLeft(ctx, wait), skip, leaders)
}

// halfLeft is wait, or half the time ctx has left if less: what a rollback waits for a
// read, its journal write and result still to come.
func halfLeft(ctx context.Context, wait time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(wait, time.Until(dl)/2)
	}
	return wait
}

// shows reports whether p is as ch planned (its replicas, and its leader when leaders).
func shows(p model.Partition, ch plan.Change, leaders bool) bool {
	return slices.Equal(p.Replicas, ch.ReplicasAfter) && !p.Reassigning() && (!leaders || p.Leader == ch.LeaderAfter)
}

// changedFrom lists the planned partitions whose state now (as read) differs from their
// state before the first attempt: the changes the event made, across all attempts. With
// leaders false, only a different replica list counts as a change.
func changedFrom(planned []plan.Change, now map[model.TopicPartition]model.Partition, leaders bool) []plan.Change {
	var out []plan.Change
	for _, ch := range planned {
		p, ok := now[ch.TopicPartition]
		if !ok || slices.Equal(p.Replicas, ch.ReplicasBefore) && (!leaders || p.Leader == ch.LeaderBefore) {
			continue
		}
		out = append(out, plan.Change{TopicPartition: ch.TopicPartition, ReplicasBefore: ch.ReplicasBefore, ReplicasAfter: p.Replicas,
			LeaderBefore: ch.LeaderBefore, LeaderAfter: p.Leader})
	}
	return out
}

// report returns the changes the partitions seen done show: it reads them until a read
// shows their planned replicas (a broker whose metadata lags shows them as before, and
// read once it would leave a change made out of the result), for at most wait and half
// the time ctx has left.
func report(ctx context.Context, rd snapshotReader, done []plan.Change, wait time.Duration, leaders bool) ([]plan.Change, error) {
	now, err := observe(ctx, rd, done, halfLeft(ctx, wait), nil, false)
	if err != nil {
		return nil, err
	}
	return changedFrom(done, now, leaders), nil
}

// leave records in the run's entry what the operation leaves on the partitions it
// changed, as read: the next operation of the cluster reads at least that.
func leave(r *operation.Run, changed []plan.Change, now map[model.TopicPartition]model.Partition) {
	left := make([]model.Seen, 0, len(changed))
	for _, ch := range changed {
		if p, ok := now[ch.TopicPartition]; ok {
			left = append(left, model.SeenOf(p, ch.ReplicasBefore))
		}
	}
	r.Entry().Left = left
}

func allOf(changes []plan.Change) map[model.TopicPartition]bool {
	m := make(map[model.TopicPartition]bool, len(changes))
	for _, ch := range changes {
		m[ch.TopicPartition] = true
	}
	return m
}

func skippedOf(skips []plan.Skip) map[model.TopicPartition]bool {
	m := map[model.TopicPartition]bool{}
	for _, s := range skips {
		m[s.TopicPartition] = true
	}
	return m
}

func topicsOf(changes []plan.Change) []string {
	seen := map[string]bool{}
	var out []string
	for _, ch := range changes {
		if !seen[ch.Topic] {
			seen[ch.Topic] = true
			out = append(out, ch.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func tpsOf(l []plan.Change) []string {
	out := make([]string, len(l))
	for i, ch := range l {
		out[i] = ch.TopicPartition.String()
	}
	return out
}

// stopped prefers the context's cause (timeout, lost lock, shutdown) to the error of the
// request it interrupted.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
