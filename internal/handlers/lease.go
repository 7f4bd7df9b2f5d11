package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/retry"
)

func transient(err error) error { return retry.Transient(err) }

// cleanupTimeout bounds the writes of a rollback, a throttle restore and the publication of
// a result, which run after the operation's own context may have ended (a timeout).
const cleanupTimeout = 30 * time.Second

// lease is a cluster's lock held for one delivery: every cluster write is made under it.
type lease struct {
	c    *Cluster
	held locks.Lease
	// ctx is the delivery's context, also cancelled when the lock is lost.
	ctx      context.Context
	delivery context.Context // the delivery's context alone: done when the worker stops
	stop     func()
}

// zkWriter is the lease as the fence of ZooKeeper writes: only a ZooKeeper lock is one.
func (l *lease) zkWriter() (kafka.FencedWriter, error) {
	w, ok := l.held.(kafka.FencedWriter)
	if !ok {
		return nil, fmt.Errorf("cluster %s: ZooKeeper writes need the cluster's lock in ZooKeeper (lock backend zookeeper), which fences them", l.c.Name)
	}
	return w, nil
}

// alive is nil while the lock is held, else why it is not.
func (l *lease) alive() error { return l.held.Err() }

// lost reports whether the lock was lost (not merely released).
func (l *lease) lost() bool { return errors.Is(l.held.Err(), locks.ErrLost) }

// stopping reports whether the worker is stopping (the delivery's context ended).
func (l *lease) stopping() bool { return l.delivery.Err() != nil }

// writeCtx is for writes that must happen after the operation's context ended (a
// timeout's rollback, the result): it lives while the lock is held, at most d.
func (l *lease) writeCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(l.held.Context(), d)
}

func (l *lease) release(log *zap.Logger) {
	l.stop()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.delivery), 10*time.Second)
	defer cancel()
	if err := l.held.Release(ctx); err != nil {
		log.Warn("release lock", zap.Error(err))
	}
}

// acquire takes the cluster's lock for the job. When another worker finished the same
// event meanwhile, it returns that result to replay instead, and no lease, unless the
// journal entry of the event awaits reassignments it left running (StepAwaiting: its
// worker stopped during that wait): then the lease too, for the caller to finish that
// first. While the lock holder is finishing this very event's operation (it took it over
// from the journal), it keeps waiting rather than failing as busy: the result will come
// from there.
func (h *Handlers) acquire(ctx context.Context, c *Cluster, job *pipeline.Job, log *zap.Logger) (*lease, *events.Result, error) {
	var held locks.Lease
	waited := h.cfg.Metrics.WaitingForLock(c.Name)
	defer waited()
	for {
		var err error
		held, err = c.Locker.Acquire(ctx, c.Name, job.Event.ID)
		if err == nil {
			break
		}
		if !errors.Is(err, locks.ErrBusy) {
			return nil, nil, fmt.Errorf("lock cluster %s: %w", c.Name, err)
		}
		if earlier, ok, e := job.Earlier(ctx); e == nil && ok {
			earlier.Replayed = true
			return nil, earlier, nil
		}
		rec, e := h.openEntry(ctx, c.Name)
		if e != nil || rec == nil || rec.Event != job.Event.ID {
			return nil, nil, fmt.Errorf("lock cluster %s: %w", c.Name, err)
		}
		log.Info("the lock holder is finishing this event's operation; waiting for it", zap.String("holder", rec.Worker))
	}
	waited()
	lctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(held.Context(), func() { cancel(context.Cause(held.Context())) })
	l := &lease{c: c, held: held, ctx: lctx, delivery: ctx, stop: func() { stop(); cancel(nil) }}
	earlier, ok, err := job.Earlier(lctx)
	if err != nil || ok {
		if err == nil {
			earlier.Replayed = true
			if rec, e := h.openEntry(lctx, c.Name); e == nil && rec != nil && rec.Event == job.Event.ID && rec.Step == journal.StepAwaiting {
				return l, earlier, nil
			}
		}
		l.release(log)
		if err != nil {
			return nil, nil, err
		}
		return nil, earlier, nil
	}
	return l, nil, nil
}

// exec is one operation being carried out under the lock.
type exec struct {
	h   *Handlers
	l   *lease
	job *pipeline.Job
	t   task
	op  *journal.Op // nil until the operation is journaled
	res *events.Result
	log *zap.Logger
}

// begin journals a fresh operation: from here on it can be finished or rolled back by
// whoever holds the lock next. e's identity fields, and the partitions the result already
// lists as noop or skipped, are filled here.
//
// Before that, nothing being written yet, the guardrails of the plan: one that changes
// more partitions than guardrails.max_partitions_per_event is refused whole, and the
// operation is counted toward the cluster's guardrails.max_operations_per_hour (or refused
// over it). A refusal is a rejection: the result lists nothing changed, noop or skipped.
func (x *exec) begin(ctx context.Context, e journal.Entry) error {
	ev := x.job.Event
	err := x.h.guard.Partitions(len(e.Changes))
	if err == nil {
		err = x.h.ops.count(ctx, x.l.alive, ev.Cluster, ev.ID)
	}
	if err != nil {
		if isRejection(err) {
			x.res.Changes, x.res.Noop, x.res.Skipped = nil, nil, nil
		}
		return err
	}
	raw, err := json.Marshal(x.job.Raw)
	if err != nil {
		return err
	}
	e.Event, e.Type, e.Cluster, e.Request = ev.ID, ev.Type, ev.Cluster, raw
	e.Worker, e.Attempt = x.job.Worker, x.job.Attempt
	e.Strategy = x.res.Strategy
	e.Noop, e.Skipped = x.res.Noop, x.res.Skipped
	if e.Step == "" {
		e.Step = journal.StepPlanned
	}
	prev, err := x.h.cfg.Journal.Get(ctx, ev.Cluster)
	if err != nil {
		return err
	}
	op, err := x.h.cfg.Journal.Begin(ctx, x.l.alive, prev, e)
	if err != nil {
		return err
	}
	x.op = op
	x.hook(StepJournalWritten)
	return nil
}

// save records the step reached (and whatever else changed in x.op.Entry).
func (x *exec) save(ctx context.Context, step journal.Step) error {
	x.op.Entry.Step = step
	return x.op.Save(ctx)
}

func (x *exec) hook(step string) {
	x.log.Debug("step", zap.String("step", step))
	x.h.cfg.Hook(step)
}

// locked runs the event under the cluster's lock: resolve the journal, run (fresh or
// resumed), then finish (publish, delete the journal) or leave for a retry.
func (h *Handlers) locked(ctx context.Context, job *pipeline.Job, c *Cluster, t task, res *events.Result, log *zap.Logger) (*events.Result, error) {
	l, replay, err := h.acquire(ctx, c, job, log)
	if err != nil {
		return res, err
	}
	if replay != nil {
		if l != nil {
			// Its worker stopped while waiting for reassignments that the cluster cannot
			// cancel: wait for them here, and restore the throttles, before answering.
			if rec, err := h.openEntry(l.ctx, c.Name); err == nil && rec != nil && rec.Event == job.Event.ID {
				if err := h.takeOver(l, job, rec, log); err != nil {
					log.Warn("the reassignments it left outlive this worker's hold of the lock; the next holder restores the throttles", zap.Error(err))
				}
			}
			l.release(log)
		}
		log.Info("event already handled; replaying its result", zap.String("status", string(replay.Status)))
		return replay, nil
	}
	defer l.release(log)
	defer h.cfg.Metrics.OperationStarted(c.Name, time.Now())() // a takeover first included

	rec, err := h.openEntry(l.ctx, c.Name)
	if err != nil {
		return res, err
	}
	if rec != nil && rec.Event != job.Event.ID {
		if err := h.takeOver(l, job, rec, log); err != nil {
			return res, fmt.Errorf("resolve the operation of event %s left in the journal by worker %s: %w", rec.Event, rec.Worker, err)
		}
		rec = nil
	}
	res.StartedAt = time.Now()
	x := &exec{h: h, l: l, job: job, t: t, res: res, log: log}
	var runErr error
	if rec == nil {
		runErr = t.start(l.ctx, x)
	} else {
		log.Info("resuming the operation of an earlier attempt", zap.String("step", string(rec.Step)),
			zap.String("by", rec.Worker), zap.Int("attempt", rec.Attempt))
		x.op, runErr = h.cfg.Journal.TakeOver(l.ctx, l.alive, rec, job.Worker, job.Attempt)
		if runErr == nil {
			runErr = t.resume(l.ctx, x)
		}
	}
	return h.finish(x, runErr)
}

// finish ends a run: it leaves the journal for a retry (transient failure, lock lost,
// worker stopping), or rolls back what is half-done (final failure), then publishes the
// result under the lock and deletes the journal entry.
func (h *Handlers) finish(x *exec, runErr error) (*events.Result, error) {
	l, res, log := x.l, x.res, x.log
	if x.op == nil {
		// Nothing was journaled, so nothing was written: the pipeline publishes, retries
		// or reports.
		return asResult(res, runErr)
	}
	if runErr != nil {
		switch {
		case l.alive() != nil:
			log.Warn("lock lost: stopping without another write; the next holder resumes from the journal", zap.Error(runErr))
			return res, transient(fmt.Errorf("%w (lock: %v)", runErr, l.alive()))
		case l.stopping():
			log.Info("worker stopping: leaving the operation in flight for the next holder", zap.Error(runErr))
			return res, transient(runErr)
		case retry.IsTransient(runErr) && !x.job.LastAttempt:
			return res, runErr
		}
		// A final failure: put back what is half-done.
		why := runErr.Error()
		if retry.IsTransient(runErr) {
			why = fmt.Sprintf("gave up after %d attempts: %v", x.job.Attempt, runErr)
		}
		if isRejection(runErr) {
			res.Status = events.StatusRejected
		} else {
			res.Status = events.StatusFailed
		}
		ctx, cancel := l.writeCtx(cleanupTimeout)
		summary, err := x.rollbackAndReport(ctx)
		cancel()
		if err != nil {
			if l.alive() != nil || retry.IsTransient(err) && !x.job.LastAttempt {
				return res, transient(fmt.Errorf("%s; rollback: %w", why, err))
			}
			summary = strings.TrimPrefix(summary+"; rollback failed: "+err.Error(), "; ")
		}
		res.Error = why
		if summary != "" {
			res.Error += "; " + summary
		}
	}
	return x.publish()
}

// rollbackAndReport rolls back x.op; the task's rollback also reports, in x.res.Changes,
// the changes that remain.
func (x *exec) rollbackAndReport(ctx context.Context) (string, error) {
	if err := x.save(ctx, journal.StepRollingBack); err != nil {
		return "", err
	}
	return x.t.rollback(ctx, x)
}

// publish stores the result of a journaled operation while the lock is held, then deletes
// the journal entry. An entry at StepAwaiting (reassignments left running that the
// cluster cannot cancel) is deleted only once they have ended and the throttles are put
// back: this worker waits for that after the result, the lock held, so that nothing of
// ours is left; if it stops first, the next holder of the lock does it.
func (x *exec) publish() (*events.Result, error) {
	ctx, cancel := x.l.writeCtx(cleanupTimeout)
	defer cancel()
	e := &x.op.Entry
	for _, n := range e.Notes {
		x.res.AddNote(n)
	}
	x.res.ThrottlesKept = e.ThrottlesKept
	if e.Nudge != nil && e.Nudge.FailoverStarted {
		x.res.ControllerFailover = true
	}
	awaiting := e.Step == journal.StepAwaiting
	if !awaiting {
		if err := x.save(ctx, journal.StepDone); err != nil {
			return x.res, err
		}
	}
	x.hook(StepBeforeResult)
	stored, published, err := x.job.Publish(ctx, x.res)
	if err != nil {
		return x.res, transient(fmt.Errorf("publish the result: %w", err))
	}
	if !published {
		x.log.Info("a result was stored already for this event; keeping it", zap.String("status", string(stored.Status)))
	}
	x.hook(StepResultPublished)
	if awaiting {
		if err := x.awaitDetached(x.l.ctx); err != nil {
			x.log.Info("stopped waiting for the reassignments left running; the next holder of the lock restores the throttles once they end", zap.Error(err))
		}
		return stored, nil
	}
	if err := x.op.Close(ctx); err != nil {
		// The next holder finds the entry with the result stored and deletes it.
		x.log.Warn("delete the journal entry", zap.Error(err))
	}
	return stored, nil
}

// detachable is a task whose operation can outlive its result (StepAwaiting).
type detachable interface {
	awaitDetached(ctx context.Context, x *exec) error
}

// awaitDetached lets the task finish what it left running past its result, then deletes the
// journal entry.
func (x *exec) awaitDetached(ctx context.Context) error {
	d, ok := x.t.(detachable)
	if !ok {
		return fmt.Errorf("journal entry of event %s is at step %s, which %s operations never reach", x.op.Entry.Event, journal.StepAwaiting, x.op.Entry.Type)
	}
	x.hook(StepAwaitingReassignments)
	if err := d.awaitDetached(ctx, x); err != nil {
		return err
	}
	dctx, cancel := x.l.writeCtx(cleanupTimeout)
	defer cancel()
	return x.op.Close(dctx)
}

// takeOver resolves the journal entry rec of another event, left by a holder that is gone
// (this worker holds the lock): finished to its end and its result published, or, when
// its result was stored already, deleted (after rolling back what a holder that gave up
// left half-done).
func (h *Handlers) takeOver(l *lease, job *pipeline.Job, rec *journal.Record, log *zap.Logger) error {
	ctx := l.ctx
	log = log.With(zap.String("orphan", rec.Event), zap.String("orphan_type", rec.Type), zap.String("step", string(rec.Step)))
	var raw pipeline.RawEvent
	if err := json.Unmarshal(rec.Request, &raw); err != nil {
		return fmt.Errorf("decode its request: %w", err)
	}
	ev, err := raw.Decode(events.DecodeOptions{Clusters: h.clusters})
	if err != nil {
		return fmt.Errorf("decode its event: %w", err)
	}
	xjob := job.Adopt(ev, raw, rec.Attempt+1) // not its last attempt, whatever this delivery's is
	xres := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, StartedAt: time.Now()}
	xlog := h.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster), zap.String("taken_over_by", job.Event.ID))
	t, _, err := h.prepare(ctx, xjob, xres, xlog)
	if err != nil {
		return fmt.Errorf("this worker cannot carry it out (%w): an operator must resolve the journal entry", err)
	}
	earlier, done, err := job.Results.Earlier(ctx, ev.ID)
	if err != nil {
		return err
	}
	op, err := h.cfg.Journal.TakeOver(ctx, l.alive, rec, job.Worker, rec.Attempt+1)
	if err != nil {
		return err
	}
	x := &exec{h: h, l: l, job: xjob, t: t, op: op, res: xres, log: xlog}
	if done && rec.Step == journal.StepAwaiting {
		log.Info("its result is stored; it left reassignments running that the cluster cannot cancel: waiting for them to end, to restore its throttles")
		if err := x.awaitDetached(ctx); err != nil {
			return transient(fmt.Errorf("wait for its reassignments to end: %w", err))
		}
		return nil
	}
	if done {
		if rec.Step != journal.StepDone {
			log.Warn("its result is stored but its holder gave up before finishing: rolling back what it left", zap.String("status", string(earlier.Status)))
			summary, err := t.rollback(ctx, x)
			if err != nil {
				return fmt.Errorf("roll back: %w", err)
			}
			log.Info("rolled back", zap.String("summary", summary))
		}
		return op.Close(ctx)
	}
	log.Info("finishing the operation of an event whose worker is gone")
	h.cfg.Metrics.Takeover()
	out, err := h.finish(x, t.resume(ctx, x))
	if err != nil {
		return err
	}
	h.cfg.Metrics.Operation(out)
	return nil
}

var _ pipeline.Finisher = (*Handlers)(nil)

// Replayed implements pipeline.Finisher: after a replay, a journal entry of the event whose
// operation was over (its holder died after storing the result, before deleting the entry)
// is deleted; one that awaits reassignments its operation left running (its holder died
// during that wait, after storing the result) is finished under the lock: the wait, then
// the throttles put back, then the entry deleted.
func (h *Handlers) Replayed(ctx context.Context, job *pipeline.Job) {
	ev := job.Event
	c, ok := h.cfg.Clusters[ev.Cluster]
	if !ok {
		return
	}
	rec, err := h.openEntry(ctx, ev.Cluster)
	if err != nil || rec == nil || rec.Event != ev.ID {
		return
	}
	if rec.Step == journal.StepAwaiting {
		log := h.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
		l, _, err := h.acquire(ctx, c, job, log)
		if err != nil || l == nil {
			log.Info("finish the wait for the reassignments the event left running: not now", zap.Error(err))
			return
		}
		defer l.release(log)
		if rec, err = h.openEntry(l.ctx, c.Name); err == nil && rec != nil && rec.Event == ev.ID {
			if err := h.takeOver(l, job, rec, log); err != nil {
				log.Info("the reassignments the event left running outlive this worker's hold of the lock", zap.Error(err))
			}
		}
		return
	}
	if rec.Step != journal.StepDone {
		return
	}
	if err := h.cfg.Journal.Close(ctx, rec); err != nil {
		h.log.Info("tidy the journal after a replay", zap.String("id", ev.ID), zap.Error(err))
	}
}

// Abandon implements pipeline.Finisher: an event given up on (delivered more often than
// allowed) has what its attempts left half-done rolled back under the lock, as on any
// final failure, and its result, with the changes that remain, stored before its journal
// entry is deleted.
func (h *Handlers) Abandon(ctx context.Context, job *pipeline.Job, reason string) (*events.Result, error) {
	ev := job.Event
	c, ok := h.cfg.Clusters[ev.Cluster]
	if !ok {
		return nil, nil
	}
	rec, err := h.openEntry(ctx, c.Name)
	if err != nil || rec == nil || rec.Event != ev.ID {
		return nil, err // nothing of this event's was written
	}
	log := h.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Status: events.StatusFailed, Error: reason, StartedAt: time.Now()}
	t, _, err := h.prepare(ctx, job, res, log)
	if err != nil {
		return nil, err
	}
	l, replay, err := h.acquire(ctx, c, job, log)
	if err != nil || replay != nil {
		if l != nil {
			l.release(log) // the next delivery replays it and finishes what it awaits
		}
		return replay, err
	}
	defer l.release(log)
	defer h.cfg.Metrics.OperationStarted(c.Name, time.Now())()
	if rec, err = h.openEntry(l.ctx, c.Name); err != nil || rec == nil || rec.Event != ev.ID {
		return nil, err
	}
	op, err := h.cfg.Journal.TakeOver(l.ctx, l.alive, rec, job.Worker, job.Attempt)
	if err != nil {
		return nil, err
	}
	x := &exec{h: h, l: l, job: job, t: t, op: op, res: res, log: log}
	log.Warn("abandoning the event: rolling back what its attempts left", zap.String("step", string(rec.Step)))
	summary, err := x.rollbackAndReport(l.ctx)
	if err != nil {
		return nil, fmt.Errorf("roll back: %w", err)
	}
	if summary != "" {
		res.Error += "; " + summary
	}
	return x.publish()
}

// openEntry returns the cluster's open journal entry, nil when it has none (a closed one
// is what the last operation left).
func (h *Handlers) openEntry(ctx context.Context, cluster string) (*journal.Record, error) {
	rec, err := h.cfg.Journal.Get(ctx, cluster)
	if err != nil || rec == nil || !rec.Open() {
		return nil, err
	}
	return rec, nil
}
