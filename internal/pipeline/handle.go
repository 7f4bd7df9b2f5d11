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
	log     *zap.Logger
}

// handle turns one delivery into a result (or a delayed redelivery).
func (p *Pipeline) handle(ctx context.Context, msg jetstream.Msg) {
	started := time.Now()
	d := &delivery{msg: msg, attempt: 1}
	if md, err := msg.Metadata(); err == nil {
		d.attempt, d.raw.Seq = int(md.NumDelivered), md.Sequence.Stream
	}
	d.raw.Subject, d.raw.Header, d.raw.Data = msg.Subject(), msg.Headers(), msg.Data()
	d.log = p.log.With(zap.String("subject", msg.Subject()), zap.Int("attempt", d.attempt), zap.Uint64("seq", d.raw.Seq))

	if d.attempt > p.cfg.MaxAttempts {
		// Every earlier delivery ended without an acknowledgement: the workers handling it
		// stopped each time (perhaps because of it). Do not run it again.
		res := p.unhandled(d.raw, d.attempt, started)
		d.log.Error("event delivered more often than allowed; giving up on it", zap.String("id", res.ID), zap.String("error", res.Error))
		job := p.abandon(ctx, d, res, started)
		p.poison(ctx, d, res, res.Error, job)
		return
	}

	ev, err := d.raw.Decode(p.decodeOptions())
	if err != nil {
		id, typ, cluster := identify(d.raw, err)
		res := &events.Result{ID: id, Type: typ, Cluster: cluster, Status: events.StatusRejected,
			Error: err.Error(), Attempt: d.attempt, Worker: p.cfg.Worker, StartedAt: started}
		d.log.Warn("event rejected", zap.String("id", res.ID), zap.Error(err))
		p.finish(ctx, d, res)
		return
	}
	d.ev = ev
	d.log = d.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))

	results := p.store()
	if earlier, ok, err := results.Earlier(ctx, ev.ID); err != nil {
		p.nak(ctx, d, "look up an earlier result failed", err)
		return
	} else if ok {
		d.log.Info("event already handled; publishing its result again", zap.String("status", string(earlier.Status)))
		p.publishReplay(d, earlier)
		if f, ok := p.handlers[ev.Type].(Finisher); ok {
			// Before the acknowledgement, the message kept alive: what the handler finishes
			// for the event may take a while, and a worker that dies meanwhile leaves it to
			// the next delivery.
			fctx, stop := context.WithCancel(ctx)
			stopAlive := p.keepAlive(fctx, msg)
			f.Replayed(fctx, &Job{Event: ev, Raw: d.raw, Attempt: d.attempt, Worker: p.cfg.Worker, Started: started, Results: results})
			stopAlive()
			stop()
			if ctx.Err() != nil {
				// Stopping, perhaps before the handler finished: the next delivery replays
				// again and finishes it.
				p.nak(ctx, d, "", nil)
				return
			}
		}
		p.ack(ctx, d)
		return
	}

	base := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Attempt: d.attempt, Worker: p.cfg.Worker, StartedAt: started}
	if ev.Expired(started) {
		base.Status, base.Error = events.StatusExpired, fmt.Sprintf("expired at %s, before it ran", ev.ExpiresAt.Format(time.RFC3339))
		d.log.Info("event expired")
		p.finish(ctx, d, base)
		return
	}
	h, ok := p.handlers[ev.Type]
	if !ok {
		base.Status, base.Error = events.StatusFailed, fmt.Sprintf("this worker has no handler for %s events", ev.Type)
		p.finish(ctx, d, base)
		return
	}

	// Keep the message alive while the handler works.
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	defer p.keepAlive(hctx, msg)()
	job := &Job{Event: ev, Raw: d.raw, Attempt: d.attempt, LastAttempt: d.attempt >= p.cfg.MaxAttempts,
		Worker: p.cfg.Worker, Started: started, Results: results,
		nc: p.nc, alive: func() { _ = msg.InProgress() }}
	out := call(hctx, h, job)
	stop()

	if out.panicked {
		// The handler's defers (its lock release) ran while the panic unwound.
		d.log.Error("handler panicked; the event fails and goes to the dead letters",
			zap.String("panic", fmt.Sprint(out.value)), zap.ByteString("stack", out.stack))
		reason := fmt.Sprintf("handler panicked: %v", out.value)
		base.Status, base.Error = events.StatusFailed, reason
		p.poison(ctx, d, base, reason, job)
		return
	}
	if stored, own := job.publishedResult(); stored != nil {
		if out.err != nil {
			d.log.Warn("handler failed after it stored its result; the stored result stands", zap.Error(out.err))
		}
		p.settle(ctx, d, stored, own)
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
			p.metrics.Retry(ev.Cluster, ev.Type)
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
	d.log.Info("event handled", zap.String("status", string(res.Status)), zap.String("error", res.Error),
		zap.Int("changes", len(res.Changes)), zap.Int("skipped", len(res.Skipped)))
	p.finish(ctx, d, res)
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
	if msgID := raw.Header.Get(jetstream.MsgIDHeader); id == "" && events.ValidToken(msgID) {
		// Unreadable body: publishers (the emitter) set the message id to the event id.
		id = msgID
	}
	if !events.ValidToken(id) {
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

// finish stores the result, then acknowledges (or terminates) the message. When the
// result cannot be stored the message is left for redelivery: the event is not lost, and
// the handler's next run finds the cluster already as asked.
func (p *Pipeline) finish(ctx context.Context, d *delivery, res *events.Result) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stored, own, err := p.store().Publish(pctx, res)
	if err != nil {
		d.log.Error("publish result failed; leaving the event for redelivery", zap.Error(err))
		p.nak(ctx, d, "", nil)
		return
	}
	p.settle(ctx, d, stored, own)
}

// settle acknowledges a message whose result is stored: it terminates it when the result
// says the event failed or was rejected (JetStream advisories then tell so), else
// acknowledges it. own is whether this worker stored that result.
func (p *Pipeline) settle(ctx context.Context, d *delivery, stored *events.Result, own bool) {
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
	}
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
	p.ack(ctx, d)
}

// publishReplay publishes a stored result again, marked replayed.
func (p *Pipeline) publishReplay(d *delivery, res *events.Result) {
	res.Replayed = true
	complete(res)
	raw, err := json.Marshal(res)
	if err == nil {
		err = p.nc.PublishMsg(&nats.Msg{Subject: events.ResultSubject(res.ID), Data: raw,
			Header: nats.Header{jetstream.ExpectedStreamHeader: []string{replayExpectedStream}}})
	}
	if err != nil {
		d.log.Warn("replay result failed (it is stored; acknowledging anyway)", zap.Error(err))
	}
}

// ack acknowledges the message of an event whose result is stored.
func (p *Pipeline) ack(ctx context.Context, d *delivery) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.msg.DoubleAck(actx); err != nil {
		d.log.Warn("acknowledge failed; the event may be delivered again (its result will be replayed)", zap.Error(err))
	}
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
