package handlers

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
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

// logDirTask moves replicas between the log directories (disks) of one broker with
// AlterReplicaLogDirs: the broker copies each replica into a future replica in the target
// directory and swaps it in when it has caught up. The broker's
// replica.alter.log.dirs.io.max.bytes.per.second throttles the copy; it is journaled and
// put back by compare-and-restore. A balance moves replicas of one source directory only.
// On a final failure (the timeout) moves still copying are cancelled (an AlterReplicaLogDirs
// back to the current directory drops the future replica); moves that finished stay.
type logDirTask struct {
	h       *Handlers
	c       *Cluster
	req     plan.LogDirRequest
	timeout time.Duration
	rate    int64
	log     *zap.Logger
}

func (h *Handlers) newLogDir(ctx context.Context, c *Cluster, req *events.LogDirMove, res *events.Result, log *zap.Logger) (operation.Task, error) {
	o := h.cfg.LogDir
	t := &logDirTask{h: h, c: c, log: log, timeout: h.logDirTimeout(req), rate: h.logDirRate(req),
		req: plan.LogDirRequest{Broker: *req.Broker, From: req.FromDir, To: req.ToDir, Tolerance: *o.Tolerance, Protected: h.protected()}}
	res.Strategy = string(kafka.StrategyAPI) // AlterReplicaLogDirs is the only way online
	if req.Topic != "" {
		t.req.Replica = &model.TopicPartition{Topic: req.Topic, Partition: *req.Partition}
	}
	if t.rate > 0 {
		caps, err := h.capabilities(ctx, c)
		if err != nil {
			return nil, err
		}
		if err := throttleable(c, caps, t.rate); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// logDirRate is the throttle of a move: the event's, else the configured default.
func (h *Handlers) logDirRate(req *events.LogDirMove) int64 {
	if req.ThrottleBytesPerSec > 0 {
		return req.ThrottleBytesPerSec
	}
	return h.cfg.LogDir.ThrottleBytesPerSec
}

// logDirTimeout bounds a move across attempts: the event's, else the configured default.
func (h *Handlers) logDirTimeout(req *events.LogDirMove) time.Duration {
	if req.Timeout.Duration > 0 {
		return req.Timeout.Duration
	}
	return h.cfg.LogDir.Timeout
}

// describeDirs reads the broker's log directories, fresh (the request goes to the broker).
func describeDirs(ctx context.Context, c *Cluster, broker int32) ([]plan.LogDir, error) {
	ds, err := kadm.NewClient(c.Client).DescribeBrokerLogDirs(ctx, broker, nil)
	if err != nil {
		return nil, transient(fmt.Errorf("describe the log directories of broker %d: %w", broker, err))
	}
	var out []plan.LogDir
	for _, d := range ds.Sorted() {
		ld := plan.LogDir{Path: d.Dir}
		if d.Err != nil {
			ld.Err = d.Err.Error()
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			ld.Replicas = append(ld.Replicas, plan.LogDirReplica{TopicPartition: model.TopicPartition{Topic: p.Topic, Partition: p.Partition},
				Size: p.Size, Future: p.IsFuture})
		})
		out = append(out, ld)
	}
	return out, nil
}

// resolveDir maps a directory as an event names it to the broker's spelling of it ("/a/"
// is "/a"); unknown directories stay as given, for the planner to reject.
func resolveDir(dirs []plan.LogDir, dir string) string {
	if dir == "" {
		return ""
	}
	for _, d := range dirs {
		if path.Clean(d.Path) == path.Clean(dir) {
			return d.Path
		}
	}
	return dir
}

// Plan reads the broker's log directories and plans the moves: the replica named, or a
// balance of two directories.
func (t *logDirTask) Plan(ctx context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	var topics []string
	if t.req.Replica != nil {
		topics = []string{t.req.Replica.Topic}
	}
	snap, err := readNamed(ctx, t.c, newFreshReader(kafka.Reader{Client: t.c.Client}, r.Floor(), t.h.cfg.VerifyTimeout, r.Log), topics, topics...)
	if err != nil {
		return nil, err
	}
	b := t.req.Broker
	if _, ok := snap.Brokers[b]; !ok {
		return nil, operation.Reject("broker %d is not up: the cluster's metadata does not list it (live brokers: %s)", b, brokerList(snap))
	}
	if t.req.Replica != nil {
		tp := *t.req.Replica
		if err := snap.Missing[tp.Topic]; errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, operation.Reject("topic %q does not exist", tp.Topic)
		} else if err != nil {
			return nil, transient(fmt.Errorf("topic %q: %w", tp.Topic, err))
		}
		p, ok := snap.Partition(tp)
		if !ok {
			return nil, operation.Reject("topic %q has no partition %d", tp.Topic, tp.Partition)
		}
		if !slices.Contains(p.Replicas, b) {
			return nil, operation.Reject("%s has no replica on broker %d (its replicas: %v)", tp, b, p.Replicas)
		}
	}
	dirs, err := describeDirs(ctx, t.c, b)
	if err != nil {
		return nil, err
	}
	req := t.req
	req.From, req.To = resolveDir(dirs, req.From), resolveDir(dirs, req.To)
	lp, err := plan.LogDirMoves(dirs, req)
	if err != nil {
		return nil, err
	}
	for i := range lp.Changes {
		ch := &lp.Changes[i]
		if p, ok := snap.Partition(ch.TopicPartition); ok {
			ch.ReplicasBefore, ch.ReplicasAfter = slices.Clone(p.Replicas), slices.Clone(p.Replicas)
			ch.LeaderBefore, ch.LeaderAfter = p.Leader, p.Leader
		}
	}
	return &operation.Planned{Changes: lp.Changes, Noop: lp.Noop, Skipped: lp.Skipped, Deadline: time.Now().Add(t.timeout).UTC(),
		Notes: []string{summarize(b, lp, req.Replica != nil)}}, nil
}

// summarize says in words what a plan found.
func summarize(broker int32, lp plan.LogDirPlan, explicit bool) string {
	var moved int64
	for _, ch := range lp.Changes {
		moved += ch.Bytes
	}
	sizes := fmt.Sprintf("%s holds %s and %s holds %s", lp.From, bytesString(lp.FromBytes), lp.To, bytesString(lp.ToBytes))
	protected := 0
	for _, s := range lp.Skipped {
		if s.Code == plan.SkipProtected {
			protected++
		}
	}
	switch {
	case explicit && len(lp.Changes) == 0:
		return fmt.Sprintf("The replica is in %s of broker %d already.", lp.To, broker)
	case explicit:
		return fmt.Sprintf("Broker %d: %s; moving %s (%s) to %s.", broker, sizes, lp.Changes[0].TopicPartition, bytesString(moved), lp.To)
	case len(lp.Changes) == 0 && lp.Reached:
		return fmt.Sprintf("Broker %d: %s: within the tolerance (a difference of %s allowed), nothing to move.", broker, sizes, bytesString(lp.Allowed))
	case len(lp.Changes) == 0 && protected > 0:
		return fmt.Sprintf("Broker %d: %s, more apart than the tolerance allows (%s); the %d replicas that would balance them are of protected topics (guardrails.protected_topics), and no other replica there brings them closer.",
			broker, sizes, bytesString(lp.Allowed), protected)
	case len(lp.Changes) == 0:
		return fmt.Sprintf("Broker %d: %s, more apart than the tolerance allows (%s), but every replica there is larger than the imbalance: moving any would make it worse.", broker, sizes, bytesString(lp.Allowed))
	}
	s := fmt.Sprintf("Broker %d: %s; moving %d replicas (%s) leaves %s and %s", broker, sizes, len(lp.Changes), bytesString(moved),
		bytesString(lp.FromBytesAfter), bytesString(lp.ToBytesAfter))
	if lp.Reached {
		s += fmt.Sprintf(", within the tolerance (%s).", bytesString(lp.Allowed))
	} else {
		s += fmt.Sprintf(": no set of replicas reaches the tolerance (%s); this is the closest.", bytesString(lp.Allowed))
	}
	if protected > 0 {
		s += fmt.Sprintf(" %d replicas of protected topics (guardrails.protected_topics) that the balance would have moved stay.", protected)
	}
	return s
}

func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func brokerList(snap *model.Snapshot) string {
	var ids []int
	for id := range snap.Brokers {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	return strings.Trim(fmt.Sprint(ids), "[]")
}

// dirState is where each planned move stands, from a fresh DescribeLogDirs.
type dirState struct {
	done    []plan.Change // in the target directory, no future replica
	running []plan.Change // a future replica in the target directory is copying
	waiting []plan.Change // still in the source directory: to submit
	skips   []plan.Skip
	copied  int64 // bytes in the target directory so far (future replicas and done moves)
}

func classifyDirs(dirs []plan.LogDir, e *journal.Entry) dirState {
	type where struct {
		cur, fut string
		futSize  int64
		curSize  int64
	}
	at := map[model.TopicPartition]*where{}
	offline := map[string]bool{}
	for _, d := range dirs {
		if d.Err != "" {
			offline[d.Path] = true
		}
		for _, r := range d.Replicas {
			w := at[r.TopicPartition]
			if w == nil {
				w = &where{}
				at[r.TopicPartition] = w
			}
			if r.Future {
				w.fut, w.futSize = d.Path, r.Size
			} else {
				w.cur, w.curSize = d.Path, r.Size
			}
		}
	}
	var s dirState
	for _, ch := range e.Changes {
		w := at[ch.TopicPartition]
		if w == nil {
			w = &where{}
		}
		skip := func(format string, args ...any) {
			s.skips = append(s.skips, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case w.cur == ch.DirAfter && w.fut == "":
			s.done = append(s.done, ch)
			s.copied += w.curSize
		case offline[ch.DirAfter]:
			skip("the target directory %s went offline", ch.DirAfter)
		case w.cur == "":
			skip("the replica is no longer on broker %d (removed, or its directory went offline)", *ch.Broker)
		case w.fut != "" && w.fut != ch.DirAfter:
			skip("someone else is moving it to %s since the plan", w.fut)
		case w.cur != ch.DirBefore && w.cur != ch.DirAfter:
			skip("moved by someone else to %s since the plan", w.cur)
		case w.fut == ch.DirAfter:
			s.running = append(s.running, ch)
			s.copied += w.futSize
		default: // in the source directory, nothing copying
			s.waiting = append(s.waiting, ch)
		}
	}
	return s
}

func (t *logDirTask) read(ctx context.Context, e *journal.Entry) (dirState, error) {
	dirs, err := describeDirs(ctx, t.c, *e.Changes[0].Broker)
	if err != nil {
		return dirState{}, err
	}
	return classifyDirs(dirs, e), nil
}

// Apply carries the journaled moves out from wherever they stand: moves copying are
// adopted, the rest submitted (again, if the broker dropped one), and the throttle
// restored once nothing copies. When its context ends it returns at once, writing nothing.
func (t *logDirTask) Apply(ctx context.Context, r *operation.Run) error {
	e := r.Entry()
	ctx, cancel := context.WithDeadlineCause(ctx, e.Deadline, &timeoutError{t.timeout})
	defer cancel()
	broker := *e.Changes[0].Broker

	st, err := t.read(ctx, e)
	if err != nil {
		return stopped(ctx, err)
	}
	if len(st.running) > 0 {
		t.log.Info("adopting log-dir moves of an earlier attempt", zap.Strings("partitions", tpsOf(st.running)))
	}
	if len(st.running)+len(st.waiting) > 0 {
		if err := t.throttle(ctx, r, broker); err != nil {
			return stopped(ctx, err)
		}
	}
	expected := expectedMove(e)
	if len(st.waiting) > 0 {
		// A move adds disk load to a broker: not while the cluster is hurting.
		progress := events.Progress{Batch: 1, Batches: 1, PartitionsDone: len(st.done), PartitionsTotal: len(e.Changes), BytesExpected: expected}
		if _, err := (&pacer{c: t.c}).pace(ctx, r, t.log, 1, 1, st.waiting, progress, t.h.cfg.CopyPoll, nil); err != nil {
			return stopped(ctx, err)
		}
	}
	stepped := false
	for i := 0; ; i++ {
		if len(st.waiting) > 0 {
			for _, ch := range st.waiting {
				if !e.Submitted(ch.TopicPartition) {
					e.Reassignments = append(e.Reassignments, ch.TopicPartition)
				}
			}
			if err := r.Save(ctx, journal.StepCopying); err != nil {
				return stopped(ctx, err)
			}
			if err := t.submit(ctx, broker, st.waiting, func(ch plan.Change) string { return ch.DirAfter }); err != nil {
				return stopped(ctx, err)
			}
		}
		if !stepped {
			r.Step(operation.StepCopying)
			stepped = true
		}
		if len(st.running)+len(st.waiting) == 0 {
			break
		}
		r.Progress(events.Progress{Batch: 1, Batches: 1, PartitionsDone: len(st.done),
			PartitionsTotal: len(e.Changes), BytesExpected: expected, BytesCopied: st.copied})
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(min(20*time.Millisecond<<min(i, 10), t.h.cfg.CopyPoll)):
		}
		next, err := t.read(ctx, e)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			t.log.Info("reading the log directories failed; trying again", zap.Error(err))
			continue
		}
		st = next
	}
	return stopped(ctx, t.restore(ctx, r))
}

// Verify reads the broker's log directories afresh: every move must show done.
func (t *logDirTask) Verify(ctx context.Context, r *operation.Run) (int, error) {
	e, res := r.Entry(), r.Result
	final, err := t.read(ctx, e)
	if err != nil {
		return 0, err
	}
	res.Noop, res.Skipped = e.Noop, append(slices.Clone(e.Skipped), final.skips...)
	res.Changes = final.done
	for _, ch := range append(final.running, final.waiting...) {
		res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified,
			Reason: fmt.Sprintf("after the move: not shown in %s", ch.DirAfter)})
	}
	r.Progress(events.Progress{Batch: 1, Batches: 1, PartitionsDone: len(final.done),
		PartitionsTotal: len(e.Changes), BytesExpected: expectedMove(e), BytesCopied: final.copied})
	return len(final.done), nil
}

// expectedMove is the size of the planned moves.
func expectedMove(e *journal.Entry) int64 {
	var n int64
	for _, ch := range e.Changes {
		n += ch.Bytes
	}
	return n
}

// submit sends AlterReplicaLogDirs for the moves (to the directory dir gives), retrying
// what the broker answers REPLICA_NOT_AVAILABLE or another retriable error, for at most
// LogDirSubmitWait.
func (t *logDirTask) submit(ctx context.Context, broker int32, moves []plan.Change, dir func(plan.Change) string) error {
	adm := kadm.NewClient(t.c.Client)
	end := time.Now().Add(t.h.cfg.LogDirSubmitWait)
	delay := 500 * time.Millisecond
	left := moves
	for {
		req := kadm.AlterReplicaLogDirsReq{}
		for _, ch := range left {
			s := kadm.TopicsSet{}
			s.Add(ch.Topic, ch.Partition)
			req.Add(dir(ch), s)
		}
		resp, err := adm.AlterBrokerReplicaLogDirs(ctx, broker, req)
		if err != nil {
			return transient(fmt.Errorf("alter replica log dirs on broker %d: %w", broker, err))
		}
		var retry []plan.Change
		var errs []error
		for _, ch := range left {
			r, ok := resp[ch.Topic][ch.Partition]
			switch {
			case !ok:
				retry = append(retry, ch)
			case r.Err == nil:
			case errors.Is(r.Err, kerr.ReplicaNotAvailable) || kerr.IsRetriable(r.Err):
				retry = append(retry, ch)
			default:
				errs = append(errs, fmt.Errorf("%s to %s: %w", ch.TopicPartition, dir(ch), r.Err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if len(retry) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return transient(fmt.Errorf("broker %d kept answering REPLICA_NOT_AVAILABLE (or another retriable error) for %s", broker, strings.Join(tpsOf(retry), ", ")))
		}
		t.log.Info("broker not ready for the move; retrying", zap.Strings("partitions", tpsOf(retry)))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
		left = retry
	}
}

// throttle sets the broker's log-dir copy throttle (see throttles.set).
func (t *logDirTask) throttle(ctx context.Context, r *operation.Run, broker int32) error {
	return throttles{t.h, t.c}.set(ctx, r, t.h.cfg.RF.ThrottleSettle, t.rate > 0, func(th kafka.Throttler) ([]kafka.ThrottleKey, error) {
		keys, err := th.PlanBrokerThrottle(ctx, broker, kafka.AlterLogDirsThrottledRate, t.rate)
		if err != nil {
			return nil, throttleErr(fmt.Errorf("read throttles: %w", err))
		}
		return keys, nil
	})
}

func (t *logDirTask) restore(ctx context.Context, r *operation.Run) error {
	return throttles{t.h, t.c}.restore(ctx, r, "while the move ran")
}

// Rollback cancels our moves still copying (an AlterReplicaLogDirs back to the current
// directory drops the future replica), restores the throttle, and says what finished.
func (t *logDirTask) Rollback(ctx context.Context, r *operation.Run) (string, error) {
	e := r.Entry()
	broker := *e.Changes[0].Broker
	st, err := t.read(ctx, e)
	if err != nil {
		return "", err
	}
	var parts []string
	if len(st.running) > 0 {
		if err := t.submit(ctx, broker, st.running, func(ch plan.Change) string { return ch.DirBefore }); err != nil {
			return "", fmt.Errorf("cancel %d unfinished moves: %w", len(st.running), err)
		}
		if err := t.waitCancelled(ctx, e, st.running); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("cancelled %d unfinished moves (%s)", len(st.running), strings.Join(tpsOf(st.running), ", ")))
	}
	parts = append(parts, fmt.Sprintf("%d of %d moves finished", len(st.done), len(e.Changes)))
	if err := t.restore(ctx, r); err != nil {
		return strings.Join(parts, "; "), err
	}
	final, err := t.read(ctx, e)
	if err != nil {
		return strings.Join(parts, "; "), err
	}
	r.Result.Changes = final.done
	return strings.Join(parts, "; "), nil
}

// waitCancelled waits until the broker shows no future replica of the cancelled moves.
func (t *logDirTask) waitCancelled(ctx context.Context, e *journal.Entry, cancelled []plan.Change) error {
	for {
		st, err := t.read(ctx, e)
		if err == nil {
			left := 0
			for _, ch := range st.running {
				if slices.ContainsFunc(cancelled, func(c plan.Change) bool { return c.TopicPartition == ch.TopicPartition }) {
					left++
				}
			}
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cancelled moves still show a future replica: %w", context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}
