package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// attemptTimeout bounds one attempt of a reorder or an election.
const attemptTimeout = 45 * time.Second

// SkipChanged: the partition was changed by someone else since the plan was journaled.
const SkipChanged plan.SkipCode = "changed_since_plan"

// SkipCodes lists every code a skipped partition of a result may carry.
func SkipCodes() []string {
	var out []string
	for _, c := range append(plan.SkipCodes(), SkipChanged) {
		out = append(out, string(c))
	}
	return out
}

// reorderOp is the reorder-and-elect operation that preferred-leader and broker-overloaded
// share: every reorder in one request, then the preferred elections in one batch (chunked
// above batch), then verification from fresh reads. Apply leaves, for Verify, what only
// it knows: the elections that failed and the orders it put back.
type reorderOp struct {
	h        *Handlers
	c        *Cluster
	strategy kafka.Strategy
	caps     kafka.Capabilities
	batch    int // partitions per election request; 0: all in one

	// planned is the read the fresh run's plan was made from, just before it was
	// journaled: Apply starts from it instead of reading again.
	planned *model.Snapshot

	electErrs map[model.TopicPartition]error // elections that failed, by Apply
	back      map[model.TopicPartition][]int32
	putBack   bool // Apply put the orders in back again
	skipped   map[model.TopicPartition]bool
	fresh     *freshReader // every read of this attempt (rd)
}

func (h *Handlers) reorderOp(c *Cluster, strategy kafka.Strategy, caps kafka.Capabilities, batch int) reorderOp {
	return reorderOp{h: h, c: c, strategy: strategy, caps: caps, batch: batch}
}

// rd reads the cluster with what it has (reassignments before 2.4 from the znode), at
// least as new as what the last operation left.
func (o *reorderOp) rd(r *operation.Run) *freshReader {
	if o.fresh == nil {
		o.fresh = newFreshReader(o.c.reader(o.caps), r.Floor(), o.h.cfg.VerifyTimeout, r.Log)
	}
	o.fresh.prefetch(r, o.caps)
	if r.Op != nil {
		o.fresh.plan(r.Entry().Changes)
	}
	return o.fresh
}

// backend builds the strategy's backend: ZooKeeper writes are fenced by the run's lock,
// and zk-nudge keeps its progress in the journal entry.
func (o *reorderOp) backend(r *operation.Run) (kafka.Reorderer, error) {
	if o.strategy == kafka.StrategyAPI {
		return kafka.NewAPIBackend(o.c.Client), nil
	}
	if o.c.ZK == nil {
		return nil, fmt.Errorf("strategy %s needs the cluster's zookeeper", o.strategy)
	}
	w, err := zkWriter(r, o.c)
	if err != nil {
		return nil, err
	}
	return kafka.NewZKBackend(o.strategy, kafka.ZKConfig{Conn: o.c.ZK.Conn(), Chroot: o.c.Chroot, Writer: w,
		Client: o.c.Client, Caps: o.caps, Nudge: nudgeJournal{r}})
}

// nudgeJournal keeps zk-nudge progress in the operation's journal entry.
type nudgeJournal struct{ r *operation.Run }

func (n nudgeJournal) State() *model.NudgeState { return n.r.Entry().Nudge }

func (n nudgeJournal) Record(ctx context.Context, st *model.NudgeState) error {
	n.r.Entry().Nudge = st
	return n.r.Op.Save(ctx)
}

// remaining compares the journaled plan with a fresh read: what each partition still needs
// (as changes from its current state to the planned one), and the partitions to skip.
func remaining(snap *model.Snapshot, planned []plan.Change) ([]plan.Change, []plan.Skip) {
	var todo []plan.Change
	var skips []plan.Skip
	for _, ch := range planned {
		p, ok := snap.Partition(ch.TopicPartition)
		switch {
		case !ok:
			skips = append(skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: "the partition no longer exists"})
		case slices.Equal(p.Replicas, ch.ReplicasAfter) && p.Leader == ch.LeaderAfter:
			// done
		case p.Reassigning():
			skips = append(skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipReassigning, Reason: fmt.Sprintf(
				"under reassignment by someone else since the plan (%s)", p.Reassignment())})
		case slices.Equal(p.Replicas, ch.ReplicasAfter) || slices.Equal(p.Replicas, ch.ReplicasBefore):
			todo = append(todo, plan.Change{TopicPartition: ch.TopicPartition, ReplicasBefore: p.Replicas, ReplicasAfter: ch.ReplicasAfter,
				LeaderBefore: p.Leader, LeaderAfter: ch.LeaderAfter})
		default:
			skips = append(skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: fmt.Sprintf(
				"changed by someone else since the plan: replicas %v led by %d (planned %v led by %d from %v)",
				p.Replicas, p.Leader, ch.ReplicasAfter, ch.LeaderAfter, ch.ReplicasBefore)})
		}
	}
	return todo, skips
}

// Apply carries the journaled plan out, resuming wherever an earlier attempt stopped: the
// reorders still needed, then the elections; a partition reordered whose election failed
// gets its order back (never between; not with zk-nudge: one controller failover per
// event).
func (o *reorderOp) Apply(ctx context.Context, r *operation.Run) error {
	e, res, log := r.Entry(), r.Result, r.Log
	be, err := o.backend(r)
	if err != nil {
		return err
	}
	snap := o.planned
	o.planned = nil
	if snap == nil {
		if snap, err = o.rd(r).Snapshot(ctx, topicsOf(e.Changes)...); err != nil {
			return transient(err)
		}
	}
	todo, skips := remaining(snap, e.Changes)
	res.Skipped = append(slices.Clone(e.Skipped), skips...)
	o.skipped = skippedOf(skips)
	p := plan.Plan{Changes: todo}
	if reorders := p.Reorders(); len(reorders) > 0 {
		reorder := be.Reorder
		if early, ok := be.(kafka.ElectionReorderer); ok && len(p.Elections()) > 0 {
			// The elections follow at once; the reads after them wait for what they check.
			// The orders are checked against the read they were computed from, just made.
			first := true
			reorder = func(ctx context.Context, orders map[model.TopicPartition][]int32) error {
				if first {
					first = false
					return early.ReorderForElectionFrom(ctx, snap, orders)
				}
				return early.ReorderForElection(ctx, orders) // a retry reads again
			}
		}
		err := o.retry(ctx, log, func(ctx context.Context) error { return reorder(ctx, reorders) })
		res.ControllerFailover = be.ControllerFailover()
		if err != nil {
			return fmt.Errorf("reorder replicas: %w", err)
		}
	}
	o.electErrs = map[model.TopicPartition]error{}
	if elections := p.Elections(); len(elections) > 0 {
		r.Step(operation.StepReordered)
		for len(elections) > 0 {
			chunk := elections
			if o.batch > 0 && len(chunk) > o.batch {
				chunk = chunk[:o.batch]
			}
			elections = elections[len(chunk):]
			err := o.retry(ctx, log, func(ctx context.Context) error {
				out, err := be.ElectPreferred(ctx, chunk)
				if err != nil {
					return err
				}
				for tp, e := range out {
					if e != nil {
						o.electErrs[tp] = e
					} else {
						delete(o.electErrs, tp)
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("preferred election: %w", err)
			}
		}
	}
	for tp := range o.electErrs {
		o.skipped[tp] = true
	}
	return o.putBackUnelected(ctx, r, be, p)
}

// putBackUnelected gives their order back to the partitions reordered whose election did
// not take effect (not with zk-nudge: one controller failover per event).
func (o *reorderOp) putBackUnelected(ctx context.Context, r *operation.Run, be kafka.Reorderer, p plan.Plan) error {
	failed := failedElectionOrders(p.Reorders(), o.electErrs)
	if len(failed) == 0 {
		return nil
	}
	// Whether to put an order back is read from metadata, which may not show the new
	// order yet (the reorders returned at the controller): wait until it does, or until
	// the verify timeout, before reading.
	wctx, cancel := context.WithTimeout(ctx, o.h.cfg.VerifyTimeout)
	if err := kafka.WaitForOrders(wctx, o.c.Client, failed); err != nil {
		r.Log.Warn("the new orders of partitions whose election failed do not show yet", zap.Error(err))
	}
	cancel()
	e := r.Entry()
	now, err := observe(ctx, o.rd(r), e.Changes, o.h.cfg.VerifyTimeout, o.skipped, true)
	if err != nil {
		return err
	}
	o.back = unelected(e.Changes, func(tp model.TopicPartition) (model.Partition, bool) {
		p, ok := now[tp]
		return p, ok
	})
	if len(o.back) == 0 || o.strategy == kafka.StrategyZKNudge {
		return nil
	}
	if err := o.retry(ctx, r.Log, func(ctx context.Context) error { return be.Reorder(ctx, o.back) }); err != nil {
		return fmt.Errorf("put the order back where the election failed: %w", err)
	}
	o.putBack = true
	return nil
}

// Verify reads the planned partitions until they show the plan (those skipped are not
// waited for), and reports what changed, what was skipped and why.
func (o *reorderOp) Verify(ctx context.Context, r *operation.Run) (int, error) {
	e, res := r.Entry(), r.Result
	res.Noop = e.Noop
	if res.Skipped == nil {
		res.Skipped = slices.Clone(e.Skipped)
	}
	// The metadata alone: a reorder's reassignment adds and removes nothing and completes
	// at once, so the replicas and leader it shows are the whole answer (on KRaft, where
	// ListPartitionReassignments goes to the controller, that halves each read).
	now, err := observe(ctx, o.rd(r).placements(), e.Changes, o.h.cfg.VerifyTimeout, o.skipped, true)
	if err != nil {
		return 0, err
	}
	res.Changes = changedFrom(e.Changes, now, true)
	leave(r, res.Changes, now)
	verified := 0
	for _, ch := range e.Changes {
		p := now[ch.TopicPartition]
		if shows(p, ch, true) {
			verified++
			continue
		}
		if o.skipped[ch.TopicPartition] && o.electErrs[ch.TopicPartition] == nil {
			continue // skipped by Apply, with its reason
		}
		skip := plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified, Reason: fmt.Sprintf(
			"after the change: replicas %v, leader %d (wanted %v led by %d)", p.Replicas, p.Leader, ch.ReplicasAfter, ch.LeaderAfter)}
		if e := o.electErrs[ch.TopicPartition]; e != nil {
			skip.Code = plan.SkipElectionFailed
			switch {
			case o.putBack && o.back[ch.TopicPartition] != nil:
				skip.Reason = fmt.Sprintf("the election failed (%v): the replica order was put back to %v", e, p.Replicas)
			case o.back[ch.TopicPartition] != nil:
				skip.Reason = fmt.Sprintf("replicas reordered to %v but the election failed (%v); the order stays: zk-nudge allows one controller failover per event", p.Replicas, e)
			default:
				skip.Reason = fmt.Sprintf("the election failed: %v", e)
			}
		}
		res.Skipped = append(res.Skipped, skip)
	}
	return verified, nil
}

// failedElectionOrders returns the new orders of the reordered partitions whose election failed.
func failedElectionOrders(reorders map[model.TopicPartition][]int32, electErrs map[model.TopicPartition]error) map[model.TopicPartition][]int32 {
	out := map[model.TopicPartition][]int32{}
	for tp := range electErrs {
		if order, ok := reorders[tp]; ok {
			out[tp] = order
		}
	}
	return out
}

// Rollback undoes what a final failure left half-done: zk-nudge topic znodes rewritten
// before a failover that did not happen are put back; partitions reordered whose election
// did not take effect get their order back (api, zk-reassign).
func (o *reorderOp) Rollback(ctx context.Context, r *operation.Run) (string, error) {
	e := r.Entry()
	var done []string
	if st := e.Nudge; st != nil && !st.FailoverStarted && !st.Restored {
		zb, err := o.backend(r)
		if err != nil {
			return "", err
		}
		// RestoreNudgeZnodes records st.Restored in the journal (nudgeJournal) itself.
		restored, err := zb.(*kafka.ZKBackend).RestoreNudgeZnodes(ctx, st)
		if err != nil {
			return restored.String(), err
		}
		done = append(done, restored.String()+" (no controller failover happened)")
	}
	snap, err := o.rd(r).Snapshot(ctx, topicsOf(e.Changes)...)
	if err != nil {
		return strings.Join(done, "; "), transient(err)
	}
	back := unelected(e.Changes, snap.Partition)
	var undone map[model.TopicPartition][]int32 // put back here: the read waits for them
	switch {
	case len(back) == 0:
	case o.strategy == kafka.StrategyZKNudge:
		done = append(done, fmt.Sprintf("%d partitions keep the new order without its election (zk-nudge allows one controller failover per event)", len(back)))
	default:
		be, err := o.backend(r)
		if err != nil {
			return strings.Join(done, "; "), err
		}
		if err := be.Reorder(ctx, back); err != nil {
			return strings.Join(done, "; "), fmt.Errorf("put the replica order back: %w", err)
		}
		done = append(done, fmt.Sprintf("replica order put back on %d partitions whose election had not taken effect", len(back)))
		undone = back
	}
	now, err := observeUndone(ctx, o.rd(r), e.Changes, undone, o.h.cfg.VerifyTimeout, true)
	if err != nil {
		return strings.Join(done, "; "), err
	}
	r.Result.Changes = changedFrom(e.Changes, now, true)
	leave(r, r.Result.Changes, now)
	return strings.Join(done, "; "), nil
}

// unelected returns the old replica order of each planned partition that part shows with
// its new order but not its planned leader (its election did not take effect), and not
// under reassignment: what to put back so that it is not left between.
func unelected(planned []plan.Change, part func(model.TopicPartition) (model.Partition, bool)) map[model.TopicPartition][]int32 {
	back := map[model.TopicPartition][]int32{}
	for _, ch := range planned {
		p, ok := part(ch.TopicPartition)
		if ok && ch.Reordered() && slices.Equal(p.Replicas, ch.ReplicasAfter) && p.Leader != ch.LeaderAfter && !p.Reassigning() {
			back[ch.TopicPartition] = ch.ReplicasBefore
		}
	}
	return back
}

// retry runs op with retries of transient failures, for at most ApplyTimeout, each
// attempt bounded: a request the controller never answers (its event queue was dropped
// when it resigned, e.g. in a controller failover) must not hang the operation; the next
// attempt finds the new controller.
func (o *reorderOp) retry(ctx context.Context, log *zap.Logger, op func(ctx context.Context) error) error {
	bound := o.h.cfg.ApplyTimeout
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := retry.Do(actx, bound, func() error {
		tctx, cancel := context.WithTimeout(actx, attemptTimeout)
		defer cancel()
		err := op(tctx)
		if err != nil && tctx.Err() != nil && actx.Err() == nil {
			return transient(fmt.Errorf("no answer within %s: %w", attemptTimeout, err))
		}
		return err
	}, func(err error, next time.Duration) {
		log.Warn("retrying", zap.Error(err), zap.Duration("in", next))
	})
	if err != nil && ctx.Err() != nil {
		return errors.Join(err, context.Cause(ctx))
	}
	return err
}

// reorderEntry reports whether the journaled plan is reorders and elections only (a
// preferred-leader change or a shed): no change of a replica set. A replication-factor
// change always changes the set of each partition it plans.
func reorderEntry(e *journal.Entry) bool {
	for _, ch := range e.Changes {
		if !sameSet(ch.ReplicasBefore, ch.ReplicasAfter) {
			return false
		}
	}
	return true
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
