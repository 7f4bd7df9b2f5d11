package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
)

// poison gives up on a message that must not run (again): it copies the message to the
// dead letters, stores res as the event's result unless one is stored already (by job,
// when given, or by anyone), and terminates the message. When a step fails the message is
// left for redelivery: the next delivery (or the max-deliveries advisory) does it again.
func (p *Pipeline) poison(ctx context.Context, d *delivery, res *events.Result, reason string, job *Job) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := p.deadLetter(pctx, d.raw, d.attempt, reason, res); err != nil {
		d.log.Error("dead-letter failed; leaving the event for redelivery", zap.Error(err))
		p.nak(ctx, d, "", nil)
		return
	}
	var stored *events.Result
	var own bool
	if job != nil {
		stored, own = job.publishedResult()
	}
	if stored == nil {
		var err error
		if stored, own, err = p.store().Publish(pctx, res); err != nil {
			d.log.Error("publish result failed; leaving the event for redelivery", zap.Error(err))
			p.nak(ctx, d, "", nil)
			return
		}
	}
	if own {
		p.count(stored)
	}
	if err := d.msg.TermWithReason("dead letter: " + headerValue(reason, 200)); err != nil {
		d.log.Warn("terminate failed; the event may be delivered again (its result will be replayed)", zap.Error(err))
	}
}

// abandonTimeout bounds a handler's Abandon.
const abandonTimeout = 2 * time.Minute

// abandon gives the event's handler, when it is a Finisher, the chance to undo what the
// event's earlier deliveries left half-done before the event is given up on. It returns
// the job it ran (which may have stored the result), or nil. res is updated with the
// handler's result when it returned one without storing it.
func (p *Pipeline) abandon(ctx context.Context, d *delivery, res *events.Result) (job *Job) {
	if d.ev == nil {
		return nil
	}
	f, ok := p.handlers[d.ev.Type].(Finisher)
	if !ok {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, abandonTimeout)
	defer cancel()
	stop := p.keepAlive(actx, d.msg)
	defer stop()
	job = p.job(d)
	job.last = true
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("handler panicked while abandoning the event", zap.String("panic", fmt.Sprint(v)), zap.ByteString("stack", debug.Stack()))
		}
	}()
	out, err := f.Abandon(actx, job, res.Error)
	switch {
	case err != nil:
		d.log.Error("the handler could not undo what the event left; the next operation on its cluster will", zap.Error(err))
	case out != nil:
		fill(out, res)
		*res = *out
	}
	return job
}

// unhandled is the result of an event delivered deliveries times, more than allowed,
// without a result: the workers that took it stopped each time.
func (p *Pipeline) unhandled(raw RawEvent, deliveries int, started time.Time) *events.Result {
	var id, typ, cluster string
	if ev, err := raw.Decode(p.decodeOptions()); err == nil {
		id, typ, cluster = ev.ID, ev.Type, ev.Cluster
	} else {
		id, typ, cluster = identify(raw, err)
	}
	return &events.Result{ID: id, Type: typ, Cluster: cluster, Status: events.StatusFailed,
		Error:   fmt.Sprintf("delivered %d times without a result: the worker handling it stopped each time", deliveries),
		Attempt: deliveries, Worker: p.cfg.Worker, StartedAt: started}
}

// deadLetter copies the event message raw to the dead letters of cluster, once: workers
// that dead-letter the same message store one copy (message id dead-<stream sequence>).
func (p *Pipeline) deadLetter(ctx context.Context, raw RawEvent, deliveries int, reason string, res *events.Result) error {
	id, cluster := res.ID, res.Cluster
	h := make(nats.Header, len(raw.Header)+6)
	for k, v := range raw.Header {
		if len(k) > 5 && strings.EqualFold(k[:5], "Nats-") {
			// JetStream acts on these (message id, expectations): keep them inert. Without
			// "Nats-": nats-server finds a header by searching for "<name>:", so a name
			// ending in Nats-Msg-Id may hide the real one (and the dedupe) from it.
			k = events.HeaderOriginalPrefix + k[5:]
		}
		h[k] = slices.Clone(v)
	}
	h.Set(events.HeaderOriginalSubject, raw.Subject)
	h.Set(events.HeaderStreamSequence, strconv.FormatUint(raw.Seq, 10))
	h.Set(events.HeaderDeliveries, strconv.Itoa(deliveries))
	h.Set(events.HeaderReason, headerValue(reason, 1024))
	if id != "" {
		h.Set(events.HeaderEventID, id)
	}
	if raw.Seq != 0 {
		h.Set(jetstream.MsgIDHeader, "dead-"+strconv.FormatUint(raw.Seq, 10))
	}
	subject := events.DeadSubject(cluster)
	ack, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: raw.Data})
	if err != nil {
		return fmt.Errorf("dead-letter event %d on %s: %w", raw.Seq, subject, err)
	}
	if !ack.Duplicate { // the copy another worker stored first counts there
		p.metrics.DeadLetter(cluster, res.Type)
	}
	return nil
}

// headerValue makes s fit a header value: one line, at most limit bytes.
func headerValue(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "")
	}
	return s
}

// deleteEvent deletes the event message at stream sequence seq, whose result is stored.
// A message another worker deleted meanwhile is done too.
func deleteEvent(ctx context.Context, evs jetstream.Stream, seq uint64) error {
	if err := evs.DeleteMsg(ctx, seq); err != nil {
		if _, gerr := evs.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return nil // another worker deleted it
		}
		return fmt.Errorf("delete event %d: %w", seq, err)
	}
	return nil
}
