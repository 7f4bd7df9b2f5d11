package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// rfTask raises or lowers a topic's replication factor: append (only the new replicas copy
// data, leadership stays) or trim (out-of-sync first, never the leader), throttled, in
// batches, with progress and a timeout across attempts. The throttles it sets are put back
// by compare-and-restore when the copy is over; a graceful shutdown leaves the copy running
// for the next holder.
type rfTask struct {
	h        *Handlers
	c        *Cluster
	strategy kafka.Strategy
	caps     kafka.Capabilities // probed when the task is built (each attempt, each takeover)
	req      plan.RFRequest     // a fresh run's request (replication-factor changes)
	// planFn plans a fresh run of another copy operation (broker-failed, broker-added)
	// from a read of every topic, instead of req.
	planFn func(ctx context.Context, snap *model.Snapshot) (plan.Plan, []string, error)
	// leaders: the plan moves preferred leaders too (broker-added): once every copy is
	// done, their elections, and the verification waits for the leaders.
	leaders bool
	// drained is the broker a broker-drain empties (-1: none): its leadership is shed
	// before the copies start (see shed).
	drained int32
	// failed are the brokers a broker-failed event declares gone for good: the
	// partitions short only of them are not a reason to pause (pace).
	failed  []int32
	pacer   *pacer // this attempt's
	timeout time.Duration
	rate    int64
	log     *zap.Logger
	fresh   *freshReader // every read of this attempt (rd)
}

func (h *Handlers) newRF(ctx context.Context, c *Cluster, ev *events.Event, req *events.ReplicaChange, res *events.Result, log *zap.Logger) (operation.Task, error) {
	o := h.cfg.RF
	strategy, caps, err := h.strategyFor(ctx, c, req.Strategy)
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	if strategy == kafka.StrategyZKNudge {
		return nil, operation.Reject("strategy zk-nudge never changes a replica set (the controller would not start or stop replicas): use api or zk-reassign")
	}
	if *req.ReplicationFactor < 1 {
		return nil, operation.Reject("replication_factor %d: must be at least 1", *req.ReplicationFactor)
	}
	minISR, err := minInsyncReplicas(ctx, c, req.Topic)
	if err != nil {
		return nil, err
	}
	t := h.resumeRF(c, strategy, caps, req, nil, log)
	t.req = plan.RFRequest{Topic: req.Topic, Partitions: req.Partitions, Factor: *req.ReplicationFactor, MinISR: minISR, AllowInternal: o.AllowInternal}
	if err := throttleable(c, caps, t.rate); err != nil {
		return nil, err
	}
	return t, nil
}

// resumeRF builds the task of a replication-factor change: of a fresh request (e nil), or
// of a journaled one (req nil when its request no longer decodes: no throttle is planned
// then, which only a run that never reached its throttles would).
func (h *Handlers) resumeRF(c *Cluster, strategy kafka.Strategy, caps kafka.Capabilities, req *events.ReplicaChange, e *journal.Entry, log *zap.Logger) *rfTask {
	o := h.cfg.RF
	t := &rfTask{h: h, c: c, strategy: strategy, caps: caps, log: log, timeout: o.Timeout, rate: o.ThrottleBytesPerSec, drained: -1}
	if req != nil {
		if req.Timeout.Duration > 0 {
			t.timeout = req.Timeout.Duration
		}
		if req.ThrottleBytesPerSec > 0 {
			t.rate = req.ThrottleBytesPerSec
		}
	}
	return t
}

// rd reads the cluster with what it has (before Kafka 2.4 a reassignment runs until
// /admin/reassign_partitions no longer lists it, whatever the metadata shows), at least as
// new as what the last operation left.
func (t *rfTask) rd(r *operation.Run) *freshReader {
	if t.fresh == nil {
		t.fresh = newFreshReader(t.c.reader(t.caps), r.Floor(), t.h.cfg.VerifyTimeout, r.Log)
	}
	if r.Op != nil {
		t.fresh.plan(r.Entry().Changes)
	}
	return t.fresh
}

// ours says whether an ongoing reassignment is this operation's: the journal lists it as
// submitted, and it goes to the planned replicas.
func ours(e *journal.Entry) func(model.TopicPartition, []int32) bool {
	planned := make(map[model.TopicPartition][]int32, len(e.Changes))
	for _, ch := range e.Changes {
		planned[ch.TopicPartition] = ch.ReplicasAfter
	}
	return func(tp model.TopicPartition, to []int32) bool {
		after, ok := planned[tp]
		return ok && e.Submitted(tp) && sameSet(to, after)
	}
}

// Plan waits for reassignments started by someone else (a fresh run), then reads every
// topic (balance is cluster-wide) and plans the append or trim.
func (t *rfTask) Plan(ctx context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	if !dry {
		if err := waitForeign(ctx, t.rd(r), t.h.cfg.RF.ForeignWait, nil, t.log); err != nil {
			return nil, err
		}
	}
	if t.planFn != nil {
		snap, err := t.rd(r).Snapshot(ctx)
		if err != nil {
			return nil, transient(err)
		}
		p, notes, err := t.planFn(ctx, snap)
		if err != nil {
			return nil, err
		}
		return &operation.Planned{Changes: p.Changes, Noop: p.Noop, Skipped: append(p.Skipped, blockedSkips(snap, p.Blocked, 0)...),
			Deadline: time.Now().Add(t.timeout).UTC(), Notes: notes}, nil
	}
	snap, err := readNamed(ctx, t.c, t.rd(r), nil, t.req.Topic)
	if err != nil {
		return nil, err
	}
	req := t.req
	var notes []string
	if raises(snap, req) {
		if notes, err = t.h.capacity(ctx, t.c, snap, &req.Capacity); err != nil {
			return nil, err
		}
	}
	p, err := plan.ReplicationFactor(snap, req)
	if err != nil {
		return nil, err
	}
	return &operation.Planned{Changes: p.Changes, Noop: p.Noop, Skipped: append(p.Skipped, blockedSkips(snap, p.Blocked, 0)...),
		Deadline: time.Now().Add(t.timeout).UTC(), Notes: notes}, nil
}

// raises reports whether the request adds a replica to some partition of its topic.
func raises(snap *model.Snapshot, req plan.RFRequest) bool {
	for _, p := range snap.Topics[req.Topic] {
		if (req.Partitions == nil || slices.Contains(req.Partitions, p.Partition)) && len(p.Replicas) < req.Factor {
			return true
		}
	}
	return false
}

// timeoutError ends an operation that outlived its timeout (across attempts). Permanent.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timeout after %s", e.d) }

// rfState is where each planned partition stands, from a fresh read.
type rfState struct {
	done    []plan.Change          // at the target replicas
	running []plan.Change          // our reassignment to the target is in progress
	waiting []plan.Change          // still at the replicas before: to submit
	skips   []plan.Skip            // changed by someone else since the plan, or gone
	brokers map[int32]model.Broker // the live brokers
}

// live reports whether broker b is in the read's metadata.
func (s rfState) live(b int32) bool { _, ok := s.brokers[b]; return ok }

func (s rfState) pending() []plan.Change { return append(slices.Clone(s.running), s.waiting...) }

// classify finds where each planned partition stands. A partition the read does not show
// is gone (its topic was deleted; read reads again while some broker still knows the
// topic): skipped, never waited for.
func classify(snap *model.Snapshot, e *journal.Entry, step func(plan.Change) []int32) rfState {
	var s rfState
	mine := ours(e)
	for _, ch := range e.Changes {
		p, ok := snap.Partition(ch.TopicPartition)
		var mid []int32 // a drain's replicas between its leadership shed and its copy
		if step != nil {
			mid = step(ch)
		}
		switch {
		case ok && mid != nil && !slices.Equal(mid, ch.ReplicasAfter) &&
			(slices.Equal(p.Replicas, mid) && !p.Reassigning() || p.Reassigning() && slices.Equal(p.ReassigningTo(), mid)):
			s.waiting = append(s.waiting, ch) // shed (or shedding): the copy is still to submit
		case !ok:
			s.skips = append(s.skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: "the partition no longer exists (its topic was deleted)"})
		case p.Reassigning() && mine(ch.TopicPartition, p.ReassigningTo()):
			s.running = append(s.running, ch)
		case p.Reassigning():
			s.skips = append(s.skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipReassigning, Reason: fmt.Sprintf(
				"under a reassignment started by someone else (%s)", p.Reassignment())})
		case slices.Equal(p.Replicas, ch.ReplicasAfter):
			s.done = append(s.done, ch)
		case slices.Equal(p.Replicas, ch.ReplicasBefore):
			s.waiting = append(s.waiting, ch)
		default:
			s.skips = append(s.skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: fmt.Sprintf(
				"changed by someone else since the plan: replicas %v (planned %v from %v)", p.Replicas, ch.ReplicasAfter, ch.ReplicasBefore)})
		}
	}
	return s
}

// read classifies the journaled partitions from a fresh read of their topics.
func (t *rfTask) read(ctx context.Context, r *operation.Run) (rfState, error) {
	topics := topicsOf(r.Entry().Changes)
	if len(topics) == 0 {
		return rfState{}, nil
	}
	snap, err := readNamed(ctx, t.c, t.rd(r), topics, topics...)
	if err != nil {
		return rfState{}, err
	}
	st := classify(snap, r.Entry(), t.step())
	st.brokers = snap.Brokers
	return st, nil
}

// Apply carries the journaled change out from wherever it stands: it adopts our
// reassignments still running, submits the rest batch by batch, and restores the
// throttles once nothing copies. When its context ends it returns at once, writing
// nothing: the engine decides (timeout: roll back; shutdown or lost lock: leave it for the
// next holder).
func (t *rfTask) Apply(ctx context.Context, r *operation.Run) error {
	e := r.Entry()
	ctx, cancel := context.WithDeadlineCause(ctx, e.Deadline, &timeoutError{t.timeout})
	defer cancel()

	st, err := t.read(ctx, r)
	if err != nil {
		return stopped(ctx, err)
	}
	pending := st.pending()
	if len(st.running) > 0 {
		t.log.Info("adopting reassignments of an earlier attempt", zap.Strings("partitions", tpsOf(st.running)))
	}
	if len(pending) > 0 {
		if err := t.throttle(ctx, r, pending); err != nil {
			return stopped(ctx, err)
		}
	}
	batches := batchMoves(pending, t.h.cfg.RF.MaxMovesPerBroker, st.live)
	adm := kadm.NewClient(t.c.Client)
	expected := expectedBytes(ctx, adm, e.Changes)
	done := len(st.done)
	running := map[model.TopicPartition]bool{}
	for _, ch := range st.running {
		running[ch.TopicPartition] = true
	}
	// Every reassignment this run may submit is journaled as ours at once, before the
	// first: one journal write, not one a batch (an entry may claim a write that never
	// happened, never the reverse; and a reassignment of one of these partitions to its
	// planned target is ours to wait for whoever started it).
	claimed := false
	for _, ch := range st.waiting {
		if !e.Submitted(ch.TopicPartition) {
			e.Reassignments = append(e.Reassignments, ch.TopicPartition)
			claimed = true
		}
	}
	if claimed || e.Step != journal.StepCopying && len(st.waiting) > 0 {
		if err := r.Save(ctx, journal.StepCopying); err != nil {
			return stopped(ctx, err)
		}
	}
	if t.drained >= 0 {
		if err := t.shed(ctx, r); err != nil {
			return stopped(ctx, err)
		}
	}
	t.pacer = &pacer{c: t.c, failed: t.failed}
	for bi, batch := range batches {
		var submit []plan.Change
		for _, ch := range batch {
			if !running[ch.TopicPartition] {
				submit = append(submit, ch)
			}
		}
		if len(submit) > 0 {
			if err := waitForeign(ctx, t.rd(r), t.h.cfg.RF.ForeignWait, ours(e), t.log); err != nil {
				return stopped(ctx, err)
			}
			progress := events.Progress{Batch: bi + 1, Batches: len(batches), PartitionsDone: done, PartitionsTotal: len(e.Changes), BytesExpected: expected}
			restore := func(now []plan.Change) error { return t.submit(ctx, r, now) }
			if submit, err = t.pacer.pace(ctx, r, t.log, bi+1, len(batches), submit, progress, t.h.cfg.CopyPoll, restore); err != nil {
				return stopped(ctx, err)
			}
		}
		if len(submit) > 0 {
			if err := t.submit(ctx, r, submit); err != nil {
				return stopped(ctx, fmt.Errorf("submit batch %d of %d: %w", bi+1, len(batches), err))
			}
		}
		r.Step(operation.StepCopying)
		reported := time.Time{}
		for i := 0; ; i++ {
			waiting, err := t.pendingMoves(ctx, r, batch)
			if err == nil && len(waiting) == 0 {
				break
			}
			if time.Since(reported) >= t.h.cfg.CopyPoll {
				r.Progress(events.Progress{Batch: bi + 1, Batches: len(batches), PartitionsDone: done + len(batch) - len(waiting),
					PartitionsTotal: len(e.Changes), BytesExpected: expected, BytesCopied: copiedBytes(ctx, adm, e.Changes)})
				reported = time.Now()
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(min(20*time.Millisecond<<min(i, 10), t.h.cfg.CopyPoll)): // soon at first: trims and small copies end at once
			}
		}
		done += len(batch)
	}
	if t.leaders {
		r.Step(operation.StepCopied)
		if err := t.elect(ctx, r); err != nil {
			return stopped(ctx, err)
		}
	}
	return stopped(ctx, t.restore(ctx, r))
}

// backend is the strategy's backend for reorders and elections (see reorderOp.backend).
func (t *rfTask) backend(r *operation.Run) (kafka.Reorderer, error) {
	op := t.h.reorderOp(t.c, t.strategy, t.caps, 0)
	return op.backend(r)
}

// step is the drain's replicas between the shed and the copy of a change (nil: not a
// drain, or the change's leadership does not move first).
func (t *rfTask) step() func(plan.Change) []int32 {
	if t.drained < 0 {
		return nil
	}
	return func(ch plan.Change) []int32 { return plan.DrainStep(ch, t.drained) }
}

// shed moves the drained broker's leadership off it before any copy, in one batch: the
// replicas of each partition it heads are reordered to the drain's step (the new leader
// first), then the preferred leaders are elected at once. It picks up where an earlier
// attempt stopped: a partition already reordered is only elected. A failed election
// leaves the partition led by the drained broker until its copy ends, when the
// controller moves its leadership (the broker leaves its replicas).
func (t *rfTask) shed(ctx context.Context, r *operation.Run) error {
	step := t.step()
	var planned []plan.Change
	for _, ch := range r.Entry().Changes {
		if step(ch) != nil {
			planned = append(planned, ch)
		}
	}
	if len(planned) == 0 {
		return nil
	}
	snap, err := t.rd(r).Snapshot(ctx, topicsOf(planned)...)
	if err != nil {
		return transient(err)
	}
	orders := map[model.TopicPartition][]int32{}
	var elect []model.TopicPartition
	for _, ch := range planned {
		p, ok := snap.Partition(ch.TopicPartition)
		mid := step(ch)
		switch {
		case !ok || p.Reassigning() || p.Leader == ch.LeaderAfter:
			continue
		case slices.Equal(p.Replicas, ch.ReplicasBefore):
			orders[ch.TopicPartition] = mid
		case !slices.Equal(p.Replicas, mid):
			continue // changed by someone else: the copy's classification says so
		}
		elect = append(elect, ch.TopicPartition)
	}
	if len(elect) == 0 {
		return nil
	}
	be, err := t.backend(r)
	if err != nil {
		return err
	}
	if len(orders) > 0 {
		if err := be.Reorder(ctx, orders); err != nil {
			return transient(fmt.Errorf("move broker %d off the head of %d partitions: %w", t.drained, len(orders), err))
		}
	}
	failed, err := be.ElectPreferred(ctx, elect)
	if err != nil {
		return transient(fmt.Errorf("elect new leaders of %d partitions broker %d led: %w", len(elect), t.drained, err))
	}
	n := 0
	for tp, e := range failed {
		if e != nil {
			n++
			t.log.Warn("leadership not moved off the drained broker before its copy", zap.Stringer("partition", tp), zap.Error(e))
		}
	}
	t.log.Info("leadership shed off the drained broker", zap.Int32("broker", t.drained), zap.Int("partitions", len(elect)-n), zap.Int("failed", n))
	return nil
}

// unshed puts back the drain's step of the partitions no copy moved further: their
// replicas in the order before and the drained broker elected again, as before the event.
func (t *rfTask) unshed(ctx context.Context, r *operation.Run) (int, error) {
	step := t.step()
	if step == nil {
		return 0, nil
	}
	var planned []plan.Change
	for _, ch := range r.Entry().Changes {
		// A change that only sheds (its replica could not move) is finished at its step:
		// it keeps its new state, as every finished one does.
		if mid := step(ch); mid != nil && !slices.Equal(mid, ch.ReplicasAfter) {
			planned = append(planned, ch)
		}
	}
	if len(planned) == 0 {
		return 0, nil
	}
	// A cancelled copy may still show as reassigning for a moment after the cancel, or, read
	// from a broker whose metadata lags the controller's, with the replica set of the copy
	// although the controller lists it no more: wait (up to the verify timeout, at most half
	// the time the rollback has left) until each shows where it settled, its step's order
	// (cancelled) or its target (finished), so that its order is put back. The reorder
	// reads the partitions again (on ZooKeeper clusters, their topic znodes, which the
	// controller rewrites after it stops listing the copy): one that still shows the copy
	// there is not settled either.
	deadline := time.Now().Add(halfLeft(ctx, t.h.cfg.VerifyTimeout))
	for i := 0; ; i++ {
		n, err := t.reorderBack(ctx, r, planned, step)
		if err == nil && n >= 0 {
			return n, nil
		}
		late := time.Now().After(deadline)
		if err != nil && (late || !errors.Is(err, kafka.ErrNotReorder) && !errors.Is(err, kafka.ErrReassignmentInProgress)) {
			return max(n, 0), err
		}
		if err == nil && late { // n < 0: not settled by the deadline; what settled is put back
			n, err := t.reorderBack(ctx, r, planned, step, true)
			return max(n, 0), err
		}
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// reorderBack puts back the replica order, and the drained broker's leadership, of the
// planned partitions that show their step's order (their copy cancelled). It returns -1
// and does nothing while some partition shows neither its step's order nor its target,
// unless anyway.
func (t *rfTask) reorderBack(ctx context.Context, r *operation.Run, planned []plan.Change, step func(plan.Change) []int32, anyway ...bool) (int, error) {
	snap, err := t.rd(r).Snapshot(ctx, topicsOf(planned)...)
	if err != nil {
		return 0, transient(err)
	}
	orders := map[model.TopicPartition][]int32{}
	var elect []model.TopicPartition
	for _, ch := range planned {
		p, ok := snap.Partition(ch.TopicPartition)
		if !ok {
			continue
		}
		switch {
		case !p.Reassigning() && slices.Equal(p.Replicas, step(ch)):
			orders[ch.TopicPartition] = ch.ReplicasBefore
			elect = append(elect, ch.TopicPartition)
		case !p.Reassigning() && slices.Equal(p.Replicas, ch.ReplicasBefore) && p.Leader != ch.LeaderBefore:
			// Its order is back (an earlier attempt put it back, and its election did not
			// take effect): only the election is left.
			elect = append(elect, ch.TopicPartition)
		case !p.Reassigning() && slices.Equal(p.Replicas, ch.ReplicasBefore):
			// As before the event: never shed, or given back already.
		case !p.Reassigning() && slices.Equal(p.Replicas, ch.ReplicasAfter):
		default:
			if len(anyway) == 0 {
				return -1, nil
			}
		}
	}
	if len(elect) == 0 {
		return 0, nil
	}
	be, err := t.backend(r)
	if err != nil {
		return 0, err
	}
	if len(orders) > 0 {
		if err := be.Reorder(ctx, orders); err != nil {
			return 0, fmt.Errorf("put back the replica order of %d partitions: %w", len(orders), err)
		}
	}
	failed, err := be.ElectPreferred(ctx, elect)
	if err != nil {
		return 0, fmt.Errorf("elect broker %d again in %d partitions: %w", t.drained, len(elect), err)
	}
	// Counted: the partitions whose election took effect. One that did not keeps its
	// order back, led by another replica (the result's changes show it).
	n := 0
	for tp, e := range failed {
		if e != nil {
			t.log.Warn("leadership not given back to the drained broker", zap.Stringer("partition", tp), zap.Error(e))
			continue
		}
		n++
	}
	return n, nil
}

// elect elects the planned preferred leaders that do not lead yet (their replicas are in
// place: every copy is done). A partition whose election fails is left to the
// verification, which reports it.
func (t *rfTask) elect(ctx context.Context, r *operation.Run) error {
	var want []plan.Change
	for _, ch := range r.Entry().Changes {
		if ch.LeaderAfter != ch.LeaderBefore {
			want = append(want, ch)
		}
	}
	if len(want) == 0 {
		return nil
	}
	snap, err := t.rd(r).Snapshot(ctx, topicsOf(want)...)
	if err != nil {
		return transient(err)
	}
	var tps []model.TopicPartition
	for _, ch := range want {
		if p, ok := snap.Partition(ch.TopicPartition); ok && p.Leader != ch.LeaderAfter && slices.Equal(p.Replicas, ch.ReplicasAfter) {
			tps = append(tps, ch.TopicPartition)
		}
	}
	if len(tps) == 0 {
		return nil
	}
	be, err := t.backend(r)
	if err != nil {
		return err
	}
	return electPreferred(ctx, be, tps, t.log)
}

// electPreferred runs one preferred-leader election for tps; an election that fails for a
// partition is logged (verification reports the partition), a failed request is transient.
func electPreferred(ctx context.Context, be kafka.Reorderer, tps []model.TopicPartition, log *zap.Logger) error {
	failed, err := be.ElectPreferred(ctx, tps)
	if err != nil {
		return transient(fmt.Errorf("elect %d preferred leaders: %w", len(tps), err))
	}
	for tp, e := range failed {
		if e != nil {
			log.Warn("preferred leader election failed", zap.Stringer("partition", tp), zap.Error(e))
		}
	}
	return nil
}

// Verify reads the planned partitions until they show their target replicas (those skipped
// are not waited for), and reports the replicas each change added, with the bytes they
// hold.
func (t *rfTask) Verify(ctx context.Context, r *operation.Run) (int, error) {
	e, res := r.Entry(), r.Result
	st, err := t.read(ctx, r)
	if err != nil {
		return 0, err
	}
	res.Noop, res.Skipped = e.Noop, append(slices.Clone(e.Skipped), st.skips...)
	skipped := skippedOf(st.skips)
	now, err := observe(ctx, t.rd(r), e.Changes, t.h.cfg.VerifyTimeout, skipped, t.leaders)
	if err != nil {
		return 0, err
	}
	res.Changes = changedFrom(e.Changes, now, t.leaders)
	leave(r, res.Changes, now)
	copied := addedBytes(ctx, kadm.NewClient(t.c.Client), res.Changes)
	for i := range res.Changes {
		res.Changes[i].Bytes = copied[res.Changes[i].TopicPartition]
	}
	verified := 0
	for _, ch := range e.Changes {
		p, ok := now[ch.TopicPartition]
		if ok && shows(p, ch, t.leaders) {
			verified++
			continue
		}
		if skipped[ch.TopicPartition] {
			continue
		}
		if ok && shows(p, ch, false) {
			res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipElectionFailed, Reason: fmt.Sprintf(
				"replicas %v as planned, but led by %d, not %d: its preferred leader's election failed (isr %v)", p.Replicas, p.Leader, ch.LeaderAfter, p.ISR)})
			continue
		}
		res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified, Reason: fmt.Sprintf("after the change: replicas %v (wanted %v)", p.Replicas, ch.ReplicasAfter)})
	}
	return verified, nil
}

// throttle sets the replication throttle of the moves still to copy (see throttles.set).
func (t *rfTask) throttle(ctx context.Context, r *operation.Run, pending []plan.Change) error {
	return throttles{t.h, t.c}.set(ctx, r, t.h.cfg.RF.ThrottleSettle, t.rate > 0, func(th kafka.Throttler) ([]kafka.ThrottleKey, error) {
		spec := kafka.ThrottleSpec{Rate: t.rate, Topics: map[string]kafka.ThrottledReplicas{}}
		for _, ch := range pending {
			if added := minus(ch.ReplicasAfter, ch.ReplicasBefore); len(added) > 0 {
				tr, ok := spec.Topics[ch.Topic]
				if !ok {
					tr = kafka.ThrottledReplicas{Leaders: map[int32][]int32{}, Followers: map[int32][]int32{}}
					spec.Topics[ch.Topic] = tr
				}
				// The sources are the replicas that stay: a replica being replaced may be on
				// a broker gone for good, whose configs cannot be written.
				tr.Followers[ch.Partition] = added
				tr.Leaders[ch.Partition] = minus(ch.ReplicasBefore, minus(ch.ReplicasBefore, ch.ReplicasAfter))
			}
		}
		if len(spec.Topics) == 0 {
			return nil, nil
		}
		keys, err := th.PlanThrottles(ctx, spec)
		if err != nil {
			return nil, throttleErr(fmt.Errorf("read throttles: %w", err))
		}
		return keys, nil
	})
}

// restore puts back the throttles the operation set, where they still hold our value.
func (t *rfTask) restore(ctx context.Context, r *operation.Run) error {
	return throttles{t.h, t.c}.restore(ctx, r, "while the copy ran")
}

// submit starts the reassignments of a batch.
func (t *rfTask) submit(ctx context.Context, r *operation.Run, batch []plan.Change) error {
	targets := map[model.TopicPartition][]int32{}
	for _, ch := range batch {
		targets[ch.TopicPartition] = ch.ReplicasAfter
	}
	if t.strategy == kafka.StrategyZKReassign {
		if t.c.ZK == nil {
			return errors.New("strategy zk-reassign needs the cluster's zookeeper")
		}
		w, err := zkWriter(r, t.c)
		if err != nil {
			return err
		}
		return kafka.SubmitZKReassignment(ctx, t.c.ZK.Conn(), t.c.Chroot, w, targets)
	}
	return kafka.SubmitReassignment(ctx, t.c.Client, targets)
}

// Rollback cancels our reassignments still running (the replica sets go back), restores
// the throttles, and says what finished. A cluster that cannot cancel (Kafka before 2.4:
// no KIP-455; asked again now, a rolling upgrade may have come since the event began)
// leaves them running to their end: the entry is kept, at StepAwaiting, with the throttles
// they need, and AwaitDetached restores those once they have ended. Partitions whose
// topic was deleted meanwhile are gone: nothing of theirs runs, and their topic's
// throttles went with it.
func (t *rfTask) Rollback(ctx context.Context, r *operation.Run) (string, error) {
	e := r.Entry()
	caps, err := kafka.Probe(ctx, t.c.Client)
	if err != nil {
		return "", transient(fmt.Errorf("cluster %s: %w", t.c.Name, err))
	}
	t.caps = caps
	st, err := t.read(ctx, r)
	if err != nil {
		return "", err
	}
	var parts []string
	if len(st.running) > 0 && !caps.AlterPartitionAssignment {
		parts = append(parts, fmt.Sprintf("%d reassignments still running, which Kafka before 2.4 cannot cancel (%s): they run to their end; "+
			"the throttles stay until then, and are restored then", len(st.running), strings.Join(tpsOf(st.running), ", ")),
			fmt.Sprintf("%d of %d partitions finished", len(st.done), len(e.Changes)))
		e.Step = journal.StepAwaiting
		if err := r.Op.Save(ctx); err != nil {
			return strings.Join(parts, "; "), err
		}
		changes, err := report(ctx, t.rd(r), st.done, t.h.cfg.VerifyTimeout, t.leaders)
		if err != nil {
			return strings.Join(parts, "; "), err
		}
		r.Result.Changes = changes
		return strings.Join(parts, "; "), nil
	}
	if len(st.running) > 0 {
		if err := kafka.CancelReassignments(ctx, t.c.Client, tpsOfChanges(st.running)); err != nil {
			return "", fmt.Errorf("cancel %d unfinished reassignments: %w", len(st.running), err)
		}
		parts = append(parts, fmt.Sprintf("cancelled %d unfinished reassignments (%s)", len(st.running), strings.Join(tpsOf(st.running), ", ")))
	}
	// The throttles go back before the leadership: nothing needs them once the copies are
	// cancelled, and an election that does not end in time must not keep them on.
	rerr := t.restore(ctx, r)
	if n, err := t.unshed(ctx, r); err != nil {
		if rerr == nil {
			parts = append(parts, "throttles restored")
		}
		return strings.Join(parts, "; "), errors.Join(err, rerr)
	} else if n > 0 {
		parts = append(parts, fmt.Sprintf("the leadership of %d partitions given back to broker %d", n, t.drained))
	}
	parts = append(parts, fmt.Sprintf("%d of %d partitions finished", len(st.done), len(e.Changes)))
	if gone := len(st.skips); gone > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped (%s)", gone, st.skips[0].Reason))
	}
	if rerr != nil {
		return strings.Join(parts, "; "), rerr
	}
	// The copies cancelled and those never started are back as before the event (a
	// leadership not given back is waited for only as long as observeUndone waits, and
	// listed as a change).
	now, err := observeUndone(ctx, t.rd(r), e.Changes, allOf(st.pending()), t.h.cfg.VerifyTimeout, t.leaders)
	if err != nil {
		return strings.Join(parts, "; "), err
	}
	r.Result.Changes = changedFrom(e.Changes, now, t.leaders)
	leave(r, r.Result.Changes, now)
	return strings.Join(parts, "; "), nil
}

// AwaitDetached finishes an operation that a final failure left at StepAwaiting (its
// result is published): it waits, the lock held, until the reassignments it left running
// have ended (no longer in /admin/reassign_partitions), however long they take — on a
// cluster that cannot cancel them, no other reassignment could run meanwhile anyway —
// then puts its throttles back (compare-and-restore). The engine closes the entry. It
// returns early, writing nothing, when ctx ends (shutdown, lost lock): the event is
// delivered again, and that delivery waits again.
func (t *rfTask) AwaitDetached(ctx context.Context, r *operation.Run) error {
	e := r.Entry()
	var last []string
	for {
		st, err := t.read(ctx, r)
		if err == nil {
			if len(st.running) == 0 {
				break
			}
			if now := tpsOf(st.running); !slices.Equal(now, last) {
				r.Log.Info("waiting for our reassignments, which this cluster cannot cancel, to end before restoring the throttles",
					zap.Strings("partitions", now), zap.Int("throttles", len(e.Throttles)))
				last = now
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(t.h.cfg.CopyPoll):
		}
	}
	if err := t.restore(ctx, r); err != nil {
		return err
	}
	for _, n := range e.Notes {
		r.Log.Info("after the result", zap.String("note", n))
	}
	r.Log.Info("reassignments ended; throttles restored", zap.String("event", e.Event))
	return nil
}

func tpsOfChanges(l []plan.Change) []model.TopicPartition {
	out := make([]model.TopicPartition, len(l))
	for i, ch := range l {
		out[i] = ch.TopicPartition
	}
	return out
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// minInsyncReplicas reads the topic's effective min.insync.replicas.
func minInsyncReplicas(ctx context.Context, c *Cluster, topic string) (int, error) {
	rcs, err := kadm.NewClient(c.Client).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, transient(fmt.Errorf("describe configs of %s: %w", topic, err))
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return 0, operation.Reject("topic %q does not exist", topic)
	}
	if err != nil {
		return 0, transient(fmt.Errorf("describe configs of %s: %w", topic, err))
	}
	if v, ok := configValue(rc.Configs, "min.insync.replicas"); ok {
		return strconv.Atoi(v)
	}
	return 1, nil
}

// reassignmentLister lists ongoing reassignments (kafka.Reader, freshReader).
type reassignmentLister interface {
	Reassignments(ctx context.Context, topics []string) (map[model.TopicPartition]kafka.Reassignment, error)
}

// waitForeign waits until no reassignment runs on the cluster but ours (those ours
// reports, from the journal), backing off, for at most wait; then it fails with the list
// of those still running. It lists them through the API (Kafka 2.4+) or, before, from
// /admin/reassign_partitions.
func waitForeign(ctx context.Context, rd reassignmentLister, wait time.Duration, ours func(model.TopicPartition, []int32) bool, log *zap.Logger) error {
	end := time.Now().Add(wait)
	delay := time.Second
	for {
		ongoing, err := rd.Reassignments(ctx, nil)
		if errors.Is(err, kafka.ErrUnsupported) {
			return err
		}
		if err != nil {
			return transient(err)
		}
		var list []string
		for tp, r := range ongoing {
			if ours == nil || !ours(tp, r.To()) {
				list = append(list, fmt.Sprintf("%s (%s)", tp, r))
			}
		}
		if len(list) == 0 {
			return nil
		}
		sort.Strings(list)
		if time.Now().After(end) {
			return fmt.Errorf("refusing to start: %d reassignments started by someone else are running: %s", len(list), strings.Join(list, ", "))
		}
		log.Info("waiting for foreign reassignments", zap.Strings("partitions", list))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// batchMoves splits the changes, in their order (the most urgent first), into batches in
// which no broker has more than max copies in or out (copyLoad); trims (nothing to copy)
// all go in the first batch. A change that alone exceeds max gets a batch of its own.
func batchMoves(changes []plan.Change, max int, live func(int32) bool) [][]plan.Change {
	var batches [][]plan.Change
	var trims []plan.Change
	var moves []plan.Change
	for _, ch := range changes {
		if len(minus(ch.ReplicasAfter, ch.ReplicasBefore)) == 0 {
			trims = append(trims, ch)
		} else {
			moves = append(moves, ch)
		}
	}
	current, load := trims, map[int32]int{}
	for _, ch := range moves {
		brokers := copyLoad(ch, live)
		full := false
		for _, b := range brokers {
			if load[b] >= max {
				full = true
			}
		}
		if full && len(current) > 0 {
			batches = append(batches, current)
			current, load = nil, map[int32]int{}
		}
		current = append(current, ch)
		for _, b := range brokers {
			load[b]++
		}
	}
	if len(current) > 0 {
		batches = append(batches, current)
	}
	return batches
}

// copyLoad lists the brokers a change's copy loads, as Cruise Control counts a
// partition movement on both ends: every broker that receives a new replica, the leader
// the new replicas fetch from (during a drain, the replica that took over its
// leadership), and every live broker that leaves the replicas. A broker not live does
// nothing and is not counted.
func copyLoad(ch plan.Change, live func(int32) bool) []int32 {
	out := minus(ch.ReplicasAfter, ch.ReplicasBefore)
	removed := minus(ch.ReplicasBefore, ch.ReplicasAfter)
	source := ch.LeaderBefore
	if slices.Contains(removed, source) && slices.Contains(ch.ReplicasBefore, ch.LeaderAfter) {
		source = ch.LeaderAfter // shed first: the new leader serves the copy
	}
	for _, b := range append([]int32{source}, removed...) {
		if b >= 0 && live(b) && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// pendingMoves lists the batch's partitions still copying or still to submit, from a fresh
// read: not yet at their target replicas, or still being reassigned (before Kafka 2.4,
// still listed in /admin/reassign_partitions: the metadata shows the target replicas from
// the start). A partition gone (its topic deleted) or changed by someone else is not
// waited for.
func (t *rfTask) pendingMoves(ctx context.Context, r *operation.Run, batch []plan.Change) ([]plan.Change, error) {
	st, err := t.read(ctx, r)
	if err != nil {
		return batch, err
	}
	pending := allOf(st.pending())
	var out []plan.Change
	for _, ch := range batch {
		if pending[ch.TopicPartition] {
			out = append(out, ch)
		}
	}
	return out, nil
}

// expectedBytes is what the new replicas must copy: the leader replica's size, once per
// added replica (best effort: 0 when log dirs cannot be described).
func expectedBytes(ctx context.Context, adm *kadm.Client, changes []plan.Change) int64 {
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(changes))
	if err != nil {
		return 0
	}
	var total int64
	for _, ch := range changes {
		added := len(minus(ch.ReplicasAfter, ch.ReplicasBefore))
		if added == 0 || ch.LeaderBefore < 0 {
			continue
		}
		if p, ok := dirs[ch.LeaderBefore].LookupPartition(ch.Topic, ch.Partition); ok {
			total += p.Size * int64(added)
		}
	}
	return total
}

// copiedBytes sums the sizes of the added replicas so far (future and current logs).
func copiedBytes(ctx context.Context, adm *kadm.Client, changes []plan.Change) int64 {
	var total int64
	for _, n := range addedBytes(ctx, adm, changes) {
		total += n
	}
	return total
}

// addedBytes is the size of each change's added replicas (future and current logs), by
// partition; best effort: empty when log dirs cannot be described.
func addedBytes(ctx context.Context, adm *kadm.Client, changes []plan.Change) map[model.TopicPartition]int64 {
	out := map[model.TopicPartition]int64{}
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(changes))
	if err != nil {
		return out
	}
	for _, ch := range changes {
		for _, b := range minus(ch.ReplicasAfter, ch.ReplicasBefore) {
			if p, ok := dirs[b].LookupPartition(ch.Topic, ch.Partition); ok {
				out[ch.TopicPartition] += p.Size
			}
		}
	}
	return out
}

func moving(changes []plan.Change) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for _, ch := range changes {
		s.Add(ch.Topic, ch.Partition)
	}
	return s
}
