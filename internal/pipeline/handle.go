package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// handle turns one delivery into a result (or a delayed redelivery).
func (p *Pipeline) handle(ctx context.Context, msg jetstream.Msg) {
	started := time.Now()
	attempt := 1
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		attempt, seq = int(md.NumDelivered), md.Sequence.Stream
	}
	log := p.log.With(zap.String("subject", msg.Subject()), zap.Int("attempt", attempt))

	ev, err := events.Decode(msg.Subject(), msg.Headers(), msg.Data(), events.DecodeOptions{Clusters: p.cfg.Clusters})
	if err != nil {
		var rej *events.Rejection
		errors.As(err, &rej)
		res := &events.Result{ID: rej.ID, Type: rej.Type, Cluster: rej.Cluster, Status: events.StatusRejected,
			Error: err.Error(), Attempt: attempt, Worker: p.cfg.Worker, StartedAt: started}
		if res.ID == "" && events.ValidToken(msg.Headers().Get(jetstream.MsgIDHeader)) {
			// Unreadable body: publishers (the emitter) set the message id to the event id.
			res.ID = msg.Headers().Get(jetstream.MsgIDHeader)
		}
		if !events.ValidToken(res.ID) {
			// No usable id: the result still goes to the audit trail, under the message's
			// stream sequence, so the publisher can find it.
			res.ID = "invalid-seq-" + strconv.FormatUint(seq, 10)
		}
		log.Warn("event rejected", zap.String("id", res.ID), zap.Error(err))
		p.finish(ctx, msg, res, true, log)
		return
	}
	log = log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))

	if earlier, ok, err := p.earlier(ctx, ev.ID); err != nil {
		log.Warn("look up an earlier result failed; retrying later", zap.Error(err))
		_ = msg.NakWithDelay(retry.Delay(attempt))
		return
	} else if ok {
		log.Info("event already handled; publishing its result again", zap.String("status", string(earlier.Status)))
		earlier.Replayed = true
		p.finish(ctx, msg, earlier, false, log)
		return
	}

	base := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Attempt: attempt, Worker: p.cfg.Worker, StartedAt: started}
	if ev.Expired(started) {
		base.Status, base.Error = events.StatusExpired, fmt.Sprintf("expired at %s, before it ran", ev.ExpiresAt.Format(time.RFC3339))
		log.Info("event expired")
		p.finish(ctx, msg, base, false, log)
		return
	}
	h, ok := p.handlers[ev.Type]
	if !ok {
		base.Status, base.Error = events.StatusFailed, fmt.Sprintf("this worker has no handler for %s events", ev.Type)
		p.finish(ctx, msg, base, true, log)
		return
	}

	// Keep the message alive while the handler works.
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(p.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	job := &Job{Event: ev, Attempt: attempt, Worker: p.cfg.Worker, Started: started, p: p, msg: msg}
	res, err := h.Handle(hctx, job)
	stop()
	if res == nil {
		res = base
	}
	fill(res, base)
	if err != nil {
		if retry.IsTransient(err) && attempt < p.cfg.MaxAttempts {
			delay := retry.Delay(attempt)
			log.Warn("transient failure; will try again", zap.Error(err), zap.Duration("delay", delay))
			_ = msg.NakWithDelay(delay)
			return
		}
		res.Status = events.StatusFailed
		res.Error = err.Error()
		if retry.IsTransient(err) {
			res.Error = fmt.Sprintf("gave up after %d attempts: %v", attempt, err)
		}
	}
	log.Info("event handled", zap.String("status", string(res.Status)), zap.String("error", res.Error),
		zap.Int("changes", len(res.Changes)), zap.Int("skipped", len(res.Skipped)))
	p.finish(ctx, msg, res, res.Status == events.StatusFailed, log)
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

// finish publishes the result, then acknowledges (or terminates) the message. When the
// result cannot be stored the message is left for redelivery: the event is not lost, and
// the handler's next run finds the cluster already as asked.
func (p *Pipeline) finish(ctx context.Context, msg jetstream.Msg, res *events.Result, term bool, log *zap.Logger) {
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now()
	}
	if res.Changes == nil {
		res.Changes = []plan.Change{}
	}
	if res.Skipped == nil {
		res.Skipped = []plan.Skip{}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		log.Error("encode result", zap.Error(err))
		_ = msg.NakWithDelay(retry.Delay(1))
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := p.js.Publish(pctx, events.ResultSubject(res.ID), raw); err != nil {
		log.Error("publish result failed; leaving the event for redelivery", zap.Error(err))
		_ = msg.NakWithDelay(retry.Delay(1))
		return
	}
	if !res.Replayed {
		p.events.WithLabelValues(res.Type, string(res.Status)).Inc()
		p.duration.WithLabelValues(res.Type).Observe(res.FinishedAt.Sub(res.StartedAt).Seconds())
	}
	if term {
		err = msg.TermWithReason(string(res.Status))
	} else {
		err = msg.DoubleAck(pctx)
	}
	if err != nil {
		log.Warn("acknowledge failed; the event may be delivered again (its result will be replayed)", zap.Error(err))
	}
}

// earlier looks up the last result published for id.
func (p *Pipeline) earlier(ctx context.Context, id string) (*events.Result, bool, error) {
	if !events.ValidToken(id) {
		return nil, false, nil
	}
	p.mu.Lock()
	res := p.results
	p.mu.Unlock()
	msg, err := res.GetLastMsgForSubject(ctx, events.ResultSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up result of %s: %w", id, err)
	}
	var r events.Result
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return nil, false, fmt.Errorf("decode stored result of %s: %w", id, err)
	}
	return &r, true, nil
}
