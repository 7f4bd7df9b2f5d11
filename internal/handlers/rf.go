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
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// RFOptions tunes replication-factor changes.
type RFOptions struct {
	// Throttle is the default replication throttle (bytes/s) when the event sets none;
	// 0: no throttle.
	Throttle int64
	// Timeout is the default bound of the whole change, across attempts, when the event
	// sets none. Default 1h.
	Timeout time.Duration
	// MaxMovesPerBroker caps the partitions copying to one broker at a time. Default 4.
	MaxMovesPerBroker int
	// ForeignWait is how long to wait for reassignments started by someone else before
	// failing with their list. Default 1m.
	ForeignWait time.Duration
	// AllowInternal lets the factor of internal topics (__consumer_offsets, …) change.
	AllowInternal bool
	// Poll is the interval of progress checks. Default 2s.
	Poll time.Duration
	// ThrottleSettle is how long to wait after setting throttles before the first copy
	// starts. Brokers apply throttle configs asynchronously (ZooKeeper change
	// notifications, KRaft metadata publication), some time after DescribeConfigs shows
	// them; a copy started at once runs unthrottled until then, and a small partition
	// copies whole before the throttle bites. Default 2s; negative: no wait.
	ThrottleSettle time.Duration
}

func (o *RFOptions) defaults() {
	if o.Timeout == 0 {
		o.Timeout = time.Hour
	}
	if o.MaxMovesPerBroker == 0 {
		o.MaxMovesPerBroker = 4
	}
	if o.ForeignWait == 0 {
		o.ForeignWait = time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	if o.ThrottleSettle == 0 {
		o.ThrottleSettle = 2 * time.Second
	}
}

// Progress is the progress report of a copy (events.Progress, part of the contract).
type Progress = events.Progress

// rfTask raises or lowers a topic's replication factor: append (only the new replicas copy
// data, leadership stays) or trim (out-of-sync first, never the leader), throttled, in
// batches, with progress and a timeout across attempts. The throttles it sets are put back
// by compare-and-restore when the copy is over; a graceful shutdown leaves the copy running
// for the next holder.
type rfTask struct {
	h        *Handlers
	c        *Cluster
	strategy kafka.Strategy
	caps     kafka.Capabilities // probed when the event is prepared (each attempt, each takeover)
	req      plan.RFRequest
	timeout  time.Duration
	rate     int64
	job      *pipeline.Job
	log      *zap.Logger
}

func (h *Handlers) newRF(ctx context.Context, job *pipeline.Job, c *Cluster, req *events.ReplicaChange, res *events.Result, log *zap.Logger) (task, error) {
	o := h.cfg.RF
	strategy, caps, err := strategyFor(ctx, c, req.Strategy)
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	if strategy == kafka.StrategyZKNudge {
		return nil, reject("strategy zk-nudge never changes a replica set (the controller would not start or stop replicas): use api or zk-reassign")
	}
	if *req.ReplicationFactor < 1 {
		return nil, reject("replication_factor %d: must be at least 1", *req.ReplicationFactor)
	}
	minISR, err := minInsyncReplicas(ctx, c, req.Topic)
	if err != nil {
		return nil, err
	}
	t := &rfTask{h: h, c: c, strategy: strategy, caps: caps, job: job, log: log, timeout: o.Timeout, rate: o.Throttle,
		req: plan.RFRequest{Topic: req.Topic, Partitions: req.Partitions, Factor: *req.ReplicationFactor, MinISR: minISR, AllowInternal: o.AllowInternal}}
	if req.Timeout.Duration > 0 {
		t.timeout = req.Timeout.Duration
	}
	if req.ThrottleBytesPerSec > 0 {
		t.rate = req.ThrottleBytesPerSec
	}
	if err := throttleable(c, caps, t.rate); err != nil {
		return nil, err
	}
	return t, nil
}

// throttleable rejects a change that asks for a throttle the cluster cannot have set and
// put back safely (kafka.ChooseConfigs).
func throttleable(c *Cluster, caps kafka.Capabilities, rate int64) error {
	if rate <= 0 {
		return nil
	}
	if _, err := kafka.ChooseConfigs(caps, c.ZK != nil); err != nil {
		return reject("cluster %s: %v", c.Name, err)
	}
	return nil
}

// rd reads the cluster with what it has: before Kafka 2.4 a reassignment runs until
// /admin/reassign_partitions no longer lists it, whatever the metadata shows.
func (t *rfTask) rd() kafka.Reader { return t.c.reader(t.caps) }

// ours says whether an ongoing reassignment is this operation's: the journal lists it as
// submitted, and it goes to the planned replicas.
func ours(e *journal.Entry) func(model.TopicPartition, []int32) bool {
	return func(tp model.TopicPartition, to []int32) bool {
		if !e.Submitted(tp) {
			return false
		}
		for _, ch := range e.Changes {
			if ch.TopicPartition == tp {
				return sameSet(to, ch.ReplicasAfter)
			}
		}
		return false
	}
}

func (t *rfTask) plan(ctx context.Context) (*model.Snapshot, plan.Plan, error) {
	snap, err := t.rd().Snapshot(ctx) // every topic: balance is cluster-wide
	if err != nil {
		return nil, plan.Plan{}, transient(err)
	}
	p, err := plan.ReplicationFactor(snap, t.req)
	return snap, p, err
}

func (t *rfTask) start(ctx context.Context, x *exec) error {
	if err := waitForeign(ctx, t.rd(), t.h.cfg.RF.ForeignWait, nil, t.log); err != nil {
		return err
	}
	snap, p, err := planUntilUnblocked(ctx, 0, t.plan, t.log)
	if err != nil {
		return err
	}
	planned(x.res, snap, p, 0)
	if len(p.Changes) == 0 {
		settle(x.res, 0)
		return nil
	}
	if err := x.begin(ctx, journal.Entry{Changes: p.Changes, Deadline: time.Now().Add(t.timeout).UTC()}); err != nil {
		return err
	}
	return t.resume(ctx, x)
}

// timeoutError ends an operation that outlived its timeout (across attempts). Permanent.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("timeout after %s", e.d) }

// rfState is where each planned partition stands, from a fresh read.
type rfState struct {
	done    []plan.Change // at the target replicas
	running []plan.Change // our reassignment to the target is in progress
	waiting []plan.Change // still at the replicas before: to submit
	skips   []plan.Skip   // changed by someone else since the plan
}

func (s rfState) pending() []plan.Change { return append(slices.Clone(s.running), s.waiting...) }

func classify(snap *model.Snapshot, e *journal.Entry) rfState {
	var s rfState
	mine := ours(e)
	for _, ch := range e.Changes {
		p, ok := snap.Partition(ch.TopicPartition)
		switch {
		case !ok:
			s.skips = append(s.skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: "the partition no longer exists"})
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

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// resume carries the journaled change out from wherever it stands: it adopts our
// reassignments still running, submits the rest batch by batch, restores the throttles and
// verifies. When its context ends it returns at once, writing nothing: the caller decides
// (timeout: roll back; shutdown or lost lock: leave it for the next holder).
func (t *rfTask) resume(ctx context.Context, x *exec) error {
	e := &x.op.Entry
	res := x.res
	res.Noop, res.Skipped = e.Noop, slices.Clone(e.Skipped)
	ctx, cancel := context.WithDeadlineCause(ctx, e.Deadline, &timeoutError{t.timeout})
	defer cancel()

	snap, err := t.rd().Snapshot(ctx, t.req.Topic)
	if err != nil {
		return stopped(ctx, transient(err))
	}
	st := classify(snap, e)
	res.Skipped = append(res.Skipped, st.skips...)
	pending := st.pending()
	if len(st.running) > 0 {
		t.log.Info("adopting reassignments of an earlier attempt", zap.Strings("partitions", tpsOf(st.running)))
	}
	if err := t.throttle(ctx, x, pending); err != nil {
		return stopped(ctx, err)
	}
	batches := batchMoves(pending, t.h.cfg.RF.MaxMovesPerBroker)
	adm := kadm.NewClient(t.c.Client)
	expected := expectedBytes(ctx, adm, t.req.Topic, e.Changes)
	done := len(st.done)
	for bi, batch := range batches {
		var submit []plan.Change
		for _, ch := range batch {
			if !slices.ContainsFunc(st.running, func(r plan.Change) bool { return r.TopicPartition == ch.TopicPartition }) {
				submit = append(submit, ch)
			}
		}
		if len(submit) > 0 {
			if err := waitForeign(ctx, t.rd(), t.h.cfg.RF.ForeignWait, ours(e), t.log); err != nil {
				return stopped(ctx, err)
			}
			for _, ch := range submit {
				if !e.Submitted(ch.TopicPartition) {
					e.Reassignments = append(e.Reassignments, ch.TopicPartition)
				}
			}
			if err := x.save(ctx, journal.StepCopying); err != nil {
				return stopped(ctx, err)
			}
			if err := t.submit(ctx, x, submit); err != nil {
				return stopped(ctx, fmt.Errorf("submit batch %d of %d: %w", bi+1, len(batches), err))
			}
		}
		x.hook(StepCopying)
		for {
			waiting, err := pendingMoves(ctx, t.rd(), batch)
			if err == nil && len(waiting) == 0 {
				break
			}
			x.job.Progress(Progress{ID: x.job.Event.ID, Batch: bi + 1, Batches: len(batches), PartitionsDone: done + len(batch) - len(waiting),
				PartitionsTotal: len(e.Changes), BytesExpected: expected, BytesCopied: copiedBytes(ctx, adm, t.req.Topic, e.Changes)})
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(t.h.cfg.RF.Poll):
			}
		}
		done += len(batch)
	}
	if err := t.restore(ctx, x); err != nil {
		return stopped(ctx, err)
	}
	skipped := skippedOf(st.skips)
	now, err := observe(ctx, t.rd(), e.Changes, 30*time.Second, skipped, false)
	if err != nil {
		return stopped(ctx, err)
	}
	res.Changes = changedFrom(e.Changes, now, false)
	copied := addedBytes(ctx, adm, t.req.Topic, res.Changes)
	for i := range res.Changes {
		res.Changes[i].Bytes = copied[res.Changes[i].TopicPartition]
	}
	verified := 0
	for _, ch := range e.Changes {
		p, ok := now[ch.TopicPartition]
		if ok && shows(p, ch, false) {
			verified++
			continue
		}
		if skipped[ch.TopicPartition] {
			continue
		}
		res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified, Reason: fmt.Sprintf("after the change: replicas %v (wanted %v)", p.Replicas, ch.ReplicasAfter)})
	}
	settle(res, verified)
	return nil
}

// stopped prefers the context's cause (timeout, lost lock, shutdown) to the error of the
// request it interrupted.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func skippedOf(skips []plan.Skip) map[model.TopicPartition]bool {
	m := map[model.TopicPartition]bool{}
	for _, s := range skips {
		m[s.TopicPartition] = true
	}
	return m
}

// throttle sets the replication throttle of the moves still to copy (see setThrottles).
func (t *rfTask) throttle(ctx context.Context, x *exec, pending []plan.Change) error {
	return x.setThrottles(ctx, t.h.cfg.RF.ThrottleSettle, t.rate > 0, func(th kafka.Throttler) ([]kafka.ThrottleKey, error) {
		spec := kafka.ThrottleSpec{Topic: t.req.Topic, Rate: t.rate, Leaders: map[int32][]int32{}, Followers: map[int32][]int32{}}
		for _, ch := range pending {
			if added := minus(ch.ReplicasAfter, ch.ReplicasBefore); len(added) > 0 {
				spec.Followers[ch.Partition] = added
				spec.Leaders[ch.Partition] = slices.Clone(ch.ReplicasBefore)
			}
		}
		if len(spec.Followers) == 0 {
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
func (t *rfTask) restore(ctx context.Context, x *exec) error {
	return x.restoreThrottles(ctx, "while the copy ran")
}

// setThrottles sets the operation's throttle keys. A fresh operation (none journaled yet)
// that wants a throttle plans them with planKeys (none: nothing to set) and journals the
// keys and the values they hold before setting any; a resumed one applies the journaled
// keys again, idempotently, and never takes our own values for someone else's. After a
// fresh set it waits settle, so that the brokers put the throttles in force before
// anything copies.
func (x *exec) setThrottles(ctx context.Context, settle time.Duration, want bool, planKeys func(kafka.Throttler) ([]kafka.ThrottleKey, error)) error {
	e := &x.op.Entry
	fresh := e.Throttles == nil
	if fresh && !want {
		return nil
	}
	th, err := x.throttler(ctx)
	if err != nil {
		return err
	}
	if fresh {
		keys, err := planKeys(th)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		e.Throttles = keys
		if err := x.save(ctx, journal.StepThrottling); err != nil {
			return err
		}
	}
	kept, err := th.ApplyThrottles(ctx, e.Throttles)
	if err != nil {
		return throttleErr(fmt.Errorf("set throttles: %w", err))
	}
	if fresh {
		x.h.cfg.Metrics.ThrottlesSet(x.l.c.Name, len(e.Throttles)-len(kept))
	}
	if keepThrottles(x, kept, "before we set it") {
		if err := x.op.Save(ctx); err != nil {
			return err
		}
	}
	if fresh && settle > 0 {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(settle):
		}
	}
	x.hook(StepThrottled)
	return nil
}

// restoreThrottles puts back the throttles the operation set, where they still hold our
// value (when names the time a change by someone else happened, for the note).
func (x *exec) restoreThrottles(ctx context.Context, when string) error {
	e := &x.op.Entry
	if len(e.Throttles) == 0 {
		return nil
	}
	th, err := x.throttler(ctx)
	if err != nil {
		return err
	}
	kept, err := th.RestoreThrottles(ctx, e.Throttles)
	if err != nil {
		return throttleErr(fmt.Errorf("restore throttles: %w", err))
	}
	x.h.cfg.Metrics.ThrottlesRestored(x.l.c.Name, len(e.Throttles)-len(kept), len(kept))
	keepThrottles(x, kept, when)
	e.Throttles = nil
	return x.op.Save(ctx)
}

// throttler is how the cluster's throttles are read and written, chosen for each step from
// what the cluster has now (kafka.ChooseConfigs): its config znodes when the worker has the
// cluster's ZooKeeper and /controller names no KRaft controller (the writes fenced by the
// lease), else IncrementalAlterConfigs.
func (x *exec) throttler(ctx context.Context) (kafka.Throttler, error) {
	c := x.l.c
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return kafka.Throttler{}, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	zk, err := zkConfigs(ctx, c)
	if err != nil {
		return kafka.Throttler{}, err
	}
	mech, err := kafka.ChooseConfigs(caps, zk)
	if err != nil {
		return kafka.Throttler{}, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	th := kafka.Throttler{Client: c.Client, Mechanism: mech}
	if mech == kafka.ConfigZnodes {
		w, err := x.l.zkWriter()
		if err != nil {
			return kafka.Throttler{}, err
		}
		th.ZK, th.Chroot, th.Writer = c.ZK.Conn(), c.Chroot, w
	}
	return th, nil
}

// zkConfigs reports whether the cluster's throttles can go through its config znodes: the
// worker has its ZooKeeper, and no KRaft controller owns it (a migration: it would ignore
// them, and the brokers take their configs from it).
func zkConfigs(ctx context.Context, c *Cluster) (bool, error) {
	if c.ZK == nil {
		return false, nil
	}
	ctrl, err := kafka.WaitController(ctx, c.ZK.Conn(), c.Chroot)
	if err != nil {
		return false, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	return !ctrl.KRaft(), nil
}

// throttleErr marks a throttle failure transient, unless no retry can help: a broker that
// hides a value, a KRaft controller, a mechanism the cluster lacks.
func throttleErr(err error) error {
	if errors.Is(err, kafka.ErrHiddenConfig) || errors.Is(err, kafka.ErrKRaftController) || errors.Is(err, kafka.ErrUnsupported) {
		return err
	}
	return transient(err)
}

// keepThrottles records throttle keys found holding someone else's value (left alone) and
// reports whether there were any.
func keepThrottles(x *exec, kept []kafka.KeptThrottle, when string) bool {
	e := &x.op.Entry
	for _, k := range kept {
		if slices.ContainsFunc(e.ThrottlesKept, func(o kafka.KeptThrottle) bool {
			return o.Entity == k.Entity && o.Name == k.Name && o.Key == k.Key
		}) {
			continue
		}
		e.ThrottlesKept = append(e.ThrottlesKept, k)
		cur := "unset"
		if k.Current != nil {
			cur = strconv.Quote(*k.Current)
		}
		x.op.Note(fmt.Sprintf("Throttle %s of %s %s was changed by someone else %s (now %s, ours %q): left as they set it.", k.Key, k.Entity, k.Name, when, cur, k.Ours))
	}
	return len(kept) > 0
}

// submit starts the reassignments of a batch.
func (t *rfTask) submit(ctx context.Context, x *exec, batch []plan.Change) error {
	targets := map[model.TopicPartition][]int32{}
	for _, ch := range batch {
		targets[ch.TopicPartition] = ch.ReplicasAfter
	}
	if t.strategy == kafka.StrategyZKReassign {
		if t.c.ZK == nil {
			return errors.New("strategy zk-reassign needs the cluster's zookeeper")
		}
		w, err := x.l.zkWriter()
		if err != nil {
			return err
		}
		return kafka.SubmitZKReassignment(ctx, t.c.ZK.Conn(), t.c.Chroot, w, targets)
	}
	return kafka.SubmitReassignment(ctx, t.c.Client, targets)
}

// rollback cancels our reassignments still running (the replica sets go back), restores
// the throttles, and says what finished. A cluster that cannot cancel (Kafka before 2.4:
// no KIP-455; asked again now, a rolling upgrade may have come since the event began)
// leaves them running to their end: the entry is kept, at StepAwaiting, with the throttles
// they need, and awaitDetached restores those once they have ended.
func (t *rfTask) rollback(ctx context.Context, x *exec) (string, error) {
	e := &x.op.Entry
	caps, err := kafka.Probe(ctx, t.c.Client)
	if err != nil {
		return "", transient(fmt.Errorf("cluster %s: %w", t.c.Name, err))
	}
	t.caps = caps
	snap, err := t.rd().Snapshot(ctx, t.req.Topic)
	if err != nil {
		return "", transient(err)
	}
	st := classify(snap, e)
	var parts []string
	if len(st.running) > 0 && !caps.AlterPartitionAssignment {
		parts = append(parts, fmt.Sprintf("%d reassignments still running, which Kafka before 2.4 cannot cancel (%s): they run to their end; "+
			"the throttles stay until then, and are restored then", len(st.running), strings.Join(tpsOf(st.running), ", ")),
			fmt.Sprintf("%d of %d partitions finished", len(st.done), len(e.Changes)))
		e.Step = journal.StepAwaiting
		if err := x.op.Save(ctx); err != nil {
			return strings.Join(parts, "; "), err
		}
		changes, err := report(ctx, t.rd(), st.done, false)
		if err != nil {
			return strings.Join(parts, "; "), err
		}
		x.res.Changes = changes
		return strings.Join(parts, "; "), nil
	}
	if len(st.running) > 0 {
		if err := cancelMoves(ctx, t.c, st.running); err != nil {
			return "", fmt.Errorf("cancel %d unfinished reassignments: %w", len(st.running), err)
		}
		parts = append(parts, fmt.Sprintf("cancelled %d unfinished reassignments (%s)", len(st.running), strings.Join(tpsOf(st.running), ", ")))
	}
	parts = append(parts, fmt.Sprintf("%d of %d partitions finished", len(st.done), len(e.Changes)))
	if err := t.restore(ctx, x); err != nil {
		return strings.Join(parts, "; "), err
	}
	changes, err := report(ctx, t.rd(), e.Changes, false)
	if err != nil {
		return strings.Join(parts, "; "), err
	}
	x.res.Changes = changes
	return strings.Join(parts, "; "), nil
}

// awaitDetached finishes an operation that a final failure left at StepAwaiting (its result
// is published): it waits, the lock held, until the reassignments it left running have
// ended (no longer in /admin/reassign_partitions), however long they take — on a cluster
// that cannot cancel them, no other reassignment could run meanwhile anyway — then puts
// its throttles back (compare-and-restore). The caller deletes the entry. It returns
// early, writing nothing, when ctx ends (shutdown, lost lock): the next holder of the lock
// calls it again.
func (t *rfTask) awaitDetached(ctx context.Context, x *exec) error {
	e := &x.op.Entry
	var last []string
	for {
		snap, err := t.rd().Snapshot(ctx, t.req.Topic)
		if err == nil {
			st := classify(snap, e)
			if len(st.running) == 0 {
				break
			}
			if now := tpsOf(st.running); !slices.Equal(now, last) {
				x.log.Info("waiting for our reassignments, which this cluster cannot cancel, to end before restoring the throttles",
					zap.Strings("partitions", now), zap.Int("throttles", len(e.Throttles)))
				last = now
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(t.h.cfg.RF.Poll):
		}
	}
	if err := t.restore(ctx, x); err != nil {
		return err
	}
	for _, n := range e.Notes {
		x.log.Info("after the result", zap.String("note", n))
	}
	x.log.Info("reassignments ended; throttles restored", zap.String("event", e.Event))
	return nil
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
		return 0, reject("topic %q does not exist", topic)
	}
	if err != nil {
		return 0, transient(fmt.Errorf("describe configs of %s: %w", topic, err))
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "min.insync.replicas" && cfg.Value != nil {
			return strconv.Atoi(*cfg.Value)
		}
	}
	return 1, nil
}

// waitForeign waits until no reassignment runs on the cluster but ours (those ours
// reports, from the journal), backing off, for at most wait; then it fails with the list
// of those still running. It lists them through the API (Kafka 2.4+) or, before, from
// /admin/reassign_partitions.
func waitForeign(ctx context.Context, rd kafka.Reader, wait time.Duration, ours func(model.TopicPartition, []int32) bool, log *zap.Logger) error {
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

// batchMoves splits the changes into batches in which no broker receives more than max
// new replicas; trims (nothing to copy) all go in the first batch.
func batchMoves(changes []plan.Change, max int) [][]plan.Change {
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
		added := minus(ch.ReplicasAfter, ch.ReplicasBefore)
		full := false
		for _, b := range added {
			if load[b] >= max {
				full = true
			}
		}
		if full {
			batches = append(batches, current)
			current, load = nil, map[int32]int{}
		}
		current = append(current, ch)
		for _, b := range added {
			load[b]++
		}
	}
	if len(current) > 0 {
		batches = append(batches, current)
	}
	return batches
}

// pendingMoves lists the batch's partitions not yet at their target replicas, or still
// being reassigned: before Kafka 2.4, still listed in /admin/reassign_partitions (the
// metadata shows the target replicas from the start).
func pendingMoves(ctx context.Context, rd kafka.Reader, batch []plan.Change) ([]plan.Change, error) {
	snap, err := rd.Snapshot(ctx, topicsOf(batch)...)
	if err != nil {
		return batch, err
	}
	var out []plan.Change
	for _, ch := range batch {
		p, ok := snap.Partition(ch.TopicPartition)
		if !ok || !shows(p, ch, false) {
			out = append(out, ch)
		}
	}
	return out, nil
}

// cancelMoves cancels the reassignments of the pending partitions (KIP-455: the replica
// set goes back to what it was).
func cancelMoves(ctx context.Context, c *Cluster, pending []plan.Change) error {
	if len(pending) == 0 {
		return nil
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, ch := range pending {
		req.CancelAssign(ch.Topic, ch.Partition)
	}
	resp, err := kadm.NewClient(c.Client).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return transient(err)
	}
	var errs []error
	resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil && !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, r.Err))
		}
	})
	return errors.Join(errs...)
}

func tpsOf(l []plan.Change) []string {
	out := make([]string, len(l))
	for i, ch := range l {
		out[i] = ch.TopicPartition.String()
	}
	return out
}

// expectedBytes is what the new replicas must copy: the leader replica's size, once per
// added replica (best effort: 0 when log dirs cannot be described).
func expectedBytes(ctx context.Context, adm *kadm.Client, topic string, changes []plan.Change) int64 {
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(topic, changes))
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
func copiedBytes(ctx context.Context, adm *kadm.Client, topic string, changes []plan.Change) int64 {
	var total int64
	for _, n := range addedBytes(ctx, adm, topic, changes) {
		total += n
	}
	return total
}

// addedBytes is the size of each change's added replicas (future and current logs), by
// partition; best effort: empty when log dirs cannot be described.
func addedBytes(ctx context.Context, adm *kadm.Client, topic string, changes []plan.Change) map[model.TopicPartition]int64 {
	out := map[model.TopicPartition]int64{}
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(topic, changes))
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

func moving(topic string, changes []plan.Change) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for _, ch := range changes {
		s.Add(topic, ch.Partition)
	}
	return s
}
