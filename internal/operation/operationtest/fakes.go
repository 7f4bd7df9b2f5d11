// Package operationtest has fakes of the operation engine's ports, for tests that run the
// engine without servers: a delivery, a results store, a lock. The journal's fake is
// journal.NewMemory.
package operationtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// Results is a results store in memory: one result per id, the first stored wins.
type Results struct {
	mu     sync.Mutex
	stored map[string]*events.Result
	order  []string
	// Fail, when set, is asked before each Publish: a non-nil error fails it.
	Fail func(res *events.Result) error
}

var _ operation.Results = (*Results)(nil)

// NewResults returns an empty store.
func NewResults() *Results { return &Results{stored: map[string]*events.Result{}} }

// Earlier implements operation.Results.
func (r *Results) Earlier(_ context.Context, id string) (*events.Result, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.stored[id]
	if !ok {
		return nil, false, nil
	}
	c := *res
	return &c, true, nil
}

// Publish implements operation.Results.
func (r *Results) Publish(_ context.Context, res *events.Result) (*events.Result, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fail != nil {
		if err := r.Fail(res); err != nil {
			return nil, false, err
		}
	}
	if stored, ok := r.stored[res.ID]; ok {
		c := *stored
		return &c, false, nil
	}
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now()
	}
	c := *res
	r.stored[res.ID] = &c
	r.order = append(r.order, res.ID)
	return res, true, nil
}

// Stored returns the result stored for id (nil: none).
func (r *Results) Stored(id string) *events.Result {
	res, _, _ := r.Earlier(context.Background(), id)
	return res
}

// Count is the number of results stored.
func (r *Results) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stored)
}

// Delivery is one delivery of an event, as the pipeline would hand it to the engine.
type Delivery struct {
	Ev      *events.Event
	Raw     pipeline.RawEvent
	N       int  // the attempt
	Last    bool // the last attempt
	Name    string
	Results *Results

	mu        sync.Mutex
	progress  []events.Progress
	published *events.Result
	announced []*events.Result
}

var _ operation.Delivery = (*Delivery)(nil)

// NewDelivery returns the first delivery of ev to worker, its result stored in results.
func NewDelivery(ev *events.Event, worker string, results *Results) *Delivery {
	data, _ := json.Marshal(ev.Envelope)
	return &Delivery{Ev: ev, Raw: pipeline.RawEvent{Subject: events.Subject(ev.Cluster, ev.Type), Header: nats.Header{}, Data: data},
		N: 1, Name: worker, Results: results}
}

// Again is the next delivery of the same event (last: it is the last attempt).
func (d *Delivery) Again(last bool) *Delivery {
	return &Delivery{Ev: d.Ev, Raw: d.Raw, N: d.N + 1, Last: last, Name: d.Name, Results: d.Results}
}

// By is the same delivery handed to another worker.
func (d *Delivery) By(worker string) *Delivery {
	return &Delivery{Ev: d.Ev, Raw: d.Raw, N: d.N, Last: d.Last, Name: worker, Results: d.Results}
}

func (d *Delivery) Event() *events.Event              { return d.Ev }
func (d *Delivery) Request() (json.RawMessage, error) { return json.Marshal(d.Raw) }
func (d *Delivery) Attempt() int                      { return d.N }
func (d *Delivery) LastAttempt() bool                 { return d.Last }
func (d *Delivery) Worker() string                    { return d.Name }

// Publish implements operation.Delivery.
func (d *Delivery) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if res.Worker == "" {
		res.Worker = d.Name
	}
	if res.Attempt == 0 {
		res.Attempt = d.N
	}
	stored, published, err := d.Results.Publish(ctx, res)
	if err == nil {
		d.mu.Lock()
		d.published = stored
		d.mu.Unlock()
	}
	return stored, published, err
}

// Progress implements operation.Delivery.
func (d *Delivery) Progress(p events.Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.progress = append(d.progress, p)
}

// Announce implements operation.Delivery: the interim results are kept (Announced).
func (d *Delivery) Announce(res *events.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := *res
	d.announced = append(d.announced, &c)
}

// Announced returns the interim results announced so far.
func (d *Delivery) Announced() []*events.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*events.Result(nil), d.announced...)
}

// Reports returns the progress reports so far.
func (d *Delivery) Reports() []events.Progress {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]events.Progress(nil), d.progress...)
}

// Published is the result this delivery stored (nil: none).
func (d *Delivery) Published() *events.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.published
}

// Locker is a lock per cluster in memory. A lease can be lost on demand (Lose), as a lock
// whose session expired.
type Locker struct {
	mu   sync.Mutex
	held map[string]*Lease
	// Wait is how long Acquire waits for a held lock before it gives up (busy). Default 0:
	// at once.
	Wait time.Duration
	// Acquired counts the leases taken.
	Acquired int
}

var _ operation.Locker = (*Locker)(nil)

// NewLocker returns a Locker with no lock held.
func NewLocker() *Locker {
	return &Locker{held: map[string]*Lease{}}
}

// Acquire implements operation.Locker.
func (l *Locker) Acquire(ctx context.Context, cluster, event string) (operation.Lease, error) {
	deadline := time.Now().Add(l.Wait)
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.held[cluster] != nil {
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("cluster %s held for event %s: %w", cluster, l.held[cluster].Event, operation.ErrBusy)
		}
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
		l.mu.Lock()
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	lease := &Lease{l: l, Cluster: cluster, Event: event, ctx: lctx, cancel: cancel}
	l.held[cluster] = lease
	l.Acquired++
	return lease, nil
}

// Holder is the lease held on cluster, or nil.
func (l *Locker) Holder(cluster string) *Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[cluster]
}

// ErrLost is the error of a lost Lease.
var ErrLost = errors.New("lock lost (operationtest)")

// Lease is a Locker's lock held.
type Lease struct {
	l       *Locker
	Cluster string
	Event   string
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu  sync.Mutex
	err error
}

var _ operation.Lease = (*Lease)(nil)

func (s *Lease) Context() context.Context { return s.ctx }

func (s *Lease) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Release implements operation.Lease.
func (s *Lease) Release(context.Context) error {
	s.end(errors.New("lock released"))
	return nil
}

// Lose loses the lease, as when its session expires: its context ends, Err says so, and
// the lock is free for others.
func (s *Lease) Lose() { s.end(ErrLost) }

func (s *Lease) end(why error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = why
	}
	s.mu.Unlock()
	s.cancel(why)
	s.l.mu.Lock()
	if s.l.held[s.Cluster] == s {
		delete(s.l.held, s.Cluster)
	}
	s.l.mu.Unlock()
}
