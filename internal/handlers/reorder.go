package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
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
// above batch), then verification from fresh reads.
type reorderOp struct {
	h        *Handlers
	c        *Cluster
	strategy kafka.Strategy
	caps     kafka.Capabilities
	batch    int // partitions per election request; 0: all in one
}

// rd reads the cluster with what it has (reassignments before 2.4 from the znode).
func (r *reorderOp) rd() kafka.Reader { return r.c.reader(r.caps) }

// backend builds the strategy's backend: ZooKeeper writes are fenced by the lease's lock,
// and zk-nudge keeps its progress in the journal entry.
func (r *reorderOp) backend(x *exec) (kafka.Reorderer, error) {
	if r.strategy == kafka.StrategyAPI {
		return kafka.NewAPIBackend(r.c.Client), nil
	}
	if r.c.ZK == nil {
		return nil, fmt.Errorf("strategy %s needs the cluster's zookeeper", r.strategy)
	}
	w, err := x.l.zkWriter()
	if err != nil {
		return nil, err
	}
	return kafka.NewZKBackend(r.strategy, kafka.ZKConfig{Conn: r.c.ZK.Conn(), Chroot: r.c.Chroot, Writer: w,
		Client: r.c.Client, Caps: r.caps, Nudge: nudgeJournal{x}})
}

// nudgeJournal keeps zk-nudge progress in the operation's journal entry.
type nudgeJournal struct{ x *exec }

func (n nudgeJournal) State() *model.NudgeState { return n.x.op.Entry.Nudge }

func (n nudgeJournal) Record(ctx context.Context, st *model.NudgeState) error {
	n.x.op.Entry.Nudge = st
	return n.x.op.Save(ctx)
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

// run carries the journaled plan out, resuming wherever an earlier attempt stopped, and
// fills x.res; it returns how many planned partitions a fresh read shows as planned.
func (r *reorderOp) run(ctx context.Context, x *exec) (int, error) {
	e := &x.op.Entry
	res, log := x.res, x.log
	res.Noop, res.Skipped = e.Noop, slices.Clone(e.Skipped)
	be, err := r.backend(x)
	if err != nil {
		return 0, err
	}
	snap, err := r.rd().Snapshot(ctx, topicsOf(e.Changes)...)
	if err != nil {
		return 0, transient(err)
	}
	todo, skips := remaining(snap, e.Changes)
	res.Skipped = append(res.Skipped, skips...)
	skipped := skippedOf(skips)
	p := plan.Plan{Changes: todo}
	if reorders := p.Reorders(); len(reorders) > 0 {
		if err := x.save(ctx, journal.StepReordering); err != nil {
			return 0, err
		}
		reorder := be.Reorder
		if early, ok := be.(kafka.ElectionReorderer); ok && len(p.Elections()) > 0 {
			// The elections follow at once; the reads after them wait for what they check.
			reorder = early.ReorderForElection
		}
		err := r.apply(ctx, log, func(ctx context.Context) error { return reorder(ctx, reorders) })
		res.ControllerFailover = be.ControllerFailover()
		if err != nil {
			return 0, fmt.Errorf("reorder replicas: %w", err)
		}
	}
	electErrs := map[model.TopicPartition]error{}
	if elections := p.Elections(); len(elections) > 0 {
		if err := x.save(ctx, journal.StepElecting); err != nil {
			return 0, err
		}
		x.hook(StepReordered)
		for len(elections) > 0 {
			chunk := elections
			if r.batch > 0 && len(chunk) > r.batch {
				chunk = chunk[:r.batch]
			}
			elections = elections[len(chunk):]
			err := r.apply(ctx, log, func(ctx context.Context) error {
				out, err := be.ElectPreferred(ctx, chunk)
				if err != nil {
					return err
				}
				for tp, e := range out {
					if e != nil {
						electErrs[tp] = e
					} else {
						delete(electErrs, tp)
					}
				}
				return nil
			})
			if err != nil {
				return 0, fmt.Errorf("preferred election: %w", err)
			}
		}
	}
	for tp := range electErrs {
		skipped[tp] = true
	}
	if failed := failedElectionOrders(p.Reorders(), electErrs); len(failed) > 0 {
		// Whether to put an order back is read from metadata, which may not show the new
		// order yet (the reorders returned at the controller): wait until it does, or
		// until the verify timeout, before reading.
		wctx, cancel := context.WithTimeout(ctx, r.h.cfg.VerifyTimeout)
		if err := kafka.WaitForOrders(wctx, r.c.Client, failed); err != nil {
			log.Warn("the new orders of partitions whose election failed do not show yet", zap.Error(err))
		}
		cancel()
	}
	now, err := observe(ctx, r.rd(), e.Changes, r.h.cfg.VerifyTimeout, skipped, true)
	if err != nil {
		return 0, err
	}
	// Never between: a partition reordered whose election did not take effect gets its
	// order back (not with zk-nudge: one controller failover per event).
	back := unelected(e.Changes, func(tp model.TopicPartition) (model.Partition, bool) {
		p, ok := now[tp]
		return p, ok
	})
	putBack := false
	if len(back) > 0 && r.strategy != kafka.StrategyZKNudge {
		if err := r.apply(ctx, log, func(ctx context.Context) error { return be.Reorder(ctx, back) }); err != nil {
			return 0, fmt.Errorf("put the order back where the election failed: %w", err)
		}
		putBack = true
		if now, err = observe(ctx, r.rd(), e.Changes, r.h.cfg.VerifyTimeout, skipped, true); err != nil {
			return 0, err
		}
	}
	res.Changes = changedFrom(e.Changes, now, true)
	verified := 0
	for _, ch := range e.Changes {
		p := now[ch.TopicPartition]
		if shows(p, ch, true) {
			verified++
			continue
		}
		if skipped[ch.TopicPartition] && electErrs[ch.TopicPartition] == nil {
			continue // skipped above, with its reason
		}
		skip := plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified, Reason: fmt.Sprintf(
			"after the change: replicas %v, leader %d (wanted %v led by %d)", p.Replicas, p.Leader, ch.ReplicasAfter, ch.LeaderAfter)}

		if e := electErrs[ch.TopicPartition]; e != nil {
			skip.Code = plan.SkipElectionFailed
			switch {
			case putBack && back[ch.TopicPartition] != nil:
				skip.Reason = fmt.Sprintf("the election failed (%v): the replica order was put back to %v", e, p.Replicas)
			case back[ch.TopicPartition] != nil:
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

// rollback undoes what a final failure left half-done: zk-nudge topic znodes rewritten
// before a failover that did not happen are put back; partitions reordered whose election
// did not take effect get their order back (api, zk-reassign).
func (r *reorderOp) rollback(ctx context.Context, x *exec) (string, error) {
	e := &x.op.Entry
	var done []string
	if st := e.Nudge; st != nil && !st.FailoverStarted && !st.Restored {
		zb, err := r.backend(x)
		if err != nil {
			return "", err
		}
		// RestoreNudge records st.Restored in the journal (nudgeJournal) itself.
		kept, err := zb.(*kafka.ZKBackend).RestoreNudge(ctx, st)
		if err != nil {
			return "", err
		}
		done = append(done, "topic znodes put back (no controller failover happened)")
		if len(kept) > 0 {
			done = append(done, fmt.Sprintf("left %v: changed by someone else since our write", kept))
		}
	}
	snap, err := r.rd().Snapshot(ctx, topicsOf(e.Changes)...)
	if err != nil {
		return strings.Join(done, "; "), transient(err)
	}
	back := unelected(e.Changes, snap.Partition)
	switch {
	case len(back) == 0:
	case r.strategy == kafka.StrategyZKNudge:
		done = append(done, fmt.Sprintf("%d partitions keep the new order without its election (zk-nudge allows one controller failover per event)", len(back)))
	default:
		be, err := r.backend(x)
		if err != nil {
			return strings.Join(done, "; "), err
		}
		if err := be.Reorder(ctx, back); err != nil {
			return strings.Join(done, "; "), fmt.Errorf("put the replica order back: %w", err)
		}
		done = append(done, fmt.Sprintf("replica order put back on %d partitions whose election had not taken effect", len(back)))
	}
	changes, err := report(ctx, r.rd(), e.Changes, true)
	if err != nil {
		return strings.Join(done, "; "), err
	}
	x.res.Changes = changes
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

// apply runs op with retries of transient failures, for at most ApplyTimeout, each attempt
// bounded: a request the controller never answers (its event queue was dropped when it
// resigned, e.g. in a controller failover) must not hang the operation; the next attempt
// finds the new controller.
func (r *reorderOp) apply(ctx context.Context, log *zap.Logger, op func(ctx context.Context) error) error {
	bound := r.h.cfg.ApplyTimeout
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

// observe reads the planned partitions until each shows its planned replicas and leader
// (those in skip are not waited for) or timeout passes, and returns the last read. A read
// that fails is tried again; when none succeeded, the error is returned (transient):
// nothing counts as verified without a fresh read.
//
// With leaders false only the replica lists are compared (replication-factor changes do
// not move leadership, but a broker restart may).
func observe(ctx context.Context, rd kafka.Reader, planned []plan.Change, timeout time.Duration, skip map[model.TopicPartition]bool, leaders bool) (map[model.TopicPartition]model.Partition, error) {
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

// report reads the planned partitions once and returns the changes they show.
func report(ctx context.Context, rd kafka.Reader, planned []plan.Change, leaders bool) ([]plan.Change, error) {
	now, err := observe(ctx, rd, planned, 0, allOf(planned), leaders)
	if err != nil {
		return nil, err
	}
	return changedFrom(planned, now, leaders), nil
}

func allOf(changes []plan.Change) map[model.TopicPartition]bool {
	m := make(map[model.TopicPartition]bool, len(changes))
	for _, ch := range changes {
		m[ch.TopicPartition] = true
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
