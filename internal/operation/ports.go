package operation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
)

// The engine's ports: narrow interfaces for what it uses, each implemented elsewhere
// (pipeline.Job, journal.Store, the lock backends, package handlers' tasks) and by fakes
// in this package's tests.

// Delivery is one delivery of an event (pipeline.Job implements it).
type Delivery interface {
	Event() *events.Event
	// Request is the delivered message, encoded: journaled, so that whoever holds the
	// cluster's lock next can decode the event again (Config.Decode).
	Request() (json.RawMessage, error)
	Attempt() int
	// LastAttempt: a transient failure now is final.
	LastAttempt() bool
	Worker() string
	// Publish stores res as the event's one result (see Results.Publish); once it has
	// stored one, the delivery's message is settled by what is stored, whatever Handle
	// returns (unless the error is retry.InFlight).
	Publish(ctx context.Context, res *events.Result) (stored *events.Result, published bool, err error)
	// Progress publishes a progress report on the subject of its ID, and keeps the
	// delivery's message alive.
	Progress(p events.Progress)
	// Announce publishes an interim result (events.Status.Interim) of any event on its
	// result subject, without storing it; best effort.
	Announce(res *events.Result)
}

// Results looks up and stores final results (pipeline.Results implements it): the engine
// looks up any event's, and stores another event's when it finishes its orphan.
type Results interface {
	Earlier(ctx context.Context, id string) (*events.Result, bool, error)
	Publish(ctx context.Context, res *events.Result) (stored *events.Result, published bool, err error)
}

// Lease is a cluster's lock held for one delivery (locks.Lease implements it): its
// context ends as soon as the lock is lost or released, Err is nil while it is held.
type Lease interface {
	Context() context.Context
	Err() error
	Release(ctx context.Context) error
}

// Locker takes a cluster's lock for an event. An Acquire that gave up while someone else
// held the lock returns an error that wraps ErrBusy.
type Locker interface {
	Acquire(ctx context.Context, cluster, event string) (Lease, error)
}

// Journal is the operation journal (*journal.Store): one entry per cluster, written by
// the holder of its lock only (see package journal).
type Journal interface {
	Get(ctx context.Context, cluster string) (*journal.Record, error)
	Begin(ctx context.Context, alive func() error, prev *journal.Record, e journal.Entry) (*journal.Op, error)
	TakeOver(ctx context.Context, alive func() error, r *journal.Record, worker string, attempt int) (*journal.Op, error)
	Close(ctx context.Context, r *journal.Record) error
}

// Guard is the guardrails: limits every event must stay within.
type Guard interface {
	// Refuses checks what needs no plan: the source allowed to send the event type, the
	// topics it names. A refusal is a rejection.
	Refuses(ev *events.Event) error
	// Partitions refuses a plan that changes more partitions than allowed (a dry run's
	// plan too).
	Partitions(n int) error
	// Count records that ev's operation begins writing to its cluster, or refuses it over
	// the cluster's cap of operations per hour; alive reports whether the caller still
	// holds the cluster's lock, before each write. A refusal is a rejection.
	Count(ctx context.Context, alive func() error, ev *events.Event) error
}

// Tasks builds the task of each event (package handlers).
type Tasks interface {
	// Answer answers an event without the lock when it can (an alert for a broker shed
	// within its cool-down); nil: go on.
	Answer(ctx context.Context, d Delivery) (*events.Result, error)
	// New builds the task of a fresh event, checked against the configuration and the
	// cluster: an error is a rejection (nothing changed) or transient. It may fill res
	// (the strategy, the reason).
	New(ctx context.Context, ev *events.Event, res *events.Result) (Task, error)
	// Resume builds the task of a journaled operation from its entry, for whatever the
	// engine decides (carry on, verify, roll back, await): ev is its event, whose Payload
	// is nil when its request no longer decodes (the engine then only verifies, rolls back
	// or awaits, from the entry alone). It
	// refuses nothing the cluster no longer has (a deleted topic, a broker gone): an error
	// is transient, the cluster unreachable.
	Resume(ctx context.Context, ev *events.Event, e *journal.Entry, res *events.Result) (Task, error)
}

// Prefetcher is implemented by Tasks that can start, in the background, the first read a
// fresh plan of an event makes, so that it overlaps the engine's taking of the lock and
// read of the journal (their round trips off the path to the first write). The engine
// starts it as it asks for the lock and hands it to the run (Run.Prefetched) only when the
// lock was taken at once (within prefetchLockWait: no operation of the fleet ran between
// the read and this turn) and the event runs fresh with nothing written to the cluster
// since: otherwise it is discarded, and the plan reads. The read is then as new as one
// made under the lock but for the lock's own round trips, and the plan holds it, like any
// read, to what the cluster's last operation left (Run.Floor).
type Prefetcher interface {
	// Prefetch starts the read for ev, or returns nil when ev's plan has none to start. It
	// must not block.
	Prefetch(ctx context.Context, ev *events.Event) Prefetch
}

// Prefetch is a read started by a Prefetcher, for the task's plan to use.
type Prefetch interface {
	// Discard stops the read if it still runs and lets it go.
	Discard()
}

// Surveyor is implemented by Tasks that can read the state a plan depends on (package
// handlers): the engine needs it for plans that wait for approval.
type Surveyor interface {
	// Survey reads, afresh, the fingerprint of the state the changes depend on (each
	// touched partition, the configs the plans read, the brokers), and, when bytes is
	// set, the bytes their new replicas copy (else 0). floor is what the cluster's last
	// operation left (reads must show at least that). An error is transient.
	Survey(ctx context.Context, cluster string, changes []events.Change, floor []model.Seen, bytes bool) (approval.Fingerprint, int64, error)
}

// Plans stores the plans that wait for approval (*approval.Store).
type Plans interface {
	Get(ctx context.Context, cluster, id string) (*approval.Plan, uint64, error)
	Create(ctx context.Context, p *approval.Plan) (stored *approval.Plan, created bool, err error)
	Update(ctx context.Context, p *approval.Plan, rev uint64) (uint64, error)
	List(ctx context.Context, clusters ...string) ([]*approval.Plan, error)
}

// Task is one event's operation.
type Task interface {
	// Plan reads the cluster and plans, writing nothing. For a fresh run (dry false) it may
	// first wait for what blocks it (partitions under reassignment), and it may answer the
	// event at once by setting r.Result.Status (an alert within its cool-down).
	Plan(ctx context.Context, r *Run, dry bool) (*Planned, error)
	// Apply carries the journaled operation (r.Entry()) out from wherever the cluster
	// stands: fresh, or left by an earlier attempt or another worker. It compares the plan
	// with fresh reads, never trusts the step. It returns at once, writing nothing, when
	// ctx ends.
	Apply(ctx context.Context, r *Run) error
	// Verify reads the cluster afresh and fills r.Result: the changes the event made
	// across all attempts (what differs from the state before the first attempt), and the
	// partitions skipped with their reasons; it records in r.Entry().Left what it read of
	// the changed partitions. It returns how many planned partitions show as planned.
	Verify(ctx context.Context, r *Run) (int, error)
	// Rollback undoes what is half-done after a final failure, says what it did, and sets
	// r.Result.Changes to the changes that remain (a fresh read). Work the cluster cannot
	// cancel is left running: the task sets the entry's step to journal.StepAwaiting and
	// must then be a Detacher.
	Rollback(ctx context.Context, r *Run) (string, error)
}

// Detacher is a task whose operation can outlive its result (journal.StepAwaiting).
type Detacher interface {
	// AwaitDetached waits, the lock held, until the work the operation left running has
	// ended, then puts back what it kept in place for it (throttles). It returns early,
	// writing nothing, when ctx ends: the next holder of the lock calls it again.
	AwaitDetached(ctx context.Context, r *Run) error
}

// Planned is a plan as a task made it: what the event would change, and what it found
// already so or leaves alone.
type Planned struct {
	Changes []events.Change
	Skipped []events.Skip
	Noop    []events.TopicPartition
	// Deadline bounds the operation across attempts (zero: none).
	Deadline time.Time
	// Notes explain the plan in words, for the result.
	Notes []string
}
