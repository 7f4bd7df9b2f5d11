package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// ErrBusy is wrapped by a Locker's error when someone else held the lock until it gave up.
var ErrBusy = retry.Transient(errors.New("lock busy"))

// Named steps of an operation, at which Config.Hook is called: fault tests stop or kill a
// worker there (the worker's KAFKAMENDER_PAUSE_AT names them).
const (
	StepJournalWritten  = "journal-written"  // the plan is journaled; no cluster write yet
	StepReordered       = "reordered"        // reorders done; elections not sent
	StepThrottled       = "throttled"        // throttles set; no reassignment submitted yet
	StepCopying         = "copying"          // a batch of reassignments is submitted and copying
	StepCopied          = "copied"           // every copy done; the leaders the plan moves not elected yet (broker-added)
	StepBeforeResult    = "before-result"    // the outcome is journaled as done; result not published
	StepResultPublished = "result-published" // the result is stored; the journal entry not closed
	// StepAwaitingReassignments: a final failure's result is published; the work it left
	// running (the cluster cannot cancel it) is being waited for, its throttles set.
	StepAwaitingReassignments = "awaiting-reassignments"
)

// Config configures an Engine. New copies it; the engine never changes it afterwards.
type Config struct {
	// Clusters are the clusters the engine serves; an event of another is rejected.
	Clusters []string
	Tasks    Tasks
	Journal  Journal
	Results  Results
	Locks    Locker
	Guard    Guard
	// Decode decodes a journaled request (Delivery.Request) again. Default: the pipeline's
	// message decoding, for Clusters.
	Decode  func(req json.RawMessage) (*events.Event, error)
	Logger  *zap.Logger
	Metrics *metrics.Metrics
	// Hook, when set, is called at the named steps (Step*). Nil in production.
	Hook func(step string)
	// Absorber, when set, answers the events that follow one of a cluster in bulk (an
	// alert storm): the engine is the pipeline's Absorber through it.
	Absorber pipeline.Absorber
	// Cancels, when set, says which events are cancelled (see cancel.go); CancelPoll is
	// how often a running operation asks (default DefaultCancelPoll).
	Cancels    Cancels
	CancelPoll time.Duration
	// Approval is the approval policy (see approval.go); Plans stores the plans that wait
	// (nil: none waits, and plan-approved / plan-denied are rejected).
	Approval approval.Policy
	Plans    Plans
}

// Engine carries out events' operations, one at a time per cluster (see the package doc).
// It is the pipeline's handler of every event type its tasks build.
type Engine struct {
	cfg Config
	log *zap.Logger
}

var (
	_ pipeline.Handler  = (*Engine)(nil)
	_ pipeline.Finisher = (*Engine)(nil)
	_ pipeline.Absorber = (*Engine)(nil)
	_ Delivery          = (*pipeline.Job)(nil)
)

// New checks cfg and completes it with defaults.
func New(cfg Config) (*Engine, error) {
	var missing []string
	for name, set := range map[string]bool{"Tasks": cfg.Tasks != nil, "Journal": cfg.Journal != nil, "Results": cfg.Results != nil,
		"Locks": cfg.Locks != nil, "Guard": cfg.Guard != nil} {
		if !set {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("operation: %v required", missing)
	}
	cfg.Clusters = slices.Clone(cfg.Clusters)
	cfg.Approval = cfg.Approval.Clone()
	if cfg.Decode == nil {
		opts := events.DecodeOptions{Clusters: cfg.Clusters}
		cfg.Decode = func(req json.RawMessage) (*events.Event, error) {
			var raw pipeline.RawEvent
			if err := json.Unmarshal(req, &raw); err != nil {
				return nil, fmt.Errorf("decode the journaled request: %w", err)
			}
			return raw.Decode(opts)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Hook == nil {
		cfg.Hook = func(string) {}
	}
	if cfg.CancelPoll <= 0 {
		cfg.CancelPoll = DefaultCancelPoll
	}
	return &Engine{cfg: cfg, log: cfg.Logger}, nil
}

// mode is why the engine takes a cluster's lock for a delivery.
type mode int

const (
	modeRun      mode = iota // run the event
	modeReplayed             // its result is stored: finish what its operation left
	modeAbandon              // give it up: roll back what its attempts left
)

// Handle implements pipeline.Handler.
func (e *Engine) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	return e.handle(ctx, job)
}

// Replayed implements pipeline.Finisher: after a replay, what the event's operation left
// is finished: an entry whose operation was over is closed; one that awaits work the
// cluster could not cancel is awaited, the lock held; one left half-done after its result
// was stored is rolled back. An error marked retry.InFlight: not now (the worker stops,
// the lock is lost), the event's next delivery does it.
func (e *Engine) Replayed(ctx context.Context, job *pipeline.Job) error { return e.replayed(ctx, job) }

// Absorber implements pipeline.Absorber through Config.Absorber (nil: none).
func (e *Engine) Absorber(ctx context.Context, done *events.Event, res *events.Result) (func(*events.Event, time.Time) *events.Result, error) {
	if e.cfg.Absorber == nil {
		return nil, nil
	}
	return e.cfg.Absorber.Absorber(ctx, done, res)
}

// Abandon implements pipeline.Finisher: an event given up on (delivered more often than
// allowed) has what its attempts left half-done rolled back under the lock, and its
// failed result, with the changes that remain, stored; an operation that was done gets
// its true result. Nil when nothing of the event was journaled.
func (e *Engine) Abandon(ctx context.Context, job *pipeline.Job, reason string) (*events.Result, error) {
	return e.abandon(ctx, job, reason)
}

func (e *Engine) handle(ctx context.Context, d Delivery) (res *events.Result, err error) {
	ev := d.Event()
	res = &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster}
	defer e.cfg.Metrics.Handling(ev.Cluster, ev.Type)()
	defer func() {
		if res != nil {
			e.cfg.Metrics.Operation(res)
		}
	}()
	if !slices.Contains(e.cfg.Clusters, ev.Cluster) {
		return answer(res, Reject("unknown cluster %q", ev.Cluster))
	}
	switch {
	case ev.Type == events.TypePlanApproved || ev.Type == events.TypePlanDenied:
		return e.decision(ctx, d, res)
	case ev.AsksApproval() && (e.cfg.Plans == nil || len(e.cfg.Approval.Approvers) == 0):
		return answer(res, Reject("data.approval: this worker has no approvers configured (approval.approvers): the plan could never be approved"))
	case ev.DryRun():
		return e.dryRun(ctx, ev, res)
	}
	// The guardrails first, without the lock: a source that may not send the event gets no
	// answer from the cool-down either. An event whose operation is journaled already (a
	// retry, a redelivery after a crash) began under the rules in force then, and some of
	// it may be written: it is let through, to be finished or rolled back as it began,
	// never refused half-done.
	if err := e.cfg.Guard.Refuses(ev); err != nil {
		rec, jerr := e.cfg.Journal.Get(ctx, ev.Cluster)
		if jerr != nil {
			return res, jerr
		}
		if rec == nil || !rec.Open() || rec.Event != ev.ID {
			return answer(res, err)
		}
		e.eventLog(ev).Warn("the event's operation is in the journal already: finishing it as it began, although a guardrail now refuses the event",
			zap.NamedError("guardrail", err))
	} else {
		out, err := e.cfg.Tasks.Answer(ctx, d)
		if out != nil || err != nil {
			if out != nil {
				res = out
			}
			return out, err
		}
	}
	return e.locked(ctx, d, res, modeRun, nil)
}

// dryRun answers a dry run: the plan, with nothing changed and no lock taken. A plan over
// the partition cap is rejected as the real run would be; the hourly cap is not consulted
// (a dry run writes nothing, so it does not count either).
func (e *Engine) dryRun(ctx context.Context, ev *events.Event, res *events.Result) (*events.Result, error) {
	if err := e.cfg.Guard.Refuses(ev); err != nil {
		return answer(res, err)
	}
	t, err := e.cfg.Tasks.New(ctx, ev, res)
	if err != nil {
		return answer(res, err)
	}
	p, err := t.Plan(ctx, &Run{Event: ev, Result: res, Log: e.eventLog(ev)}, true)
	if err == nil {
		err = e.cfg.Guard.Partitions(len(p.Changes))
	}
	if err != nil {
		return answer(res, err)
	}
	res.Status, res.Changes, res.Noop, res.Skipped = events.StatusPlanned, p.Changes, p.Noop, p.Skipped
	for _, n := range p.Notes {
		res.AddNote(n)
	}
	if e.approvalWanted(ev) && len(p.Changes) > 0 {
		if _, copied, err := e.survey(ctx, ev.Cluster, p.Changes, nil, true); err == nil {
			if why := e.cfg.Approval.Requires(ev.Cluster, ev.Type, ev.AsksApproval(), approval.SizeOf(p.Changes, copied)); why != "" {
				res.AddNote("run for real, this plan would wait for a person's approval: " + why)
			}
		}
	}
	return res, nil
}

func (e *Engine) eventLog(ev *events.Event) *zap.Logger {
	return e.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
}

func (e *Engine) replayed(ctx context.Context, d Delivery) error {
	ev := d.Event()
	if !slices.Contains(e.cfg.Clusters, ev.Cluster) {
		return nil
	}
	rec, err := e.cfg.Journal.Get(ctx, ev.Cluster)
	if err != nil {
		// What the event's operation left cannot be looked at now: its next delivery does
		// (the next lock holder may be a long time coming).
		return retry.InFlight(fmt.Errorf("read the journal of cluster %s after a replay: %w", ev.Cluster, err))
	}
	if rec == nil || !rec.Open() || rec.Event != ev.ID {
		return nil
	}
	log := e.eventLog(ev)
	if rec.Step == journal.StepDone {
		// Its holder stored the result and died before closing the entry: nobody needs
		// more of it, no lock is needed (the close is revision-checked).
		if err := e.cfg.Journal.Close(ctx, rec); err != nil {
			if err := e.closeDone(ctx, ev, err, log); err != nil {
				log.Info("close the journal entry after a replay: not now; the event's next delivery does", zap.Error(err))
				return retry.InFlight(err)
			}
		}
		return nil
	}
	_, err = e.locked(ctx, d, &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster}, modeReplayed, nil)
	if err != nil {
		log.Info("finish what the event's operation left after its result: not now; its next delivery does", zap.Error(err))
		return retry.InFlight(err)
	}
	return nil
}

func (e *Engine) abandon(ctx context.Context, d Delivery, reason string) (*events.Result, error) {
	ev := d.Event()
	if !slices.Contains(e.cfg.Clusters, ev.Cluster) {
		return nil, nil
	}
	rec, err := e.cfg.Journal.Get(ctx, ev.Cluster)
	if err != nil || rec == nil || !rec.Open() || rec.Event != ev.ID {
		return nil, err // nothing of this event's is journaled
	}
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Status: events.StatusFailed, Error: reason}
	return e.locked(ctx, d, res, modeAbandon, nil)
}

// session is a cluster's lock held for one delivery.
type session struct {
	cluster  string
	lease    Lease
	ctx      context.Context // the delivery's context, also ended when the lock is lost
	delivery context.Context // the delivery's context alone: ended when the worker stops
	stop     func()
}

func (s *session) alive() error { return s.lease.Err() }

func (s *session) release(log *zap.Logger) {
	s.stop()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.delivery), 10*time.Second)
	defer cancel()
	if err := s.lease.Release(ctx); err != nil {
		log.Warn("release lock", zap.Error(err))
	}
}

// acquire takes the cluster's lock for the delivery. While someone else holds it, it
// waits as long as the Locker does; when the holder is finishing this very event's
// operation (it took it over from the journal), it keeps waiting rather than failing as
// busy; when another worker stored the event's result meanwhile, it returns that result
// to replay, and no session.
func (e *Engine) acquire(ctx context.Context, d Delivery, log *zap.Logger) (*session, *events.Result, error) {
	ev := d.Event()
	waited := e.cfg.Metrics.WaitingForLock(ev.Cluster)
	defer waited()
	for {
		lease, err := e.cfg.Locks.Acquire(ctx, ev.Cluster, ev.ID)
		if err == nil {
			waited()
			lctx, cancel := context.WithCancelCause(ctx)
			stop := context.AfterFunc(lease.Context(), func() { cancel(context.Cause(lease.Context())) })
			return &session{cluster: ev.Cluster, lease: lease, ctx: lctx, delivery: ctx, stop: func() { stop(); cancel(nil) }}, nil, nil
		}
		if !errors.Is(err, ErrBusy) {
			return nil, nil, fmt.Errorf("lock cluster %s: %w", ev.Cluster, err)
		}
		if earlier, ok, e2 := e.cfg.Results.Earlier(ctx, ev.ID); e2 == nil && ok {
			earlier.Replayed = true
			return nil, earlier, nil
		}
		rec, e2 := e.cfg.Journal.Get(ctx, ev.Cluster)
		if e2 != nil || rec == nil || !rec.Open() || rec.Event != ev.ID {
			return nil, nil, fmt.Errorf("lock cluster %s: %w", ev.Cluster, err)
		}
		log.Info("the lock holder is finishing this event's operation; waiting for it", zap.String("holder", rec.Worker))
	}
}

// locked runs the delivery under the cluster's lock: it resolves the cluster's journal
// entry, whatever it is, until this event's turn comes (Decide), then runs the event:
// run, when set, instead of a fresh run (an approval's).
func (e *Engine) locked(ctx context.Context, d Delivery, res *events.Result, m mode,
	run func(s *session, prev *journal.Record) (*events.Result, error)) (*events.Result, error) {
	ev := d.Event()
	log := e.eventLog(ev)
	phase(log, "locking")
	// The fresh plan's first read starts beside the lock and the journal read (Prefetcher);
	// nil once discarded.
	var pre Prefetch
	if pf, ok := e.cfg.Tasks.(Prefetcher); ok && m == modeRun && run == nil {
		pre = pf.Prefetch(ctx, ev)
	}
	discard := func() {
		if pre != nil {
			pre.Discard()
			pre = nil
		}
	}
	defer func() { discard() }()
	locking := time.Now()
	s, replay, err := e.acquire(ctx, d, log)
	if err != nil {
		return res, err
	}
	if replay != nil {
		if m != modeRun {
			return replay, nil
		}
		log.Info("event already handled; replaying its result", zap.String("status", string(replay.Status)))
		return replay, nil
	}
	defer s.release(log)
	defer e.cfg.Metrics.OperationStarted(ev.Cluster, time.Now())() // an orphan's first included
	phase(log, "locked")
	if time.Since(locking) > prefetchLockWait {
		// The lock was busy (or slow): the read is older than this turn; the plan reads.
		discard()
	}
	for {
		rec, err := e.cfg.Journal.Get(s.ctx, ev.Cluster)
		if err != nil {
			return res, err
		}
		phase(log, "journal read")
		f := Facts{Held: s.alive() == nil, Stopping: ctx.Err() != nil, Final: d.LastAttempt(), Rebuilt: true}
		var orphan *events.Event
		if rec != nil {
			f.Step, f.Ours = rec.Step, rec.Event == ev.ID
			f.Abandoning = f.Ours && m == modeAbandon
			switch {
			case f.Ours:
				f.Stored = m == modeReplayed
				if !f.Stored && (rec.Open() || m == modeRun) {
					_, f.Stored, err = e.cfg.Results.Earlier(s.ctx, ev.ID)
				}
			case rec.Open():
				_, f.Stored, err = e.cfg.Results.Earlier(s.ctx, rec.Event)
				if err == nil {
					orphan, f.Rebuilt = e.decode(rec, log)
				}
			}
			if err != nil {
				return res, err
			}
		} else if m == modeReplayed {
			f.Ours, f.Stored = true, true
		}
		act := Decide(f)
		if rec != nil && rec.Open() {
			log.Debug("journal", zap.String("entry_of", rec.Event), zap.String("step", string(rec.Step)), zap.Stringer("decision", act))
		}
		if act == Fresh && m == modeRun && !f.Ours {
			// The pipeline looked for the event's result before this delivery waited (held
			// while its cluster's pause could not be read, or for the lock): meanwhile
			// another delivery of the event (its message given to another worker after
			// the ack wait, or a copy of it) may have run it, and newer events after it.
			// Run again now, it would put the cluster back as this event asked, unreported
			// and out of order. Asked again under the lock, of the results stream's leader.
			_, stored, err := e.cfg.Results.Earlier(s.ctx, ev.ID)
			if err != nil {
				return res, err
			}
			if stored {
				log.Info("another delivery of this event ran it while this one waited; replaying its result")
				act = Replay
			}
		}
		switch {
		case act == Leave:
			return res, e.left(s, rec, f.Ours)
		case m != modeRun && (act == Fresh || act == Replay || !f.Ours):
			if act == Replay && m == modeAbandon {
				return e.replay(s, ev)
			}
			return nil, nil // nothing (more) of this event's is journaled
		case act == Replay:
			return e.replay(s, ev)
		case act == Fresh && run != nil:
			return run(s, rec)
		case act == Fresh:
			return e.fresh(s, d, res, rec, pre, log)
		case act == Close:
			if err := e.cfg.Journal.Close(s.ctx, rec); err != nil {
				return res, err
			}
			continue
		case f.Ours:
			return e.carry(s, d, rec, act, res, log)
		}
		// Another event's orphan: resolve it as its own delivery would, then decide again.
		// What was read before may be older than what resolving it writes.
		discard()
		if err := e.resolve(s, d, rec, orphan, act, log); err != nil {
			return res, fmt.Errorf("resolve the operation of event %s left in the journal by worker %s: %w", rec.Event, rec.Worker, err)
		}
	}
}

// replay returns the event's stored result, marked replayed.
func (e *Engine) replay(s *session, ev *events.Event) (*events.Result, error) {
	earlier, ok, err := e.cfg.Results.Earlier(s.ctx, ev.ID)
	if err != nil || !ok {
		return nil, retry.Transient(fmt.Errorf("replay the stored result of %s: found %v, %v", ev.ID, ok, err))
	}
	earlier.Replayed = true
	return earlier, nil
}

// left is the error of a delivery that leaves the journal as it is: the lock is lost (or
// the worker stopping) under an open entry of ours, which the next delivery finishes.
func (e *Engine) left(s *session, rec *journal.Record, ours bool) error {
	err := s.alive()
	if err == nil {
		err = context.Cause(s.ctx)
	}
	if err == nil {
		err = errors.New("the lock is not held")
	}
	if rec != nil && rec.Open() && ours {
		return retry.InFlight(err)
	}
	return retry.Transient(err)
}

// decode decodes an orphan's request; false when it no longer decodes (its operation is
// then verified or rolled back from the entry alone).
func (e *Engine) decode(rec *journal.Record, log *zap.Logger) (*events.Event, bool) {
	ev, err := e.cfg.Decode(rec.Request)
	if err != nil {
		log.Warn("the request of an operation left in the journal does not decode; it can only be rolled back from its entry",
			zap.String("orphan", rec.Event), zap.Error(err))
		return nil, false
	}
	if ev.ID != rec.Event || ev.Cluster != rec.Cluster {
		log.Warn("the journaled request is not the entry's event; it can only be rolled back from its entry",
			zap.String("orphan", rec.Event), zap.String("request_of", ev.ID))
		return nil, false
	}
	return ev, true
}

// fresh runs the event afresh: nothing is in hand on the cluster (prev is its closed entry,
// or nil).
func (e *Engine) fresh(s *session, d Delivery, res *events.Result, prev *journal.Record, pre Prefetch, log *zap.Logger) (*events.Result, error) {
	ev := d.Event()
	ctx := s.ctx
	if why := e.cancelled(ctx, ev); why != "" {
		res.Status, res.Error = events.StatusCancelled, "cancelled before it ran, nothing changed: "+why
		log.Info("event cancelled before it ran", zap.String("why", why))
		return res, nil
	}
	if err := e.cfg.Guard.Refuses(ev); err != nil {
		return answer(res, err)
	}
	wanted := e.approvalWanted(ev)
	if wanted {
		if out, err := e.waiting(ctx, ev); out != nil || err != nil {
			return out, err // its plan is stored already
		}
	}
	t, err := e.cfg.Tasks.New(ctx, ev, res)
	if err != nil {
		return answer(res, err)
	}
	r := &Run{Event: ev, Result: res, Log: log, lease: s.lease, ctx: ctx, deliv: d, hook: e.cfg.Hook, final: d.LastAttempt(), pre: pre}
	if prev != nil {
		r.floor = prev.Left
	}
	p, err := t.Plan(ctx, r, false)
	if err != nil {
		return answer(res, err)
	}
	phase(log, "planned")
	if res.Status != "" {
		return res, nil // answered by the plan
	}
	res.Noop, res.Skipped = p.Noop, p.Skipped
	if len(p.Changes) == 0 {
		for _, n := range p.Notes {
			res.AddNote(n)
		}
		Conclude(res, 0)
		return res, nil
	}
	if wanted {
		out, waits, err := e.propose(r, d, p)
		if err != nil {
			return answer(res, err)
		}
		if waits {
			return out, nil
		}
	}
	if err := e.begin(r, d, p, prev); err != nil {
		if IsRejection(err) {
			res.Changes, res.Noop, res.Skipped = nil, nil, nil
		}
		return answer(res, err)
	}
	return e.complete(r, t, e.applyCancellable(ctx, r, t))
}

// begin journals a fresh operation: from here on it can be finished or rolled back by
// whoever holds the lock next. Before that, nothing being written yet, the guardrails of
// the plan and what storage can hold: a plan that changes more partitions than allowed is
// refused whole, as is one whose entry or result could not be stored (journal.CheckFits);
// then the operation is counted toward the cluster's operations per hour (or refused over
// it).
func (e *Engine) begin(r *Run, d Delivery, p *Planned, prev *journal.Record) error {
	ctx, ev := r.ctx, r.Event
	if err := e.cfg.Guard.Partitions(len(p.Changes)); err != nil {
		return err
	}
	req, err := d.Request()
	if err != nil {
		return err
	}
	entry := journal.Entry{Event: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Request: req, Worker: d.Worker(), Attempt: d.Attempt(),
		Strategy: r.Result.Strategy, Step: journal.StepPlanned, Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop,
		Deadline: p.Deadline, Notes: p.Notes, Floor: r.floor}
	if err := journal.CheckFits(&entry); err != nil {
		return err // a rejection: what cannot be stored is refused before anything is written
	}
	if err := e.cfg.Guard.Count(ctx, r.Alive, ev); err != nil {
		return err
	}
	op, err := e.cfg.Journal.Begin(ctx, r.Alive, prev, entry)
	if err != nil {
		return err
	}
	r.Op = op
	phase(r.Log, "journaled")
	r.Step(StepJournalWritten)
	return nil
}

// carry takes the journaled operation rec over (the event's own from an earlier attempt,
// or an orphan's for d) and does act with it.
func (e *Engine) carry(s *session, d Delivery, rec *journal.Record, act Action, res *events.Result, log *zap.Logger) (*events.Result, error) {
	ctx := s.ctx
	ev := d.Event()
	t, err := e.cfg.Tasks.Resume(ctx, ev, &rec.Entry, res)
	if err != nil {
		return res, err
	}
	log.Info("carrying on the journaled operation", zap.Stringer("action", act), zap.String("step", string(rec.Step)),
		zap.String("by", rec.Worker), zap.Int("its_attempt", rec.Attempt))
	why := res.Error // an abandoned event's reason
	if act == Resume || act == Verify {
		res.Status, res.Error = "", ""
	}
	if act == Resume {
		if c := e.cancelled(ctx, ev); c != "" {
			log.Warn("the journaled operation is cancelled: rolling it back instead of carrying it on", zap.String("why", c))
			act, why, res.Status = RollBack, (&cancelledError{why: c}).Error(), events.StatusCancelled
		}
	}
	op, err := e.cfg.Journal.TakeOver(ctx, s.alive, rec, d.Worker(), d.Attempt())
	if err != nil {
		return res, err
	}
	if res.Strategy == "" {
		res.Strategy = rec.Strategy
	}
	if res.PlanID == "" {
		res.PlanID = rec.PlanID
	}
	r := &Run{Event: ev, Result: res, Op: op, Log: log, lease: s.lease, ctx: ctx, deliv: d, hook: e.cfg.Hook, final: d.LastAttempt()}
	switch act {
	case Resume:
		return e.complete(r, t, e.applyCancellable(ctx, r, t))
	case Verify:
		return e.complete(r, t, nil)
	case RollBack:
		if why == "" {
			why = fmt.Sprintf("rolled back after attempt %d (its rollback had not finished)", rec.Attempt)
		}
		return e.rollBack(r, t, why)
	case Await:
		if err := e.await(r, t); err != nil {
			return res, err
		}
		return nil, nil
	case Clean:
		return nil, e.clean(r, t)
	}
	return res, fmt.Errorf("the journaled operation of event %s: no way to %s it", rec.Event, act)
}

// resolve resolves another event's orphan (rec, whose holder is gone: this delivery holds
// the lock) as its own delivery would, publishing its result once, under this delivery.
func (e *Engine) resolve(s *session, d Delivery, rec *journal.Record, ev *events.Event, act Action, log *zap.Logger) error {
	if ev == nil { // it no longer decodes: its identity, and no payload
		ev = &events.Event{Envelope: events.Envelope{ID: rec.Event, Type: rec.Type}, Cluster: rec.Cluster}
	}
	xlog := e.eventLog(ev).With(zap.String("taken_over_by", d.Event().ID))
	log.Info("resolving the operation of an event whose worker is gone", zap.String("orphan", rec.Event), zap.Stringer("action", act))
	if act == Resume || act == Verify || act == RollBack {
		e.cfg.Metrics.Takeover()
	}
	od := &orphan{parent: d, ev: ev, req: rec.Request, attempt: rec.Attempt + 1, results: e.cfg.Results}
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, StartedAt: time.Now()}
	out, err := e.carry(s, od, rec, act, res, xlog)
	if err != nil {
		return err
	}
	if out != nil {
		e.cfg.Metrics.Operation(out)
	}
	return nil
}

// complete ends a run whose apply returned applyErr: it verifies and publishes, or, on a
// failure, leaves the operation for the next delivery or rolls it back (Decide).
func (e *Engine) complete(r *Run, t Task, applyErr error) (*events.Result, error) {
	err := applyErr
	verified := 0
	if err == nil {
		phase(r.Log, "applied")
		verified, err = t.Verify(r.ctx, r)
	}
	if err != nil {
		return e.failed(r, t, err)
	}
	phase(r.Log, "verified")
	Conclude(r.Result, verified)
	return e.publish(r, t, true)
}

// failed handles the failure of a journaled run (Decide): left for the next delivery, or
// rolled back.
func (e *Engine) failed(r *Run, t Task, err error) (*events.Result, error) {
	f := Facts{Step: r.Entry().Step, Ours: true, Held: r.Alive() == nil, Stopping: r.stopping(), Final: r.final, Rebuilt: true,
		Failed: failure(err)}
	if Decide(f) == Leave {
		switch {
		case !f.Held:
			r.Log.Warn("lock lost: stopping without another write; the next holder resumes from the journal", zap.Error(err))
			err = fmt.Errorf("%w (lock: %v)", err, r.Alive())
		case f.Stopping:
			r.Log.Info("worker stopping: leaving the operation in flight for the next holder", zap.Error(err))
		default:
			r.Log.Info("operation interrupted; its next delivery resumes it from the journal", zap.Error(err))
		}
		return r.Result, retry.InFlight(err)
	}
	why := err.Error()
	if f.Failed == FailedTransient {
		why = fmt.Sprintf("gave up after %d attempts: %v", r.Op.Entry.Attempt, err)
	}
	switch {
	case IsRejection(err):
		r.Result.Status = events.StatusRejected
	case IsCancelled(err):
		r.Result.Status = events.StatusCancelled
	}
	return e.rollBack(r, t, why)
}

// rollBack undoes what is half-done of r's operation and publishes its failed result
// (why, and what the rollback did) with the changes that remain.
func (e *Engine) rollBack(r *Run, t Task, why string) (*events.Result, error) {
	res := r.Result
	if res.Status != events.StatusRejected && res.Status != events.StatusCancelled {
		res.Status = events.StatusFailed
	}
	ctx, cancel := r.Cleanup()
	defer cancel()
	summary, err := e.undo(ctx, r, t)
	closeIt := true
	if err != nil {
		if r.Alive() != nil || failure(err) == FailedTransient && !r.final {
			return res, retry.InFlight(fmt.Errorf("%s; rollback: %w", why, err))
		}
		// Said in the result, and the entry stays open: the next holder of the lock rolls
		// back again what is left (Clean), before its own event.
		summary = joinNotes(summary, "rollback failed: "+err.Error())
		closeIt = false
	}
	res.Error = joinNotes(why, summary)
	if res.Status == events.StatusCancelled {
		res.AddNote(cancelledNote(r.Entry().Changes, res.Changes))
	}
	return e.publish(r, t, closeIt)
}

// cancelledNote says each planned partition's end state after a cancel: those that keep
// their change (listed in the result's changes) and those back as before the event.
func cancelledNote(planned, remaining []events.Change) string {
	kept := map[string]bool{}
	for _, c := range remaining {
		kept[changeKey(c)] = true
	}
	var back []string
	for _, c := range planned {
		if !kept[changeKey(c)] {
			back = append(back, c.TopicPartition.String())
		}
	}
	switch {
	case len(back) == 0:
		return fmt.Sprintf("cancelled after every planned change was made: the %d in changes keep their new state", len(remaining))
	case len(remaining) == 0:
		return fmt.Sprintf("cancelled: every planned partition (%d) is as before the event", len(back))
	}
	const most = 50
	list := strings.Join(back[:min(len(back), most)], ", ")
	if len(back) > most {
		list += fmt.Sprintf(" and %d more", len(back)-most)
	}
	return fmt.Sprintf("cancelled: %d finished partitions keep their new state (changes); %d are as before the event: %s", len(remaining), len(back), list)
}

// changeKey names a change's partition (and broker, for a log-dir move).
func changeKey(c events.Change) string {
	k := c.TopicPartition.String()
	if c.Broker != nil {
		k += fmt.Sprintf("@%d", *c.Broker)
	}
	return k
}

// undo rolls r's operation back, the step recorded first.
func (e *Engine) undo(ctx context.Context, r *Run, t Task) (string, error) {
	if r.Entry().Step != journal.StepAwaiting {
		if err := r.Save(ctx, journal.StepRollingBack); err != nil {
			return "", err
		}
	}
	return t.Rollback(ctx, r)
}

// clean rolls back what an operation whose result is stored left half-done, and closes its
// entry: no result.
func (e *Engine) clean(r *Run, t Task) error {
	r.Log.Warn("its result is stored but its holder gave up before finishing: rolling back what it left", zap.String("step", string(r.Entry().Step)))
	ctx, cancel := r.Cleanup()
	defer cancel()
	summary, err := e.undo(ctx, r, t)
	if err != nil {
		f := Facts{Step: r.Entry().Step, Ours: true, Stored: true, Held: r.Alive() == nil, Stopping: r.stopping(), Final: r.final,
			Rebuilt: true, Failed: failure(err)}
		if Decide(f) == Leave {
			return err
		}
		r.Log.Error("rolling back what the operation left failed for good; closing its entry so that the cluster's events go on: check the cluster for what it names",
			zap.Error(err), zap.Any("throttles", r.Entry().Throttles), zap.Any("reassignments", r.Entry().Reassignments))
	}
	r.Log.Info("rolled back", zap.String("summary", summary))
	if r.Entry().Step == journal.StepAwaiting {
		return e.await(r, t)
	}
	return r.Op.Close(ctx)
}

// publish stores the result of a journaled operation while the lock is held, then closes
// the journal entry (unless closeIt is false: what is left is for the next holder). An
// entry at StepAwaiting (work left running that the cluster cannot cancel) is closed only
// once that work ended and its throttles are back: this worker waits for that after the
// result, the lock held; if it stops or loses the lock first, the event is delivered
// again, and that delivery waits (Replayed).
func (e *Engine) publish(r *Run, t Task, closeIt bool) (*events.Result, error) {
	ctx, cancel := r.Cleanup()
	defer cancel()
	entry, res := r.Entry(), r.Result
	for _, n := range entry.Notes {
		res.AddNote(n)
	}
	res.ThrottlesKept = entry.ThrottlesKept
	if entry.Nudge != nil && entry.Nudge.FailoverStarted {
		res.ControllerFailover = true
	}
	awaiting := entry.Step == journal.StepAwaiting
	if !awaiting && closeIt {
		if err := r.Save(ctx, journal.StepDone); err != nil {
			return res, retry.InFlight(err)
		}
	}
	r.Step(StepBeforeResult)
	stored, published, err := r.deliv.Publish(ctx, res)
	if err != nil {
		return res, retry.InFlight(fmt.Errorf("publish the result: %w", err))
	}
	if !published {
		r.Log.Info("a result was stored already for this event; keeping it", zap.String("status", string(stored.Status)))
	}
	phase(r.Log, "published")
	r.Step(StepResultPublished)
	switch {
	case awaiting:
		if err := e.await(r, t); err != nil {
			r.Log.Info("stopped waiting for the work the operation left running; the event's next delivery waits for it and restores the throttles", zap.Error(err))
			return stored, retry.InFlight(err)
		}
	case closeIt:
		if err := r.Op.Close(ctx); err != nil {
			if err := e.closeDone(ctx, r.Event, err, r.Log); err != nil {
				// The result is stored: the event's next delivery replays it and closes
				// the entry (Replayed). Left to the next holder, an entry could stay open
				// as long as the cluster has no event that takes the lock (an alert
				// storm's noops never do).
				r.Log.Warn("close the journal entry: not now; the event's next delivery does", zap.Error(err))
				return stored, retry.InFlight(err)
			}
		}
		phase(r.Log, "closed")
	}
	return stored, nil
}

// closeDone closes ev's journal entry, at step done with its result stored, after a close
// failed with first: the entry is read again and closed again, until it reads closed (or
// another event's: someone else resolved it) or ctx ends. A NATS node stopping as the
// close is written may have stored the write and lost its acknowledgement (the entry then
// reads closed) or not stored it (it is written again).
func (e *Engine) closeDone(ctx context.Context, ev *events.Event, first error, log *zap.Logger) error {
	log.Info("close the journal entry failed; reading it again", zap.Error(first))
	return retry.Do(ctx, CleanupTimeout, func() error {
		rec, err := e.cfg.Journal.Get(ctx, ev.Cluster)
		switch {
		case err != nil:
			return retry.Transient(err)
		case rec == nil || !rec.Open() || rec.Event != ev.ID:
			return nil
		case rec.Step != journal.StepDone:
			return fmt.Errorf("journal of cluster %s: event %s's entry is at step %s again: its next delivery resolves it", ev.Cluster, ev.ID, rec.Step)
		}
		if err := e.cfg.Journal.Close(ctx, rec); err != nil {
			return retry.Transient(err)
		}
		return nil
	}, nil)
}

// await lets the task finish what its operation left running past its result, then closes
// the entry.
func (e *Engine) await(r *Run, t Task) error {
	dt, ok := t.(Detacher)
	if !ok {
		return fmt.Errorf("journal entry of event %s is at step %s, which %s operations never reach", r.Entry().Event, journal.StepAwaiting, r.Entry().Type)
	}
	r.Step(StepAwaitingReassignments)
	if err := dt.AwaitDetached(r.ctx, r); err != nil {
		return err
	}
	ctx, cancel := r.Cleanup()
	defer cancel()
	return r.Op.Close(ctx)
}

// phase logs (debug) that an operation reached a phase: where an event's time goes, read
// with the timestamps (the benchmark's -trace puts them beside the Kafka requests).
// prefetchLockWait bounds the time the lock may take for the plan's prefetched read (made
// as the lock was asked for) to count as made under it: a lock taken at once means no
// operation of the fleet ran between the read and this turn, and the read is as new as one
// made after the lock but for the lock's own round trips (the plan holds it to Run.Floor
// all the same). A lock that was busy, or slow, sends the plan to read afresh.
const prefetchLockWait = 50 * time.Millisecond

func phase(log *zap.Logger, name string) { log.Debug("phase: " + name) }

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// orphan is the delivery of another event whose operation a delivery finishes: its result
// is stored under its own id, its progress published on its own subject, and the parent's
// message kept alive.
type orphan struct {
	parent  Delivery
	ev      *events.Event
	req     json.RawMessage
	attempt int
	results Results
}

func (o *orphan) Event() *events.Event              { return o.ev }
func (o *orphan) Request() (json.RawMessage, error) { return o.req, nil }
func (o *orphan) Attempt() int                      { return o.attempt }

// LastAttempt: the orphan was tried once per delivery of its finder; on the finder's last
// attempt it is final too, so that it never blocks the cluster's queue.
func (o *orphan) LastAttempt() bool           { return o.parent.LastAttempt() }
func (o *orphan) Worker() string              { return o.parent.Worker() }
func (o *orphan) Announce(res *events.Result) { o.parent.Announce(res) }
func (o *orphan) Progress(p events.Progress) {
	p.ID = o.ev.ID
	o.parent.Progress(p)
}

func (o *orphan) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if res.Worker == "" {
		res.Worker = o.parent.Worker()
	}
	if res.Attempt == 0 {
		res.Attempt = o.attempt
	}
	return o.results.Publish(ctx, res)
}
