package operation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// Approval. A fresh plan that the policy (Config.Approval) or the event itself
// (data.approval) wants a person to approve does not run: under the lock, the engine
// reads the fingerprint of the state it depends on (Surveyor), stores the plan with it
// (Config.Plans, durable), and answers the event with the interim result
// awaiting_approval (its message is done with). Then:
//
//   - plan-approved, from a source of approval.approvers, runs in the cluster's queue: under
//     the lock it marks the plan approved (once: a second approval is rejected), reads the
//     fingerprint again, and runs exactly the stored plan as the planned event (its journal
//     entry, its result under its id, after the interim result approved) if nothing differs;
//     else the event ends rejected, listing each difference, and nothing is changed;
//   - plan-denied ends the event denied;
//   - a plan not answered by its expiry ends its event expired (Sweep), and one whose event
//     was cancelled (operation-cancel) ends it cancelled.
//
// The approval's own result mirrors the planned event's; a crash after the approved plan
// was journaled leaves it to whoever takes the lock next, as any operation (its result
// goes under the planned event's id).

// DefaultSweep is how often Sweep is meant to run.
const DefaultSweep = 5 * time.Second

// approvalWanted reports whether fresh plans of ev are measured against the policy.
func (e *Engine) approvalWanted(ev *events.Event) bool {
	return e.cfg.Plans != nil && approval.Approvable(ev.Type) && e.cfg.Approval.Measures(ev.Cluster, ev.Type, ev.AsksApproval())
}

// waiting answers a delivery of an event that has a plan stored already (a redelivery, or
// a policy that changed): its interim result while it waits or runs, its final one once
// the plan was answered otherwise. Nil: no plan.
func (e *Engine) waiting(ctx context.Context, ev *events.Event) (*events.Result, error) {
	p, _, err := e.cfg.Plans.Get(ctx, ev.Cluster, approval.PlanID(ev.Cluster, ev.ID))
	switch {
	case errors.Is(err, approval.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	switch p.State {
	case approval.Awaiting:
		return p.Awaiting(), nil
	case approval.Approved:
		return approvedInterim(p), nil
	}
	return finalOf(p), nil
}

// survey reads the fingerprint of the state changes depend on (Surveyor).
func (e *Engine) survey(ctx context.Context, cluster string, changes []events.Change, floor []model.Seen, bytes bool) (approval.Fingerprint, int64, error) {
	sv, ok := e.cfg.Tasks.(Surveyor)
	if !ok {
		return approval.Fingerprint{}, 0, errors.New("approval: the tasks of this worker cannot read a plan's fingerprint")
	}
	return sv.Survey(ctx, cluster, changes, floor, bytes)
}

// propose stores the plan p of r's event for approval when it needs it: true, with the
// interim result, if so. Under the lock, before anything is journaled.
func (e *Engine) propose(r *Run, d Delivery, p *Planned) (*events.Result, bool, error) {
	ctx, ev, res := r.ctx, r.Event, r.Result
	fp, copied, err := e.survey(ctx, ev.Cluster, p.Changes, r.floor, true)
	if err != nil {
		return res, false, err
	}
	if diff := approval.Consistent(p.Changes, fp); len(diff) > 0 {
		return res, false, retry.Transient(fmt.Errorf("the cluster changed while the plan was made (%s); planning again", strings.Join(diff, "; ")))
	}
	size := approval.SizeOf(p.Changes, copied)
	why := e.cfg.Approval.Requires(ev.Cluster, ev.Type, ev.AsksApproval(), size)
	if why == "" {
		return res, false, nil
	}
	if err := e.cfg.Guard.Partitions(len(p.Changes)); err != nil {
		return res, false, err
	}
	req, err := d.Request()
	if err != nil {
		return res, false, err
	}
	entry := journal.Entry{Event: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Request: req, Changes: p.Changes, Skipped: p.Skipped,
		Noop: p.Noop, Notes: p.Notes}
	if err := journal.CheckFits(&entry); err != nil {
		return res, false, err
	}
	now := time.Now().UTC()
	plan := &approval.Plan{ID: approval.PlanID(ev.Cluster, ev.ID), Cluster: ev.Cluster, Event: ev.ID, Type: ev.Type, Source: ev.Source,
		Reason: res.Reason, Request: req, Strategy: res.Strategy, Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop, Notes: p.Notes,
		Floor: r.floor, Fingerprint: fp, Size: size, Why: why, PlannedBy: d.Worker(), CreatedAt: now,
		ExpiresAt: now.Add(e.cfg.Approval.ExpiryOrDefault()), State: approval.Awaiting}
	if !p.Deadline.IsZero() {
		plan.Timeout = max(p.Deadline.Sub(now), time.Second)
	}
	if _, err := approval.Encode(plan); err != nil {
		return res, false, Reject("%v", err)
	}
	stored, created, err := e.cfg.Plans.Create(ctx, plan)
	if err != nil {
		return res, false, err
	}
	if !created {
		r.Log.Info("the event's plan is stored already; answering with it", zap.String("plan_id", stored.ID), zap.String("state", string(stored.State)))
		out, err := e.waiting(ctx, ev)
		return out, true, err
	}
	r.Log.Info("plan waits for approval", zap.String("plan_id", plan.ID), zap.String("why", why), zap.Int("changes", len(plan.Changes)),
		zap.Int64("bytes", size.Bytes), zap.Time("expires_at", plan.ExpiresAt))
	return plan.Awaiting(), true, nil
}

// approvedInterim is the interim result of a plan's event once the plan is approved.
func approvedInterim(p *approval.Plan) *events.Result {
	res := &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Status: events.StatusApproved, Strategy: p.Strategy,
		StartedAt: p.CreatedAt, Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop, Reason: p.Reason, PlanID: p.ID, ExpiresAt: p.ExpiresAt}
	res.AddNote(fmt.Sprintf("plan %s %s: it runs now, if the cluster still matches it; the final result follows", p.ID, p.Decided()))
	return res
}

// finalOf is the final result of a plan's event for a plan answered without running:
// denied, expired, stale (the cluster changed), cancelled.
func finalOf(p *approval.Plan) *events.Result {
	res := &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Strategy: p.Strategy, Attempt: 1, Worker: p.PlannedBy,
		StartedAt: p.CreatedAt, FinishedAt: p.DecidedAt, Reason: p.Reason, PlanID: p.ID, Skipped: []events.Skip{}, Changes: []events.Change{}}
	switch p.State {
	case approval.Denied:
		res.Status = events.StatusDenied
		res.Error = fmt.Sprintf("plan %s %s, nothing changed", p.ID, p.Decided())
		if p.DecidedWhy != "" {
			res.Error += ": " + p.DecidedWhy
		}
	case approval.Expired:
		res.Status = events.StatusExpired
		res.Error = fmt.Sprintf("plan %s was not approved before %s, nothing changed", p.ID, p.ExpiresAt.UTC().Format(time.RFC3339))
	case approval.Stale:
		res.Status = events.StatusRejected
		res.Error = fmt.Sprintf("plan %s %s, but the cluster no longer matches it, nothing changed: %s", p.ID, p.ApprovedWords(),
			strings.Join(p.Differences, "; "))
		if p.DecidedWhy != "" && len(p.Differences) == 0 {
			res.Error = fmt.Sprintf("plan %s was approved (event %s) but could not run, nothing changed: %s", p.ID, p.DecidedEvent, p.DecidedWhy)
		}
	case approval.Cancelled:
		res.Status = events.StatusCancelled
		res.Error = fmt.Sprintf("cancelled while its plan %s waited for approval, nothing changed: %s", p.ID, p.DecidedWhy)
	default:
		return nil
	}
	return res
}

// conclude moves plan p (at revision rev, awaiting) to state st and stores its event's
// final result. ErrConflict: it changed since it was read.
func (e *Engine) concludePlan(ctx context.Context, p *approval.Plan, rev uint64, st approval.State, by, event, why string) error {
	p.State, p.DecidedBy, p.DecidedEvent, p.DecidedWhy, p.DecidedAt = st, by, event, why, time.Now().UTC()
	if _, err := e.cfg.Plans.Update(ctx, p, rev); err != nil {
		return err
	}
	return e.storeFinal(ctx, p)
}

// storeFinal stores the final result of an answered plan's event (the first stored wins).
func (e *Engine) storeFinal(ctx context.Context, p *approval.Plan) error {
	res := finalOf(p)
	if res == nil {
		return nil
	}
	if _, _, err := e.cfg.Results.Publish(ctx, res); err != nil {
		return retry.Transient(fmt.Errorf("store the result of event %s (plan %s %s): %w", p.Event, p.ID, p.State, err))
	}
	e.cfg.Metrics.Operation(res)
	return nil
}

// decision handles plan-approved and plan-denied.
func (e *Engine) decision(ctx context.Context, d Delivery, res *events.Result) (*events.Result, error) {
	ev := d.Event()
	pd, _ := ev.Payload.(*events.PlanDecision)
	if pd == nil {
		return answer(res, Reject("%s: no plan named", ev.Type))
	}
	res.PlanID = pd.PlanID
	if err := e.cfg.Guard.Refuses(ev); err != nil {
		return answer(res, err)
	}
	if !e.cfg.Approval.Approver(ev.Source) {
		allowed := "none"
		if len(e.cfg.Approval.Approvers) > 0 {
			allowed = strings.Join(e.cfg.Approval.Approvers, ", ")
		}
		return answer(res, Reject("approval.approvers: source %q may not approve or deny plans (allowed: %s)", ev.Source, allowed))
	}
	if e.cfg.Plans == nil {
		return answer(res, Reject("no plan waits for approval on this worker's clusters (it stores none)"))
	}
	for {
		p, rev, err := e.cfg.Plans.Get(ctx, ev.Cluster, pd.PlanID)
		if errors.Is(err, approval.ErrNotFound) {
			return answer(res, Reject("unknown plan %s on cluster %s (plans are kept %s)", pd.PlanID, ev.Cluster, approval.KeepFor))
		}
		if err != nil {
			return res, err
		}
		mine := p.DecidedEvent == ev.ID
		switch {
		case p.Expired(time.Now()):
			if err := e.concludePlan(ctx, p, rev, approval.Expired, "", "", ""); errors.Is(err, approval.ErrConflict) {
				continue
			} else if err != nil {
				return res, err
			}
			return answer(res, Reject("plan %s of event %s expired at %s: its event ended expired", p.ID, p.Event, p.ExpiresAt.UTC().Format(time.RFC3339)))
		case p.State != approval.Awaiting && !mine:
			return answer(res, Reject("plan %s of event %s was %s already", p.ID, p.Event, p.Decided()))
		case ev.Type == events.TypePlanDenied:
			if !mine {
				if err := e.concludePlan(ctx, p, rev, approval.Denied, ev.Source, ev.ID, pd.Reason); errors.Is(err, approval.ErrConflict) {
					continue
				} else if err != nil {
					return res, err
				}
			} else if err := e.storeFinal(ctx, p); err != nil { // a redelivery: the result may not be stored yet
				return res, err
			}
			e.eventLog(ev).Info("plan denied", zap.String("plan_id", p.ID), zap.String("event", p.Event), zap.String("by", ev.Source))
			res.Status = events.StatusSucceeded
			res.AddNote(fmt.Sprintf("plan %s denied: event %s ended denied, nothing changed", p.ID, p.Event))
			return res, nil
		}
		return e.locked(ctx, d, res, modeRun, func(s *session, prev *journal.Record) (*events.Result, error) {
			return e.approved(s, d, res, prev, pd)
		})
	}
}

// approved runs an approved plan under the lock, the journal resolved (prev: the
// cluster's closed entry, or nil).
func (e *Engine) approved(s *session, d Delivery, res *events.Result, prev *journal.Record, pd *events.PlanDecision) (*events.Result, error) {
	ctx, ev := s.ctx, d.Event()
	log := e.eventLog(ev).With(zap.String("plan_id", pd.PlanID))
	var p *approval.Plan
	for {
		plan, rev, err := e.cfg.Plans.Get(ctx, ev.Cluster, pd.PlanID)
		if err != nil {
			return res, err
		}
		p = plan
		if p.State == approval.Approved && p.DecidedEvent == ev.ID {
			break // this approval's, from an earlier delivery
		}
		if final := finalOf(p); final != nil && p.DecidedEvent == ev.ID {
			// An earlier delivery of this approval ended it (the cluster had changed): the
			// same answer, the event's result stored if it was not.
			if err := e.storeFinal(ctx, p); err != nil {
				return res, err
			}
			return answer(res, Reject("%s", final.Error))
		}
		if p.State != approval.Awaiting {
			return answer(res, Reject("plan %s of event %s was %s already", p.ID, p.Event, p.Decided()))
		}
		st, why := approval.Approved, pd.Reason
		switch c := e.cancelled(ctx, &events.Event{Envelope: events.Envelope{ID: p.Event}, Cluster: p.Cluster}); {
		case p.Expired(time.Now()):
			st = approval.Expired
		case c != "":
			st, why = approval.Cancelled, c
		}
		if st != approval.Approved {
			err := e.concludePlan(ctx, p, rev, st, "", "", why)
			if errors.Is(err, approval.ErrConflict) {
				continue
			}
			if err != nil {
				return res, err
			}
			return answer(res, Reject("plan %s of event %s: %s", p.ID, p.Event, finalOf(p).Error))
		}
		p.State, p.DecidedBy, p.DecidedEvent, p.DecidedAt, p.DecidedWhy = st, ev.Source, ev.ID, time.Now().UTC(), why
		if _, err := e.cfg.Plans.Update(ctx, p, rev); errors.Is(err, approval.ErrConflict) {
			continue
		} else if err != nil {
			return res, err
		}
		log.Info("plan approved", zap.String("event", p.Event), zap.String("by", ev.Source))
		break
	}
	stored, ok, err := e.cfg.Results.Earlier(ctx, p.Event)
	// The plan's event is the cluster's closed entry: an earlier delivery of this approval
	// ran it, and its result was stored before the entry closed (here, a moment ago, when
	// the entry was resolved under this lock). The workers read results from the stream's
	// leader, but a user without that permission reads by direct get, which a replica a
	// write behind may answer without it: wait for it rather than survey a cluster the
	// plan has changed.
	for i := 0; err == nil && !ok && prev != nil && prev.Event == p.Event && !prev.Open() && i < 50; i++ {
		select {
		case <-ctx.Done():
			return res, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
		stored, ok, err = e.cfg.Results.Earlier(ctx, p.Event)
	}
	if err != nil {
		return res, err
	} else if ok {
		return mirror(res, p, stored), nil // an earlier delivery of this approval ran it
	}
	d.Announce(approvedInterim(p))
	left := p.Floor
	if prev != nil {
		left = prev.Left
	}
	fp, _, err := e.survey(ctx, ev.Cluster, p.Changes, left, false)
	if err != nil {
		return res, err
	}
	if diff := approval.Diff(p.Fingerprint, fp); len(diff) > 0 {
		log.Warn("the cluster no longer matches the approved plan: not running it", zap.Strings("differences", diff))
		return e.stale(ctx, res, p, diff, "")
	}
	planned, err := e.cfg.Decode(p.Request)
	if err != nil || planned.ID != p.Event {
		return e.stale(ctx, res, p, nil, fmt.Sprintf("its stored request no longer decodes (%v)", err))
	}
	now := time.Now()
	entry := journal.Entry{Event: p.Event, Type: p.Type, Cluster: p.Cluster, Request: p.Request, PlanID: p.ID, Worker: d.Worker(), Attempt: 1,
		Strategy: p.Strategy, Step: journal.StepPlanned, Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop, Notes: p.Notes, Floor: left}
	if p.Timeout > 0 {
		entry.Deadline = now.Add(p.Timeout).UTC()
	}
	pres := &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Strategy: p.Strategy, Reason: p.Reason, PlanID: p.ID, StartedAt: now}
	t, err := e.cfg.Tasks.Resume(ctx, planned, &entry, pres)
	if err != nil {
		return res, err
	}
	if err := e.cfg.Guard.Count(ctx, s.alive, planned); err != nil {
		if IsRejection(err) {
			return e.stale(ctx, res, p, nil, err.Error())
		}
		return res, err
	}
	op, err := e.cfg.Journal.Begin(ctx, s.alive, prev, entry)
	if err != nil {
		return res, err
	}
	xlog := e.eventLog(planned).With(zap.String("approved_by", ev.ID), zap.String("plan_id", p.ID))
	od := &orphan{parent: d, ev: planned, req: p.Request, attempt: 1, results: e.cfg.Results}
	r := &Run{Event: planned, Result: pres, Op: op, Log: xlog, lease: s.lease, ctx: ctx, deliv: od, hook: e.cfg.Hook, final: d.LastAttempt()}
	phase(xlog, "journaled")
	r.Step(StepJournalWritten)
	out, err := e.complete(r, t, e.applyCancellable(ctx, r, t))
	if err != nil {
		return res, err
	}
	e.cfg.Metrics.Operation(out)
	return mirror(res, p, out), nil
}

// stale ends an approved plan that cannot run (the cluster changed: diff; or why): its
// event rejected, the approval rejected, nothing changed.
func (e *Engine) stale(ctx context.Context, res *events.Result, p *approval.Plan, diff []string, why string) (*events.Result, error) {
	for {
		cur, rev, err := e.cfg.Plans.Get(ctx, p.Cluster, p.ID)
		if err != nil {
			return res, err
		}
		if cur.State == approval.Approved {
			cur.State, cur.Differences = approval.Stale, diff
			if why != "" {
				cur.DecidedWhy = why
			}
			if _, err := e.cfg.Plans.Update(ctx, cur, rev); errors.Is(err, approval.ErrConflict) {
				continue
			} else if err != nil {
				return res, err
			}
		}
		if err := e.storeFinal(ctx, cur); err != nil {
			return res, err
		}
		return answer(res, Reject("%s", finalOf(cur).Error))
	}
}

// mirror fills the approval's result from the result of the event whose plan it ran.
func mirror(res *events.Result, p *approval.Plan, of *events.Result) *events.Result {
	res.Status, res.Error, res.Changes, res.Skipped, res.Noop, res.Strategy = of.Status, of.Error, of.Changes, of.Skipped, of.Noop, of.Strategy
	res.ThrottlesKept, res.ControllerFailover = of.ThrottlesKept, of.ControllerFailover
	res.AddNote(fmt.Sprintf("approved plan %s of event %s, which ran it: its result (%s) is stored under %s", p.ID, p.Event, of.Status, p.Event))
	return res
}

// RunSweeps runs Sweep every interval until ctx ends, giving record how many plans of
// each cluster wait after each sweep (the metric); a failed sweep is logged.
func (e *Engine) RunSweeps(ctx context.Context, every time.Duration, record func(map[string]int)) {
	if e.cfg.Plans == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 4*every)
		waiting, err := e.Sweep(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			e.log.Info("sweep the plans awaiting approval", zap.Error(err))
		}
		if record != nil && waiting != nil {
			record(waiting)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// KeepApprovedWatch is how long Sweep watches an approved plan for an approval that ended
// before it ran the plan.
const KeepApprovedWatch = 24 * time.Hour

// orphanedApproval gives the event of an approved plan its final result when the approval
// ended (its result is stored: it was given up, delivered more often than allowed) before
// it journaled the plan, and nothing else will run it: nothing was changed.
func (e *Engine) orphanedApproval(ctx context.Context, p *approval.Plan, log *zap.Logger) error {
	if _, ok, err := e.cfg.Results.Earlier(ctx, p.Event); err != nil || ok {
		return err
	}
	by, ok, err := e.cfg.Results.Earlier(ctx, p.DecidedEvent)
	if err != nil || !ok {
		return err // the approval is still under way
	}
	rec, err := e.cfg.Journal.Get(ctx, p.Cluster)
	if err != nil {
		return err
	}
	if rec != nil && rec.Open() && rec.Event == p.Event {
		return nil // journaled: whoever takes the lock next finishes it, and stores its result
	}
	if _, ok, err := e.cfg.Results.Earlier(ctx, p.Event); err != nil || ok {
		return err // finished between the reads
	}
	res := &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Status: events.StatusFailed, Strategy: p.Strategy, Attempt: 1,
		Worker: p.PlannedBy, StartedAt: p.CreatedAt, Reason: p.Reason, PlanID: p.ID,
		Error: fmt.Sprintf("plan %s was approved (event %s), but the approval ended %s before the plan ran: nothing changed (%s)", p.ID, p.DecidedEvent, by.Status, by.Error)}
	log.Warn("the approval of a plan ended before it ran the plan; its event fails", zap.String("approval", p.DecidedEvent))
	_, _, err = e.cfg.Results.Publish(ctx, res)
	return err
}

// Sweep ends the plans nobody answered in time (their events expired) and those whose
// event was cancelled while they waited, and stores the final result of a plan answered
// by a worker that died before it stored it. Every worker may run it: each plan changes
// once (revision-checked), and an event's first result stored wins. It returns how many
// plans of each cluster still wait.
func (e *Engine) Sweep(ctx context.Context) (map[string]int, error) {
	if e.cfg.Plans == nil {
		return nil, nil
	}
	plans, err := e.cfg.Plans.List(ctx, e.cfg.Clusters...)
	if err != nil {
		return nil, err
	}
	waiting := map[string]int{}
	for _, c := range e.cfg.Clusters {
		waiting[c] = 0
	}
	var errs []error
	now := time.Now()
	for _, p := range plans {
		log := e.log.With(zap.String("plan_id", p.ID), zap.String("id", p.Event), zap.String("cluster", p.Cluster))
		switch {
		case p.State == approval.Awaiting:
			st, why := approval.State(""), ""
			if p.Expired(now) {
				st = approval.Expired
			} else if c := e.cancelled(ctx, &events.Event{Envelope: events.Envelope{ID: p.Event}, Cluster: p.Cluster}); c != "" {
				st, why = approval.Cancelled, c
			}
			if st == "" {
				waiting[p.Cluster]++
				continue
			}
			// Its revision, to end it once: read again, as it may have been answered since.
			cur, rev, err := e.cfg.Plans.Get(ctx, p.Cluster, p.ID)
			if err != nil || cur.State != approval.Awaiting {
				continue
			}
			if err := e.concludePlan(ctx, cur, rev, st, "", "", why); err != nil && !errors.Is(err, approval.ErrConflict) {
				errs = append(errs, err)
				continue
			}
			log.Info("plan ended without an answer", zap.String("state", string(st)))
		case p.State == approval.Approved && now.Sub(p.DecidedAt) < KeepApprovedWatch:
			if err := e.orphanedApproval(ctx, p, log); err != nil {
				errs = append(errs, err)
			}
		case now.Sub(p.DecidedAt) < time.Hour && finalOf(p) != nil:
			// Answered: its result may not be stored if its worker died in between.
			if _, ok, err := e.cfg.Results.Earlier(ctx, p.Event); err == nil && !ok {
				if err := e.storeFinal(ctx, p); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return waiting, errors.Join(errs...)
}
