package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// shutdownDelay is the redelivery delay of an event left because this worker stops: short,
// so that another worker takes it soon.
const shutdownDelay = 500 * time.Millisecond

// delivery is one delivery of a message, as the steps of handle see it.
type delivery struct {
	msg     jetstream.Msg
	raw     RawEvent
	ev      *events.Event // once decoded
	attempt int
	started time.Time
	log     *zap.Logger
	slot    *slot // the loop's, given back while the event is held (hold)
	// holds counts the deliveries of the event held while its cluster was paused (not
	// attempts: see discountHolds); settled is set once its message is acknowledged.
	holds   int
	settled bool
}

// handle turns one delivery into a result (or a delayed redelivery), in phases: receive
// the message; give up on an event delivered more often than allowed; decode it (an
// invalid one is rejected); replay the result of one handled already; drop one expired;
// run its handler; conclude from what the handler returned.
func (p *Pipeline) handle(ctx context.Context, msg jetstream.Msg, sl *slot) {
	d := p.receive(msg)
	d.slot = sl
	p.discountHolds(ctx, d)
	defer p.forgetHolds(ctx, d)
	if ctx.Err() != nil {
		// Delivered by a fetch still out as the worker stops: given back at once, and
		// not an attempt (when the deliveries that are not can be recorded).
		p.notAnAttempt(ctx, d)
		p.nak(ctx, d, "", nil)
		return
	}
	if d.attempt > p.cfg.MaxAttempts {
		p.giveUp(ctx, d)
		return
	}
	if !p.decode(ctx, d) || p.replayed(ctx, d) || p.expired(ctx, d) {
		return
	}
	if held, over := p.hold(ctx, d); over || held && p.expired(ctx, d) { // it may have expired while held
		return
	}
	h, ok := p.handlers[d.ev.Type]
	if !ok {
		res := p.base(d)
		res.Status, res.Error = events.StatusFailed, fmt.Sprintf("this worker has no handler for %s events", d.ev.Type)
		p.storeAndAck(ctx, d, res)
		return
	}
	job, out := p.run(ctx, d, h)
	p.conclude(ctx, d, job, out)
}

// receive reads what the message says of itself: its delivery count, stream sequence,
// subject, headers and body.
func (p *Pipeline) receive(msg jetstream.Msg) *delivery {
	d := &delivery{msg: msg, attempt: 1, started: time.Now()}
	if md, err := msg.Metadata(); err == nil {
		d.attempt, d.raw.Seq = int(md.NumDelivered), md.Sequence.Stream
	}
	d.raw.Subject, d.raw.Header, d.raw.Data = msg.Subject(), msg.Headers(), msg.Data()
	d.log = p.log.With(zap.String("subject", msg.Subject()), zap.Int("attempt", d.attempt), zap.Uint64("seq", d.raw.Seq))
	return d
}

// giveUp ends an event delivered more often than allowed: every earlier delivery ended
// without a final answer (their workers stopped, perhaps because of it, or left its
// operation in flight). A result stored meanwhile (its acknowledgement was lost) is
// replayed; otherwise the handler rolls back what its attempts left (Finisher.Abandon), a
// copy goes to the dead letters, the failed result is stored and the message terminated.
// The pipeline, not the server, bounds the deliveries (the consumer delivers without a
// limit): when a step fails (storage full) the message is delivered again later, and the
// event ends with a result once storage is back.
func (p *Pipeline) giveUp(ctx context.Context, d *delivery) {
	if ev, err := d.raw.Decode(p.decodeOptions()); err == nil {
		d.ev = ev
		if p.replayed(ctx, d) {
			return
		}
	}
	res := p.unhandled(d.raw, d.attempt, d.started)
	d.log.Error("event delivered more often than allowed; giving up on it", zap.String("id", res.ID), zap.String("error", res.Error))
	job := p.abandon(ctx, d, res)
	if job != nil {
		if stored, own := job.publishedResult(); stored != nil && stored.Status.OK() {
			// Its operation was done: the true result, no dead letter.
			p.ackStored(ctx, d, stored, own)
			return
		}
	}
	p.poison(ctx, d, res, res.Error, job)
}

// decode decodes and validates the event; an invalid one gets a rejected result (and is
// never retried). It reports whether the event decoded.
func (p *Pipeline) decode(ctx context.Context, d *delivery) bool {
	ev, err := d.raw.Decode(p.decodeOptions())
	if err != nil {
		id, typ, cluster := identify(d.raw, err)
		res := &events.Result{ID: id, Type: typ, Cluster: cluster, Status: events.StatusRejected,
			Error: err.Error(), Attempt: d.attempt, Worker: p.cfg.Worker, StartedAt: d.started}
		d.log.Warn("event rejected", zap.String("id", res.ID), zap.Error(err))
		p.storeAndAck(ctx, d, res)
		return false
	}
	d.ev = ev
	d.log = d.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
	return true
}

// replayed answers an event whose result is stored already: the result is published
// again, the handler (a Finisher) finishes what the event's operation left after its
// result, and the message is acknowledged. It reports whether the event was answered so
// (or left for redelivery because the lookup, or the handler's finishing, could not be
// done now).
func (p *Pipeline) replayed(ctx context.Context, d *delivery) bool {
	earlier, ok, err := p.lookUpEarlier(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			p.notAnAttempt(ctx, d) // the worker stops before it looked at the event
		}
		p.nak(ctx, d, "look up an earlier result failed", err)
		return true
	}
	if !ok {
		return false
	}
	d.log.Info("event already handled; publishing its result again", zap.String("status", string(earlier.Status)))
	p.publishReplay(d, earlier)
	if f, ok := p.handlers[d.ev.Type].(Finisher); ok {
		// Before the acknowledgement, the message kept alive: what the handler finishes
		// for the event may take a while, and a worker that dies meanwhile leaves it to
		// the next delivery.
		fctx, stop := context.WithCancel(ctx)
		stopAlive := p.keepAlive(fctx, d.msg)
		err := f.Replayed(fctx, p.job(d))
		stopAlive()
		stop()
		if retry.IsInFlight(err) || ctx.Err() != nil {
			// Stopping, or the operation still has work to finish: the next delivery
			// replays again and finishes it.
			p.nak(ctx, d, "the event's operation has work left after its result; delivering it again", err)
			return true
		}
	}
	p.ackReplayed(ctx, d)
	return true
}

// earlierPatience bounds how long a delivery keeps looking up the event's earlier result
// before it is given back (which uses up a delivery).
const earlierPatience = 30 * time.Second

// lookUpEarlier looks up the event's stored result. A lookup that fails is tried again for
// up to earlierPatience, the message kept in progress meanwhile: on a NATS cluster the
// consumer can deliver while the results stream has no leader yet (the nodes starting
// again), or while one of its replicas hangs and leaves the reads it is given unanswered;
// each lookup is bounded (natsjs), and the next goes to the replicas afresh. Giving the
// delivery back at once would use up an attempt for a NATS hiccup.
func (p *Pipeline) lookUpEarlier(ctx context.Context, d *delivery) (*events.Result, bool, error) {
	deadline := time.Now().Add(earlierPatience)
	stopAlive := func() {}
	defer func() { stopAlive() }()
	for pace := 250 * time.Millisecond; ; pace = min(2*pace, 2*time.Second) {
		earlier, ok, err := p.store().Earlier(ctx, d.ev.ID)
		if err == nil || ctx.Err() != nil || time.Now().Add(pace).After(deadline) {
			return earlier, ok, err
		}
		d.log.Debug("look up an earlier result failed; trying again", zap.Error(err))
		if pace == 250*time.Millisecond { // the first failure: keep the message ours meanwhile
			_ = d.msg.InProgress()
			stopAlive = p.keepAlive(ctx, d.msg)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pace):
		}
	}
}

// expired drops an event whose expiresat has passed, with result expired.
func (p *Pipeline) expired(ctx context.Context, d *delivery) bool {
	if !d.ev.Expired(d.started) {
		return false
	}
	res := p.base(d)
	res.Status, res.Error = events.StatusExpired, fmt.Sprintf("expired at %s, before it ran", d.ev.ExpiresAt.Format(time.RFC3339))
	d.log.Info("event expired")
	p.storeAndAck(ctx, d, res)
	return true
}

// base is the result skeleton of a decoded delivery.
func (p *Pipeline) base(d *delivery) *events.Result {
	return &events.Result{ID: d.ev.ID, Type: d.ev.Type, Cluster: d.ev.Cluster, Attempt: d.attempt, Worker: p.cfg.Worker, StartedAt: d.started}
}

// job is the handler's view of the delivery.
func (p *Pipeline) job(d *delivery) *Job {
	return &Job{event: d.ev, raw: d.raw, attempt: d.attempt, last: d.attempt >= p.cfg.MaxAttempts,
		worker: p.cfg.Worker, started: d.started, results: p.store(),
		nc: p.nc, alive: func() {
			if d.msg != nil { // nil: a dry run answered from the stream (answerDryRun)
				_ = d.msg.InProgress()
			}
		}}
}

// run runs the handler, the message kept alive meanwhile.
func (p *Pipeline) run(ctx context.Context, d *delivery, h Handler) (*Job, outcome) {
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	defer p.keepAlive(hctx, d.msg)()
	job := p.job(d)
	return job, call(hctx, h, job)
}

// conclude ends the delivery from what its handler came to: a panic goes to the dead
// letters; an operation left in flight is delivered again, whatever the attempt; a result
// the handler stored is acknowledged; a transient failure is retried until the last
// attempt (or left for another worker when this one stops); anything else is stored as
// the final result.
func (p *Pipeline) conclude(ctx context.Context, d *delivery, job *Job, out outcome) {
	base := p.base(d)
	if out.panicked {
		// The handler's defers (its lock release) ran while the panic unwound.
		d.log.Error("handler panicked; the event fails and goes to the dead letters",
			zap.String("panic", fmt.Sprint(out.value)), zap.ByteString("stack", out.stack))
		reason := fmt.Sprintf("handler panicked: %v", out.value)
		base.Status, base.Error = events.StatusFailed, reason
		p.poison(ctx, d, base, reason, job)
		return
	}
	if retry.IsInFlight(out.err) {
		// Journaled and unfinished (or a stored result with work left to wait for): never
		// a final result from here, even on the last attempt; the next delivery finishes
		// or rolls it back under the lock (past the last attempt: giveUp).
		p.nak(ctx, d, "operation left in flight; delivering the event again", out.err)
		return
	}
	if stored, own := job.publishedResult(); stored != nil {
		if out.err != nil {
			d.log.Warn("handler failed after it stored its result; the stored result stands", zap.Error(out.err))
		}
		p.ackStored(ctx, d, stored, own)
		return
	}
	res, err := out.res, out.err
	if res == nil {
		res = base
	}
	fill(res, base)
	if err != nil {
		transient := retry.IsTransient(err)
		if transient && ctx.Err() != nil {
			// The worker is stopping: someone else should do it, soon. Never a final
			// result for that, not even on the last attempt.
			p.nak(ctx, d, "handler stopped: the worker is stopping", err)
			return
		}
		if transient && d.attempt < p.cfg.MaxAttempts {
			p.metrics.Retry(d.ev.Cluster, d.ev.Type)
			p.nak(ctx, d, "transient failure; will try again", err)
			return
		}
		res.Status = events.StatusFailed
		res.Error = err.Error()
		if transient {
			res.Error = fmt.Sprintf("gave up after %d attempts: %v", d.attempt, err)
		}
	}
	if res.Replayed {
		d.log.Info("event handled by another worker meanwhile; publishing its result again", zap.String("status", string(res.Status)))
		p.replay(ctx, d, res)
		return
	}
	if res.Status.Interim() {
		// Its final result comes later, from another event (a plan awaiting approval: the
		// approval's, or the expiry's): the message is done with.
		d.log.Info("event answered with an interim result; its final result follows", zap.String("status", string(res.Status)),
			zap.String("plan_id", res.PlanID), zap.String("note", res.Note))
		if err := announce(p.nc, res); err != nil {
			d.log.Warn("publish the interim result failed (acknowledging anyway: the plan is stored)", zap.Error(err))
		}
		p.ackReplayed(ctx, d)
		return
	}
	d.log.Info("event handled", zap.String("status", string(res.Status)), zap.String("error", res.Error),
		zap.Int("changes", len(res.Changes)), zap.Int("skipped", len(res.Skipped)))
	p.storeAndAck(ctx, d, res)
}

// keepAlive tells JetStream, every third of the ack wait, that msg is being worked on,
// until ctx ends or stop is called.
func (p *Pipeline) keepAlive(ctx context.Context, msg jetstream.Msg) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(p.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return cancel
}

func (p *Pipeline) decodeOptions() events.DecodeOptions {
	return events.DecodeOptions{Clusters: p.cfg.Clusters}
}

// store returns the results store (set up by Setup).
func (p *Pipeline) store() *streamResults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.results
}

// outcome is what a handler call came to.
type outcome struct {
	res      *events.Result
	err      error
	panicked bool
	value    any // the panic value
	stack    []byte
}

// call runs the handler, recovering a panic.
func call(ctx context.Context, h Handler, job *Job) (out outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = outcome{panicked: true, value: v, stack: debug.Stack()}
		}
	}()
	out.res, out.err = h.Handle(ctx, job)
	return out
}

// identify names an event that does not decode (err is its rejection): the id, type and
// cluster its result is published under. Without a usable id in the event, the message id
// is used (publishers set it to the event id), else its stream sequence.
func identify(raw RawEvent, err error) (id, typ, cluster string) {
	var rej *events.Rejection
	if errors.As(err, &rej) {
		id, typ, cluster = rej.ID, rej.Type, rej.Cluster
	}
	if msgID := raw.Header.Get(jetstream.MsgIDHeader); id == "" && events.ValidID(msgID) {
		// Unreadable body: publishers (the emitter) set the message id to the event id.
		id = msgID
	}
	if !events.ValidID(id) {
		// No usable id: the result still goes to the audit trail, under the message's
		// stream sequence, so the publisher can find it.
		id = "invalid-seq-" + strconv.FormatUint(raw.Seq, 10)
	}
	return id, typ, cluster
}

// fill completes a handler's result with what the pipeline knows.
func fill(res, base *events.Result) {
	if res.ID == "" {
		res.ID = base.ID
	}
	if res.Type == "" {
		res.Type = base.Type
	}
	if res.Cluster == "" {
		res.Cluster = base.Cluster
	}
	if res.Worker == "" {
		res.Worker = base.Worker
	}
	if res.Attempt == 0 {
		res.Attempt = base.Attempt
	}
	if res.StartedAt.IsZero() {
		res.StartedAt = base.StartedAt
	}
}

// storeAndAck stores the result, then acknowledges (or terminates) the message: ackStored.
// When the result cannot be stored the message is left for redelivery: the event is not
// lost, and the handler's next run finds the cluster already as asked.
func (p *Pipeline) storeAndAck(ctx context.Context, d *delivery, res *events.Result) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stored, own, err := p.store().Publish(pctx, res)
	if err != nil {
		d.log.Error("publish result failed; leaving the event for redelivery", zap.Error(err))
		p.nak(ctx, d, "", nil)
		return
	}
	p.ackStored(ctx, d, stored, own)
}

// ackStored acknowledges a message whose result is stored: it terminates it when the
// result says the event failed or was rejected (JetStream advisories then tell so), else
// acknowledges it. Before, it counts the result when this worker stored it (own), and
// answers the later events of the cluster that the result answers too (absorb).
func (p *Pipeline) ackStored(ctx context.Context, d *delivery, stored *events.Result, own bool) {
	if own {
		p.count(stored)
	} else {
		d.log.Info("a result was stored for this event already; acknowledging the event",
			zap.String("status", string(stored.Status)), zap.String("by", stored.Worker), zap.Int("its_attempt", stored.Attempt))
	}
	p.absorb(ctx, d, stored)
	var err error
	if stored.Status == events.StatusRejected || stored.Status == events.StatusFailed {
		err = d.msg.TermWithReason(string(stored.Status))
	} else {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = d.msg.DoubleAck(actx)
	}
	if err != nil {
		d.log.Warn("acknowledge failed; the event may be delivered again (its result will be replayed)", zap.Error(err))
		return
	}
	d.settled = true
}

// replayExpectedStream is the expected stream of a replayed result: a name no stream can
// have (streams names have no dots), so that the results stream refuses to store it.
const replayExpectedStream = "kafkamender.replay.not-stored"

// replay sends res, the result stored earlier for the event, again on its result subject,
// and acknowledges the message. The replay is a core NATS message that the results stream
// refuses (it expects another stream): waiters on the subject hear it, the audit trail
// keeps only the original.
func (p *Pipeline) replay(ctx context.Context, d *delivery, res *events.Result) {
	p.publishReplay(d, res)
	p.ackReplayed(ctx, d)
}

// publishReplay publishes a stored result again, marked replayed.
func (p *Pipeline) publishReplay(d *delivery, res *events.Result) {
	res.Replayed = true
	if err := announce(p.nc, res); err != nil {
		d.log.Warn("replay result failed (it is stored; acknowledging anyway)", zap.Error(err))
	}
}

// announce publishes res on its result subject as a core NATS message that the results
// stream refuses to store (it expects another stream): a replay, or an interim result.
func announce(nc *nats.Conn, res *events.Result) error {
	complete(res)
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return nc.PublishMsg(&nats.Msg{Subject: events.ResultSubject(res.ID), Data: raw,
		Header: nats.Header{jetstream.ExpectedStreamHeader: []string{replayExpectedStream}}})
}

// ackReplayed acknowledges the message of an event whose stored result was replayed,
// whatever the result's status; nothing is counted or absorbed (ackStored was for the
// delivery that stored it).
func (p *Pipeline) ackReplayed(ctx context.Context, d *delivery) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.msg.DoubleAck(actx); err != nil {
		d.log.Warn("acknowledge failed; the event may be delivered again (its result will be replayed)", zap.Error(err))
		return
	}
	d.settled = true
}

// nak leaves the message for a later delivery: after the growing retry delay, or soon when
// the worker is stopping (someone else takes it). why and err are logged when set.
func (p *Pipeline) nak(ctx context.Context, d *delivery, why string, err error) {
	delay := p.cfg.RetryDelay(d.attempt)
	if ctx.Err() != nil {
		delay = shutdownDelay
	}
	if why != "" {
		d.log.Warn(why, zap.Error(err), zap.Duration("delay", delay))
	}
	if err := d.msg.NakWithDelay(delay); err != nil {
		d.log.Warn("negative acknowledgement failed; the event is delivered again after the ack wait", zap.Error(err))
	}
}

// count records a result this worker stored.
func (p *Pipeline) count(res *events.Result) {
	p.metrics.EventDone(res)
}
