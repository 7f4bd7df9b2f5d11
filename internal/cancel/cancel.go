// Package cancel keeps the requests to cancel events (operation-cancel) and answers the
// operation-cancel events. A request is a key of the JetStream key-value bucket
// events.CancelsBucket, <cluster>.<event id>, kept for KeepFor: the engine (package
// operation), which alone writes to a cluster under its lock, reads it before an event
// runs and every second while its operation runs, and carries the cancel out (see
// operation.Cancels).
package cancel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// KeepFor is how long a request to cancel is kept: an event that waits longer than that
// (behind a pause) runs after all.
const KeepFor = 7 * 24 * time.Hour

// DefaultWait is how long an operation-cancel waits for its target's result before it
// answers.
const DefaultWait = 15 * time.Second

// Request is a request to cancel an event, the value of its key.
type Request struct {
	Cluster string `json:"cluster"`
	// Event is the id of the event to cancel; CancelEvent the operation-cancel's.
	Event       string    `json:"event"`
	By          string    `json:"by"`
	CancelEvent string    `json:"cancel_event"`
	Reason      string    `json:"reason,omitempty"`
	At          time.Time `json:"at"`
}

// String says the request in words, as the cancelled result says it.
func (r *Request) String() string {
	s := fmt.Sprintf("by %s at %s (event %s)", r.By, r.At.UTC().Format(time.RFC3339), r.CancelEvent)
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// Store reads and writes the requests.
type Store struct {
	bucket *kvbucket.Bucket
}

// New returns the requests of the fleet on js; the bucket is created on first use.
func New(js jetstream.JetStream) *Store {
	return &Store{bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      events.CancelsBucket,
		Description: "kafkamender: requests to cancel events (operation-cancel), key = <cluster>.<event id>",
		History:     1,
		TTL:         KeepFor,
		Storage:     jetstream.FileStorage,
		MaxBytes:    16 << 20, // full: a cancel fails and says so, nothing dropped
	})}
}

func key(cluster, id string) string { return cluster + "." + id }

// Get returns the request to cancel event id of cluster, nil when there is none.
func (s *Store) Get(ctx context.Context, cluster, id string) (*Request, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key(cluster, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("read the request to cancel %s: %w", id, err))
	}
	var r Request
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		// Unreadable, but there: the event is cancelled all the same.
		return &Request{Cluster: cluster, Event: id, By: "unknown", CancelEvent: "unknown",
			Reason: fmt.Sprintf("the request stored in %s is unreadable: %v", events.CancelsBucket, err), At: e.Created()}, nil
	}
	return &r, nil
}

// Cancelled implements operation.Cancels.
func (s *Store) Cancelled(ctx context.Context, cluster, id string) (string, error) {
	r, err := s.Get(ctx, cluster, id)
	if err != nil || r == nil {
		return "", err
	}
	return r.String(), nil
}

// Put records r; a request for the same event stays as it was (the first cancel counts).
func (s *Store) Put(ctx context.Context, r Request) (*Request, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if _, err := kv.Create(ctx, key(r.Cluster, r.Event), raw); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return s.Get(ctx, r.Cluster, r.Event)
		}
		return nil, retry.Transient(fmt.Errorf("store the request to cancel %s: %w", r.Event, err))
	}
	return &r, nil
}

// Guard refuses events the guardrails do not allow (handlers.Handlers implements it).
type Guard interface {
	Refuses(ev *events.Event) error
}

// Handler handles operation-cancel events (pipeline.Handler). It takes no lock: it
// records the request, which the holder of the cluster's lock carries out, and waits up
// to Wait for the target's result to say what came of it.
type Handler struct {
	Store   *Store
	Results pipeline.Results
	Guard   Guard // nil: any source
	Wait    time.Duration
	Logger  *zap.Logger
}

// Handle records the request to cancel and answers with what came of it.
func (h *Handler) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	ev := job.Event()
	req, ok := ev.Payload.(*events.OperationCancel)
	if !ok {
		return nil, fmt.Errorf("cancel handler: event type %s is not operation-cancel", ev.Type)
	}
	res := &events.Result{Status: events.StatusSucceeded, Reason: req.Reason}
	if h.Guard != nil {
		if err := h.Guard.Refuses(ev); err != nil {
			res.Status, res.Error = events.StatusRejected, err.Error()
			return res, nil
		}
	}
	if req.ID == ev.ID {
		res.Status, res.Error = events.StatusRejected, "data.id: "+req.ID+" is this event's own id: name the event to cancel"
		return res, nil
	}
	if earlier, ok, err := h.Results.Earlier(ctx, req.ID); err != nil {
		return nil, retry.Transient(err)
	} else if ok {
		res.Status, res.Note = events.StatusNoop, fmt.Sprintf("event %s ended already (%s): nothing to cancel", req.ID, earlier.Status)
		return res, nil
	}
	r, err := h.Store.Put(ctx, Request{Cluster: ev.Cluster, Event: req.ID, By: ev.Source, CancelEvent: ev.ID, Reason: req.Reason, At: time.Now()})
	if err != nil {
		return nil, err
	}
	log := h.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log.Warn("cancel requested", zap.String("cluster", ev.Cluster), zap.String("target", req.ID), zap.String("by", ev.Source), zap.String("id", ev.ID))
	if r.CancelEvent != ev.ID {
		res.AddNote(fmt.Sprintf("event %s was cancelled already %s", req.ID, r.String()))
	}
	wait := h.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	deadline := time.Now().Add(wait)
	for {
		earlier, ok, err := h.Results.Earlier(ctx, req.ID)
		if err == nil && ok {
			if earlier.Status == events.StatusCancelled {
				res.AddNote(fmt.Sprintf("event %s cancelled: %s", req.ID, earlier.Error))
			} else {
				res.Status = events.StatusNoop
				res.AddNote(fmt.Sprintf("event %s ended before the cancel took effect (%s): its result stands", req.ID, earlier.Status))
			}
			return res, nil
		}
		if time.Now().After(deadline) {
			res.AddNote(fmt.Sprintf("cancel of event %s recorded; it has no result after %s (it waits in the queue or behind a pause, or copies the cluster cannot cancel are waited out): it gets the result cancelled when a worker takes it up (kafkamender.results.%s)", req.ID, wait, req.ID))
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, retry.Transient(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
