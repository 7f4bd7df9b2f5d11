package pipeline

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/synadia-io/orbit.go/jetstreamext"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Pauses and control events.
//
// A cluster's control events (events.ControlTypes: cluster-pause, cluster-resume) are
// taken by a consumer of their own, ControlConsumer, one at a time in stream order like
// the cluster's other events, but not queued behind them: a pause must hold the events
// that wait, and a resume let them go.
//
// While a cluster is paused (Config.Pauses) its events wait, in publish order, none lost
// and none run. The event at the head of the cluster's queue is held in the hand of the
// worker that fetched it (hold): kept alive, its progress (kafkamender.progress.<id>,
// "paused") saying every second why it waits, its slot of Config.Concurrency given back.
// When the pause ends it runs first, the order kept; when the worker stops it is delivered
// again, first, and held again; when it is cancelled (Config.Cancels) it goes to its
// handler at once, which answers it cancelled without running it. An operation that runs when the pause comes is left to
// finish. Every Config.HoldScan, the holder (or, while nobody holds one, any worker whose
// fetch found nothing) reads the events that wait behind the head: each one's progress
// says why it waits, and a dry run is answered (plans are read-only): its result stored,
// its message deleted.

// Pauses says which clusters are paused (package pause implements it).
type Pauses interface {
	// Paused returns why cluster's events wait, "" when the cluster is not paused. An
	// error means it could not be read: the events wait then too, since nothing may run
	// on a cluster that may be paused.
	Paused(ctx context.Context, cluster string) (string, error)
	// Holds returns how many deliveries of the event at stream sequence seq were held
	// (not run) while its cluster was paused: a worker that stops while it holds an event
	// gives it back, and its next delivery is not one more attempt. AddHold adds delta to
	// the count; ForgetHolds deletes it once the event is settled.
	Holds(ctx context.Context, seq uint64) (int, error)
	AddHold(ctx context.Context, seq uint64, delta int) error
	ForgetHolds(ctx context.Context, seq uint64) error
}

// Cancels says which events are cancelled (package cancel implements it).
type Cancels interface {
	// Cancelled returns why event id of cluster is cancelled, "" when it is not.
	Cancelled(ctx context.Context, cluster, id string) (string, error)
}

const (
	// holdPoll is how often a held event asks whether the pause still holds.
	holdPoll = time.Second
	// holdScan is the default Config.HoldScan.
	holdScan = 10 * time.Second
	// holdScanMax bounds the waiting events read per scan.
	holdScanMax = 10_000
)

// ControlConsumer is the name of the durable consumer that takes cluster's control events
// for the fleet whose consumer name is prefix. Cluster names have no '~', so no cluster's
// consumer has this name.
func ControlConsumer(prefix, cluster string) string {
	return ClusterConsumer(prefix, cluster) + "~control"
}

// SplitControl splits a cluster's filters (ClusterFilters) into those of its consumer of
// events and those of its consumer of control events: a filter of every type of the
// cluster becomes one subject per type.
func SplitControl(filters []string) (work, control []string) {
	add := func(list *[]string, s string) {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	n := len(strings.Split(events.EventsSubjectPrefix, ".")) + 2 // prefix, cluster, type
	for _, f := range filters {
		toks := strings.Split(f, ".")
		if len(toks) != n {
			add(&work, f) // a longer filter matches no event subject of a control type
			continue
		}
		base := strings.Join(toks[:n-1], ".")
		switch typ := toks[n-1]; {
		case typ == ">" || typ == "*":
			for _, t := range events.Types() {
				if events.ControlType(t.Name) {
					add(&control, base+"."+t.Name)
				} else {
					add(&work, base+"."+t.Name)
				}
			}
			if typ == ">" {
				add(&work, base+".*.>") // longer subjects: rejected as malformed, as before
			}
		case events.ControlType(typ):
			add(&control, f)
		default:
			add(&work, f)
		}
	}
	return work, control
}

// paused asks Config.Pauses whether cluster is paused, records the answer (metric,
// Paused) and logs when it changes. why is "" when the cluster's events may run.
func (p *Pipeline) paused(ctx context.Context, cluster string) string {
	if p.cfg.Pauses == nil {
		return ""
	}
	why, err := p.cfg.Pauses.Paused(ctx, cluster)
	if err != nil {
		if ctx.Err() != nil {
			return "the worker is stopping"
		}
		why = "whether cluster " + cluster + " is paused cannot be read now: " + err.Error()
	}
	p.mu.Lock()
	if p.pausedNow == nil {
		p.pausedNow = map[string]string{}
	}
	was := p.pausedNow[cluster]
	if why == "" {
		delete(p.pausedNow, cluster)
	} else {
		p.pausedNow[cluster] = why
	}
	p.mu.Unlock()
	p.metrics.Paused(cluster, why != "")
	switch {
	case why != "" && was == "":
		p.log.Warn("cluster paused: its events wait", zap.String("cluster", cluster), zap.String("why", why))
	case why == "" && was != "":
		p.log.Info("cluster resumed: its events run again", zap.String("cluster", cluster))
	}
	return why
}

// Paused returns the clusters this worker last saw paused, and why.
func (p *Pipeline) Paused() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.pausedNow))
	for c, why := range p.pausedNow {
		out[c] = why
	}
	return out
}

// hold keeps d, fetched but not run, in hand while its cluster is paused, its slot given
// back meanwhile (and taken again before it runs); it reports whether it held d, and
// whether the delivery is over (the worker stops: the event is delivered again, first). Every Config.HoldScan it
// scans the events that wait behind it.
func (p *Pipeline) hold(ctx context.Context, d *delivery) (held, over bool) {
	if events.ControlType(d.ev.Type) || d.ev.DryRun() {
		return false, false
	}
	why := p.paused(ctx, d.ev.Cluster)
	if why == "" {
		return false, false
	}
	d.log.Info("event held: its cluster is paused", zap.String("why", why))
	// Counted as a hold from the start (a worker killed while it holds the event leaves
	// the count right), and as an attempt again if it runs.
	counted := p.notAnAttempt(ctx, d)
	alive, stopAlive := context.WithCancel(ctx)
	defer stopAlive()
	defer p.keepAlive(alive, d.msg)()
	if d.slot != nil {
		d.slot.give()
	}
	job := p.job(d)
	var lastScan time.Time
	for why != "" {
		if p.cancelled(ctx, d) {
			break
		}
		job.Progress(events.Progress{Paused: why})
		if time.Since(lastScan) >= p.cfg.HoldScan {
			p.scanHeld(ctx, d.ev.Cluster, d.raw.Seq, why)
			lastScan = time.Now()
		}
		sleep(ctx, holdPoll)
		if ctx.Err() != nil {
			p.nak(ctx, d, "", nil)
			return true, true
		}
		why = p.paused(ctx, d.ev.Cluster)
	}
	if d.slot != nil && !d.slot.take(ctx) {
		p.nak(ctx, d, "", nil)
		return true, true
	}
	if counted {
		// It runs: this delivery is an attempt after all.
		if err := p.cfg.Pauses.AddHold(ctx, d.raw.Seq, -1); err != nil {
			d.log.Debug("count the held delivery as an attempt again", zap.Error(err))
		}
	}
	d.log.Info("running the held event (the cluster resumed, or the event is cancelled)")
	return true, false
}

// notAnAttempt records that d is not an attempt of its event (held while its cluster is
// paused, or received by a worker that stops before it looked at it); false when it
// could not be recorded (it then counts as one). Recorded even as the worker stops.
func (p *Pipeline) notAnAttempt(ctx context.Context, d *delivery) bool {
	if p.cfg.Pauses == nil || d.raw.Seq == 0 {
		return false
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.cfg.Pauses.AddHold(hctx, d.raw.Seq, 1); err != nil {
		d.log.Warn("could not record that this delivery is not an attempt: it counts as one", zap.Error(err))
		return false
	}
	d.holds++
	return true
}

// discountHolds takes from d's attempt the deliveries of its event that were held while
// its cluster was paused (none for a first delivery).
func (p *Pipeline) discountHolds(ctx context.Context, d *delivery) {
	if p.cfg.Pauses == nil || d.attempt <= 1 || d.raw.Seq == 0 {
		return
	}
	n, err := p.cfg.Pauses.Holds(ctx, d.raw.Seq)
	if err != nil {
		d.log.Warn("read the held deliveries of the event (each counts as an attempt)", zap.Error(err))
		return
	}
	if n > 0 {
		d.attempt = max(1, d.attempt-n)
		d.holds = n
		d.log = d.log.With(zap.Int("attempt_not_counting_holds", d.attempt))
	}
}

// forgetHolds deletes the count of held deliveries of a settled event.
func (p *Pipeline) forgetHolds(ctx context.Context, d *delivery) {
	if d.holds == 0 || !d.settled || p.cfg.Pauses == nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.cfg.Pauses.ForgetHolds(fctx, d.raw.Seq); err != nil {
		d.log.Debug("forget the held deliveries of a settled event", zap.Error(err))
	}
}

// cancelled reports whether d's event is cancelled (Config.Cancels); a read that fails
// reads as not cancelled (asked again a second later).
func (p *Pipeline) cancelled(ctx context.Context, d *delivery) bool {
	if p.cfg.Cancels == nil {
		return false
	}
	why, err := p.cfg.Cancels.Cancelled(ctx, d.ev.Cluster, d.ev.ID)
	if err != nil || why == "" {
		return false
	}
	d.log.Info("held event cancelled: its handler answers it without running it", zap.String("why", why))
	return true
}

// scanHeld reads the events of a paused cluster that wait in the stream: each one's
// progress says why it waits; a dry run is answered. inHand is the stream sequence of the
// event this worker holds (0: none); the first waiting event may also be in another
// worker's hand (an operation that runs, left to finish), which the consumer's pending
// count tells: it is left alone.
func (p *Pipeline) scanHeld(ctx context.Context, cluster string, inHand uint64, why string) {
	sctx, cancel := context.WithTimeout(ctx, max(p.cfg.HoldScan, 5*time.Second))
	defer cancel()
	p.mu.Lock()
	cons := p.cons[cluster]
	p.mu.Unlock()
	skipFirst := false
	if cons != nil && inHand == 0 {
		if ci, err := cons.Info(sctx); err == nil && ci.NumAckPending > 0 {
			skipFirst = true
		}
	}
	work, _ := SplitControl(ClusterFilters(p.cfg.FilterSubjects, cluster))
	subtree := events.EventsSubjectPrefix + "." + cluster + ".>"
	next, read := uint64(1), 0
	first := true
	for read < holdScanMax && sctx.Err() == nil {
		msgs, err := jetstreamext.GetBatch(sctx, p.js, events.EventsStream, absorbBatch,
			jetstreamext.GetBatchSeq(next), jetstreamext.GetBatchSubject(subtree))
		if err != nil {
			return
		}
		n := 0
		for sm, err := range msgs {
			if err != nil {
				break
			}
			n++
			next = sm.Sequence + 1
			raw := RawEvent{Subject: sm.Subject, Header: sm.Header, Data: sm.Data, Seq: sm.Sequence}
			if !slices.ContainsFunc(work, func(f string) bool { return events.SubjectMatches(f, raw.Subject) }) {
				continue // a control event, or another fleet's
			}
			if first {
				first = false
				if skipFirst {
					continue
				}
			}
			if sm.Sequence == inHand {
				continue
			}
			ev, err := raw.Decode(p.decodeOptions())
			if err != nil {
				continue // rejected when it is delivered
			}
			if ev.DryRun() {
				p.answerDryRun(sctx, raw, ev)
				continue
			}
			p.progress(ev.ID, events.Progress{Paused: why})
		}
		read += n
		if n < absorbBatch {
			return
		}
	}
}

// answerDryRun answers a dry run that waits behind a paused cluster's held events: its
// handler plans (reading only), the result is stored and the message deleted. Anything
// but a result (an error, a panic) leaves the event to its delivery.
func (p *Pipeline) answerDryRun(ctx context.Context, raw RawEvent, ev *events.Event) {
	h, ok := p.handlers[ev.Type]
	if !ok {
		return
	}
	d := &delivery{raw: raw, ev: ev, attempt: 1, started: time.Now(),
		log: p.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))}
	if earlier, ok, err := p.store().Earlier(ctx, ev.ID); err != nil || ok {
		if ok && earlier != nil {
			_ = deleteEvent(ctx, p.evs, raw.Seq)
		}
		return
	}
	job := p.job(d)
	out := call(ctx, h, job)
	stored, own := job.publishedResult()
	if stored == nil {
		if out.panicked || out.err != nil || out.res == nil {
			return
		}
		fill(out.res, p.base(d))
		var err error
		if stored, own, err = p.store().Publish(ctx, out.res); err != nil {
			return
		}
	}
	if own {
		p.count(stored)
		d.log.Info("dry run answered while its cluster is paused", zap.String("status", string(stored.Status)))
	}
	if err := deleteEvent(ctx, p.evs, raw.Seq); err != nil {
		d.log.Debug("delete an answered dry run (its delivery replays the result)", zap.Error(err))
	}
}

// progress publishes a progress report of event id, best effort.
func (p *Pipeline) progress(id string, pr events.Progress) {
	j := &Job{event: &events.Event{Envelope: events.Envelope{ID: id}}, nc: p.nc}
	j.Progress(pr)
}
