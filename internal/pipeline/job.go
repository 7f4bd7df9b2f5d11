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
	// the message kept alive meanwhile, so it may take as long as that needs. An error
	// marked retry.InFlight (the work could not be finished now: the worker stops, the
	// lock was lost) has the event delivered again, to finish it then.
	Replayed(ctx context.Context, job *Job) error
	// Abandon: the event is given up on without running it, because it was delivered more
	// often than allowed (reason says so). The handler undoes what earlier deliveries left
	// half-done and returns the failed result to store (it may store it itself with
	// job.Publish); nil, or an error, lets the pipeline store its own. A result the
	// handler stored that is not a failure (its operation was done) is acknowledged as
	// any result, without a dead letter.
	Abandon(ctx context.Context, job *Job, reason string) (*events.Result, error)
}

// Job is one delivery of an event to a handler: the operation engine's Delivery.
type Job struct {
	event *events.Event
	// raw is the event's message as received.
	raw     RawEvent
	attempt int
	// last is set when attempt >= MaxAttempts: a transient failure now becomes a final
	// result (unless the operation is left in flight: retry.InFlight).
	last    bool
	worker  string
	started time.Time
	// results is where final results are looked up and stored.
	results Results

	nc    *nats.Conn // progress reports; nil for test jobs
	alive func()     // keeps the delivered message alive; nil for test jobs

	mu        sync.Mutex
	stored    *events.Result // set by a successful Publish
	published bool           // ... which stored the job's own result
}

// NewTestJob returns a job for ev, as a pipeline would hand it to a handler on its first
// attempt, for handler unit tests that run without a pipeline: its raw message is ev's
// envelope in structured mode (so it decodes again), its Progress does nothing, and its
// Earlier and Publish use results (nil: Earlier finds nothing and Publish fails).
func NewTestJob(ev *events.Event, results Results) *Job {
	data, _ := json.Marshal(ev.Envelope)
	return &Job{
		event:   ev,
		raw:     RawEvent{Subject: events.Subject(ev.Cluster, ev.Type), Header: nats.Header{}, Data: data},
		attempt: 1,
		worker:  "test",
		started: time.Now(),
		results: results,
	}
}

// Event is the delivered event.
func (j *Job) Event() *events.Event { return j.event }

// Raw is the event's message as received.
func (j *Job) Raw() RawEvent { return j.raw }

// Request is the event's message as received, encoded (JSON of RawEvent): a handler that
// journals it can decode the event again later (RawEvent.Decode).
func (j *Job) Request() (json.RawMessage, error) { return json.Marshal(j.raw) }

// Attempt is the delivery's number, from 1.
func (j *Job) Attempt() int { return j.attempt }

// LastAttempt is set on the event's last allowed attempt: a transient failure now becomes
// a final result (unless the operation is left in flight, retry.InFlight).
func (j *Job) LastAttempt() bool { return j.last }

// Worker is this worker's id.
func (j *Job) Worker() string { return j.worker }

// Started is when the delivery was received.
func (j *Job) Started() time.Time { return j.started }

// Progress publishes p (JSON) on kafkamender.progress.<p.ID> (the job's event when p.ID is
// empty), best effort, and tells JetStream the message is still being worked on.
func (j *Job) Progress(p events.Progress) {
	if j.alive != nil {
		j.alive()
	}
	if j.nc == nil {
		return
	}
	if p.ID == "" {
		p.ID = j.event.ID
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return
	}
	_ = j.nc.Publish(events.ProgressSubject(p.ID), raw)
}

// Announce publishes res, an interim result (events.Status.Interim) of any event, on its
// result subject for whoever waits, without storing it; best effort.
func (j *Job) Announce(res *events.Result) {
	if j.nc == nil || !res.Status.Interim() {
		return
	}
	_ = announce(j.nc, res)
}

// Earlier returns the final result already stored for this job's event, if any.
func (j *Job) Earlier(ctx context.Context) (*events.Result, bool, error) {
	if j.results == nil {
		return nil, false, nil
	}
	return j.results.Earlier(ctx, j.event.ID)
}

// Publish stores res as the final result of the job's event now. Handlers call it while
// they still hold the cluster lock, before they close their journal entry; once it
// succeeded, the pipeline acknowledges the message after Handle returns (it terminates it
// when the stored status is rejected or failed), whatever Handle returns, unless Handle
// returns an error marked retry.InFlight (the operation left work to finish: the message
// is delivered again, and the redelivery replays the stored result). It fills the fields
// of res the job knows (id, type, cluster, worker, attempt, start) when they are empty;
// semantics otherwise as Results.Publish.
func (j *Job) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if j.results == nil {
		return nil, false, errors.New("publish result: this job has no results store")
	}
	fill(res, j.base())
	if res.ID != j.event.ID {
		return nil, false, fmt.Errorf("publish result: its id %q is not the job's event %q", res.ID, j.event.ID)
	}
	stored, published, err := j.results.Publish(ctx, res)
	if err != nil {
		return nil, false, err
	}
	j.mu.Lock()
	j.stored, j.published = stored, published
	j.mu.Unlock()
	return stored, published, nil
}

// base is the result skeleton of the job: what the pipeline knows of every result.
func (j *Job) base() *events.Result {
	return &events.Result{ID: j.event.ID, Type: j.event.Type, Cluster: j.event.Cluster, Attempt: j.attempt,
		Worker: j.worker, StartedAt: j.started}
}

// publishedResult returns the result stored by a successful Publish, if any, and whether
// it is the one this job published.
func (j *Job) publishedResult() (*events.Result, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stored, j.published
}
