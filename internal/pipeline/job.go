package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
)

// RawEvent is an event message as received: enough to decode it again (a handler that takes
// over another event's interrupted operation stores it in its journal and decodes it later).
type RawEvent struct {
	Subject string `json:"subject"`
	// Header is the message's NATS header (a map[string][]string); it implements
	// events.Header.
	Header nats.Header `json:"header,omitempty"`
	Data   []byte      `json:"data"`
	// Seq is the message's sequence in the stream KAFKAMENDER_EVENTS (zero when unknown).
	Seq uint64 `json:"seq,omitempty"`
}

// Decode decodes and validates the event again (see events.Decode).
func (r RawEvent) Decode(opts events.DecodeOptions) (*events.Event, error) {
	return events.Decode(r.Subject, r.Header, r.Data, opts)
}

// Results looks up and stores final results (stream KAFKAMENDER_RESULTS).
type Results interface {
	// Earlier returns the final result stored for event id, if any.
	Earlier(ctx context.Context, id string) (*events.Result, bool, error)
	// Publish stores res as THE final result of res.ID, atomically: only if no result is
	// stored for that id yet. It returns the result that is stored for the id afterwards
	// and whether it is res: when another result was stored first, res is dropped and the
	// stored one returned (published=false, err=nil). It fills res.FinishedAt (when zero)
	// and turns nil Changes and Skipped into empty lists, as the result format wants.
	Publish(ctx context.Context, res *events.Result) (stored *events.Result, published bool, err error)
}

// Finisher is implemented by a handler that keeps state about an event beyond one delivery
// (kafkamender's operation journal). The pipeline calls it when it ends an event without
// running Handle.
type Finisher interface {
	// Replayed: the event's result was stored already and has just been replayed; the
	// handler may release what it kept for the event (best effort), or finish what its
	// operation left to do after its result. It runs before the message is acknowledged,
	// the message kept alive meanwhile, so it may take as long as that needs: a worker
	// that stops or dies first leaves it to the next delivery.
	Replayed(ctx context.Context, job *Job)
	// Abandon: the event is given up on without running it, because it was delivered more
	// often than allowed (reason says so). The handler undoes what earlier deliveries left
	// half-done and returns the failed result to store (it may store it itself with
	// job.Publish); nil, or an error, lets the pipeline store its own.
	Abandon(ctx context.Context, job *Job, reason string) (*events.Result, error)
}

// Job is one delivery of an event to a handler.
type Job struct {
	Event *events.Event
	// Raw is the event's message as received.
	Raw     RawEvent
	Attempt int
	// LastAttempt is set when Attempt >= MaxAttempts: a transient failure now becomes a
	// "failed" result (unless the worker is stopping).
	LastAttempt bool
	Worker      string
	Started     time.Time
	// Results is where final results are looked up and stored.
	Results Results

	nc    *nats.Conn // progress reports; nil for test jobs
	alive func()     // keeps the delivered message alive; nil for test jobs

	mu        sync.Mutex
	stored    *events.Result // set by a successful Publish
	published bool           // ... which stored the job's own result
}

// NewTestJob returns a job for ev, as a pipeline would hand it to a handler on its first
// attempt, for handler unit tests that run without a pipeline: its Raw message is ev's
// envelope in structured mode (so it decodes again), its Progress does nothing, and its
// Earlier and Publish use results (nil: Earlier finds nothing and Publish fails).
func NewTestJob(ev *events.Event, results Results) *Job {
	data, _ := json.Marshal(ev.Envelope)
	return &Job{
		Event:   ev,
		Raw:     RawEvent{Subject: events.Subject(ev.Cluster, ev.Type), Header: nats.Header{}, Data: data},
		Attempt: 1,
		Worker:  "test",
		Started: time.Now(),
		Results: results,
	}
}

// Progress publishes v (JSON) on kafkamender.progress.<event id> (best effort) and tells
// JetStream the message is still being worked on.
func (j *Job) Progress(v any) {
	if j.alive != nil {
		j.alive()
	}
	if j.nc == nil {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = j.nc.Publish(events.ProgressSubject(j.Event.ID), raw)
}

// Earlier returns the final result already stored for this job's event, if any. Handlers
// call it again once they hold the cluster lock: another worker may have finished the same
// event while this one waited.
func (j *Job) Earlier(ctx context.Context) (*events.Result, bool, error) {
	if j.Results == nil {
		return nil, false, nil
	}
	return j.Results.Earlier(ctx, j.Event.ID)
}

// Publish stores res as the final result of the job's event now. Handlers call it while
// they still hold the cluster lock, before they delete their journal entry; once it
// succeeded, the pipeline only acknowledges the message after Handle returns (it
// terminates it when the stored status is rejected or failed), whatever Handle returns.
// It fills the fields of res the job knows (id, type, cluster, worker, attempt, start)
// when they are empty; semantics otherwise as Results.Publish.
func (j *Job) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if j.Results == nil {
		return nil, false, errors.New("publish result: this job has no results store")
	}
	fill(res, j.base())
	if res.ID != j.Event.ID {
		return nil, false, fmt.Errorf("publish result: its id %q is not the job's event %q", res.ID, j.Event.ID)
	}
	stored, published, err := j.Results.Publish(ctx, res)
	if err != nil {
		return nil, false, err
	}
	j.mu.Lock()
	j.stored, j.published = stored, published
	j.mu.Unlock()
	return stored, published, nil
}

// Adopt returns a Job for another event ev (whose raw message is raw), whose interrupted
// operation this job's handler takes over as attempt `attempt`: its Progress publishes on
// ev's progress subject and keeps this job's message alive; its Publish stores ev's result;
// Worker, Started and Results are this job's. Its Publish does not count as this job's:
// this job's own result is still to be published (by Handle's return or j.Publish).
// LastAttempt is false: this delivery's attempts do not bound the adopted operation.
func (j *Job) Adopt(ev *events.Event, raw RawEvent, attempt int) *Job {
	return &Job{
		Event:   ev,
		Raw:     raw,
		Attempt: attempt,
		Worker:  j.Worker,
		Started: j.Started,
		Results: j.Results,
		nc:      j.nc,
		alive:   j.alive,
	}
}

// base is the result skeleton of the job: what the pipeline knows of every result.
func (j *Job) base() *events.Result {
	return &events.Result{ID: j.Event.ID, Type: j.Event.Type, Cluster: j.Event.Cluster, Attempt: j.Attempt,
		Worker: j.Worker, StartedAt: j.Started}
}

// publishedResult returns the result stored by a successful Publish, if any, and whether
// it is the one this job published.
func (j *Job) publishedResult() (*events.Result, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stored, j.published
}
