package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/synadia-io/orbit.go/jetstreamext"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Absorber is implemented by a handler whose result can answer later events of the same
// cluster without running them: an alert storm, the same alert re-sent with new ids
// while the first one acts.
type Absorber interface {
	// Absorber returns, for the event done whose result res is stored, a function that
	// gives the result of a later event of the same cluster that res answers, or nil
	// when that event must run. A nil function: res answers none.
	Absorber(ctx context.Context, done *events.Event, res *events.Result) (func(next *events.Event, now time.Time) *events.Result, error)
}

const (
	absorbBatch    = 1000    // events read per batch
	absorbParallel = 64      // results stored and messages deleted at once
	absorbMax      = 100_000 // events answered after one, at most
)

// absorb runs after the result of d's event is stored and before its message is
// acknowledged, so that no other event of the cluster is out: it answers the events of
// the cluster that follow it in the stream and that the handler says the result answers,
// in stream order, up to the first one that must run. Their results are stored (once, as
// any result) and their messages deleted, so the consumer skips them. Nothing here is
// needed for correctness: an event left (an error, a crash) is delivered as usual and
// finds its result stored, or runs.
func (p *Pipeline) absorb(ctx context.Context, d *delivery, stored *events.Result) {
	if d.ev == nil || !stored.Status.OK() || d.raw.Seq == 0 {
		return
	}
	a, ok := p.handlers[d.ev.Type].(Absorber)
	if !ok {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	defer p.keepAlive(actx, d.msg)()
	answer, err := a.Absorber(actx, d.ev, stored)
	if err != nil || answer == nil {
		if err != nil {
			d.log.Debug("cannot answer later events with this result", zap.Error(err))
		}
		return
	}
	filters, _ := SplitControl(ClusterFilters(p.cfg.FilterSubjects, d.ev.Cluster)) // control events end the run
	subtree := events.EventsSubjectPrefix + "." + d.ev.Cluster + ".>"
	next, total, started := d.raw.Seq+1, 0, time.Now()
	for total < absorbMax {
		msgs, err := jetstreamext.GetBatch(actx, p.js, events.EventsStream, absorbBatch,
			jetstreamext.GetBatchSeq(next), jetstreamext.GetBatchSubject(subtree))
		if err != nil {
			break
		}
		var run []*events.Result
		var seqs []uint64
		read, end := 0, false
		for sm, err := range msgs {
			if err != nil {
				end = true // no more messages, or the read failed: stop here either way
				break
			}
			read++
			next = sm.Sequence + 1
			raw := RawEvent{Subject: sm.Subject, Header: sm.Header, Data: sm.Data, Seq: sm.Sequence}
			if !slices.ContainsFunc(filters, func(f string) bool { return events.SubjectMatches(f, raw.Subject) }) {
				end = true // another fleet's: not ours to answer, nor to pass
				break
			}
			ev, err := raw.Decode(p.decodeOptions())
			if err != nil {
				end = true
				break
			}
			now := time.Now()
			res := answer(ev, now)
			if res == nil {
				end = true
				break
			}
			fill(res, &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Attempt: 1, Worker: p.cfg.Worker, StartedAt: now})
			res.FinishedAt = now // in stream order, whatever order the stores finish in
			run, seqs = append(run, res), append(seqs, sm.Sequence)
		}
		n, err := p.storeAbsorbed(actx, run, seqs)
		total += n
		if err != nil {
			d.log.Warn("answering later events with this result stopped; they are delivered as usual", zap.Error(err))
			break
		}
		if end || read < absorbBatch {
			break
		}
	}
	if total > 0 {
		d.log.Info("answered later events of the cluster with this event's result, without running them",
			zap.Int("events", total), zap.Duration("took", time.Since(started)))
	}
}

// storeAbsorbed stores the results of absorbed events and then deletes their messages
// (seqs), each only once its result is stored. It returns how many it answered so.
func (p *Pipeline) storeAbsorbed(ctx context.Context, results []*events.Result, seqs []uint64) (int, error) {
	p.mu.Lock()
	evs := p.evs
	p.mu.Unlock()
	var (
		mu   sync.Mutex
		errs []error
		done int
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, absorbParallel)
	for i, res := range results {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			stored, own, err := p.store().Publish(ctx, res)
			if err == nil {
				if own {
					p.count(stored)
				}
				err = deleteEvent(ctx, evs, seqs[i])
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				done++
			}
		})
	}
	wg.Wait()
	return done, errors.Join(errs...)
}
