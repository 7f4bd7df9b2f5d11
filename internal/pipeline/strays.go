package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Strays. Each cluster's events go to that cluster's consumer, so an event about a cluster
// no fleet serves, or on a malformed subject, matches no consumer of the work-queue stream
// and would stay there unanswered. Every worker looks for such events each strayInterval
// (the stream's subjects against every consumer's filters, those of other fleets
// included) and rejects one that has stayed unmatched for Config.StrayGrace, which gives
// a fleet that is starting the time to create its consumers: it stores the rejected
// result (once, whichever worker is first) and deletes the message.

const (
	strayInterval = time.Second
	strayBatch    = 256 // events rejected per subject and sweep, at most
)

// sweepStrays rejects events no consumer takes until ctx ends.
func (p *Pipeline) sweepStrays(ctx context.Context) {
	firstSeen := map[uint64]time.Time{} // stream sequence: when first seen unmatched
	t := time.NewTicker(strayInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.sweep(ctx, firstSeen); err != nil && ctx.Err() == nil {
			p.log.Debug("look for events no consumer takes", zap.Error(err))
		}
	}
}

// sweep does one round of sweepStrays.
func (p *Pipeline) sweep(ctx context.Context, firstSeen map[uint64]time.Time) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p.mu.Lock()
	evs := p.evs
	p.mu.Unlock()
	var filters []string
	listed := 0
	lister := evs.ListConsumers(sctx)
	for ci := range lister.Info() {
		listed++
		filters = append(filters, consumerFilters(ci.Config)...)
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list consumers: %w", err)
	}
	info, err := evs.Info(sctx, jetstream.WithSubjectFilter(events.EventsSubjects))
	if err != nil {
		return fmt.Errorf("stream info: %w", err)
	}
	// On a NATS cluster electing leaders, the list leaves out the consumers it cannot
	// describe now (the server names them missing; nats.go drops them): an event of theirs
	// would look taken by nobody and be rejected untruly. A list shorter than the stream's
	// count of consumers decides nothing.
	if listed < info.State.Consumers {
		return fmt.Errorf("list consumers: %d listed of the stream's %d; not looking for strays this round", listed, info.State.Consumers)
	}
	now := time.Now()
	seen := map[uint64]bool{}
	defer func() {
		for seq := range firstSeen {
			if !seen[seq] {
				delete(firstSeen, seq)
			}
		}
	}()
	for subject := range info.State.Subjects {
		if slices.ContainsFunc(filters, func(f string) bool { return events.SubjectMatches(f, subject) }) {
			continue
		}
		if p.ownSubject(subject) {
			// This worker's own consumer takes it, whatever the list said: during a NATS
			// leader election the list can leave that consumer out.
			continue
		}
		next := info.State.FirstSeq
		for range strayBatch {
			sm, err := evs.GetMsg(sctx, next, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return fmt.Errorf("read an event on %s: %w", subject, err)
			}
			next = sm.Sequence + 1
			seen[sm.Sequence] = true
			first, ok := firstSeen[sm.Sequence]
			if !ok {
				firstSeen[sm.Sequence] = now
				continue
			}
			if now.Sub(first) < p.cfg.StrayGrace {
				continue
			}
			if err := p.rejectStray(sctx, evs, sm); err != nil {
				return err
			}
			delete(firstSeen, sm.Sequence)
		}
	}
	return nil
}

// rejectStray stores the rejected result of an event no consumer takes and deletes it.
func (p *Pipeline) rejectStray(ctx context.Context, evs jetstream.Stream, sm *jetstream.RawStreamMsg) error {
	raw := RawEvent{Subject: sm.Subject, Header: sm.Header, Data: sm.Data, Seq: sm.Sequence}
	res := &events.Result{Status: events.StatusRejected, Worker: p.cfg.Worker, Attempt: 1, StartedAt: time.Now()}
	if ev, err := raw.Decode(p.decodeOptions()); err != nil {
		res.ID, res.Type, res.Cluster = identify(raw, err)
		res.Error = err.Error()
	} else {
		res.ID, res.Type, res.Cluster = ev.ID, ev.Type, ev.Cluster
		res.Error = fmt.Sprintf("no worker takes events on subject %s: no consumer of stream %s matches it (no fleet lists cluster %q with a nats.subjects entry that covers it)",
			raw.Subject, events.EventsStream, ev.Cluster)
	}
	stored, own, err := p.store().Publish(ctx, res)
	if err != nil {
		return fmt.Errorf("store the result of event %d: %w", raw.Seq, err)
	}
	if own {
		p.count(stored)
		p.log.Warn("event rejected: no consumer takes it", zap.String("subject", raw.Subject), zap.Uint64("seq", raw.Seq),
			zap.String("id", stored.ID), zap.String("error", stored.Error))
	}
	return deleteEvent(ctx, evs, raw.Seq)
}

// ownSubject reports whether subject is an event subject this worker's own consumers take:
// a cluster it serves and a type it has a handler for. Such an event is never a stray.
func (p *Pipeline) ownSubject(subject string) bool {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0]+"."+parts[1] != events.EventsSubjectPrefix {
		return false
	}
	return slices.Contains(p.cfg.Clusters, parts[2]) && p.handlers[parts[3]] != nil
}
