// Package journal is kafkamender's operation journal: for each Kafka cluster, the record of
// the one operation in hand on it — which event, what was planned, which reassignments were
// started, which throttle keys were set and what they held before, how far it got — kept in
// a JetStream key-value bucket (Bucket, key = cluster name) beside the events and results.
//
// # Why
//
// A worker can die at any step of an operation (kill -9, OOM, a node drained). Kafka keeps
// going without it: reassignments keep copying, throttles stay set, a reordered replica list
// waits for its election. Everything the next worker needs to finish or undo the operation
// must therefore live outside the worker's memory, written before the cluster write it
// describes. That is this journal.
//
// # Rules
//
//   - One entry per cluster. Only the holder of the cluster's lock writes it: Begin records
//     a new operation (it fails when the entry is open: that operation must be resolved
//     first), TakeOver makes the caller the writer of an entry left by a holder that is
//     gone, Save updates it, Close ends it once the operation's result is stored.
//   - A closed entry stays, slimmed to what the operation left on the cluster (Left, as its
//     verification read it): the next operation of the cluster, on whichever worker, reads
//     the cluster until it shows at least that (a broker's metadata may lag), and begins
//     over it.
//   - Writes are revision-checked (compare-and-set on the entry's last revision): a worker
//     that lost its lock and did not notice yet cannot overwrite the entry once the next
//     holder took it over; its write fails with ErrFenced, and it must stop.
//   - Before every write the lease check given to Begin or TakeOver runs: once the holder knows
//     its lock is lost, it writes nothing, not even to the journal.
//   - A journal write happens before the cluster write it describes. So the entry may claim
//     a write that never happened (the worker died in between), never the reverse: whoever
//     resumes compares the entry with a fresh read of the cluster and acts on what it finds.
//
// # Size
//
// An entry has no size limit below MaxEntryBytes (a shed of 25,000 partitions with its
// request of up to 1 MiB is about 5 MiB), while a NATS message holds at most the
// server's max_payload (1 MiB by default). An entry too large for one message is stored
// in chunks under keys of its own, and the cluster's key holds a small head naming them:
// writes stay one compare-and-set of the cluster's key, and a reader gets an entry whole
// or not at all (see chunked). What cannot be stored is refused at plan time: CheckFits.
//
// How an entry is resumed, finished or rolled back is described in package operation.
package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// Bucket is the JetStream key-value bucket of the journal; its keys are cluster names.
const Bucket = events.JournalBucket

// Step is how far an operation got. Steps only inform (operators, logs, the choice between
// finishing and rolling back); the truth of what the cluster holds comes from reading it.
type Step string

const (
	StepPlanned     Step = "planned"    // plan recorded, nothing written to the cluster yet
	StepReordering  Step = "reordering" // reorders sent (or about to be)
	StepElecting    Step = "electing"   // reorders done; preferred elections sent (or about to be)
	StepThrottling  Step = "throttling" // throttle keys recorded, being set
	StepCopying     Step = "copying"    // reassignments submitted, replicas copying
	StepRollingBack Step = "rolling-back"
	StepDone        Step = "done" // the cluster holds the outcome; the result is being published
	// StepClosed: the operation is over and its result stored; the entry keeps only what it
	// left (Entry.Left).
	StepClosed Step = "closed"
	// StepAwaiting: a final failure left reassignments running that the cluster cannot
	// cancel (Kafka before 2.4); the result is published, and the entry stays, with the
	// throttles they need, until they end and the throttles are put back.
	StepAwaiting Step = "awaiting-reassignments"
)

// Entry is the record of one operation on one cluster.
type Entry struct {
	Event   string `json:"event"`
	Type    string `json:"type"`
	Cluster string `json:"cluster"`
	// Request is the event's message as received (subject, headers, body), so that any
	// holder of the lock can decode the event again and finish its operation.
	Request json.RawMessage `json:"request"`
	// PlanID, for an approved plan (package approval), names it: its event's result says it.
	PlanID string `json:"plan_id,omitempty"`
	// Worker and Attempt are the writer of the last revision and its delivery attempt.
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
	// Started is when the first attempt started under the lock; Updated the last write.
	Started time.Time `json:"started_at"`
	Updated time.Time `json:"updated_at"`
	// Deadline bounds the whole operation across attempts (replication-factor changes).
	Deadline time.Time `json:"deadline,omitzero"`
	Strategy string    `json:"strategy"`
	Step     Step      `json:"step"`

	// Changes is the plan: every partition the event changes, with its state before the
	// first attempt (ReplicasBefore, LeaderBefore) and the state asked for (…After).
	Changes []plan.Change          `json:"changes"`
	Skipped []plan.Skip            `json:"skipped,omitempty"`
	Noop    []model.TopicPartition `json:"noop,omitempty"`
	// Reassignments lists the partitions whose reassignment (to Changes' ReplicasAfter) was
	// submitted by this operation: they are ours, not someone else's, when found running.
	// For partition-offline, the partitions whose election was sent: a leader found there
	// afterwards is ours.
	Reassignments []model.TopicPartition `json:"reassignments,omitempty"`
	// Throttles are the throttle keys this operation sets, with the values before and ours;
	// ThrottlesKept the keys found holding someone else's value, left alone.
	Throttles     []events.ThrottleKey  `json:"throttles,omitempty"`
	ThrottlesKept []events.KeptThrottle `json:"throttles_kept,omitempty"`
	// Nudge is the zk-nudge strategy's progress (topic znodes rewritten, failover).
	Nudge *model.NudgeState `json:"nudge,omitempty"`
	// Notes are remarks for the result (what was kept, rolled back, taken over).
	Notes []string `json:"notes,omitempty"`
	// Floor is what the cluster's previous operation left (its entry's Left): the reads of
	// this one must show at least that.
	Floor []model.Seen `json:"floor,omitempty"`
	// Left is what the operation left on the cluster, as the last fresh read showed each
	// partition it changed: recorded with StepDone, kept when the entry is closed.
	Left []model.Seen `json:"left,omitempty"`
}

// Open reports whether the entry is an operation in hand (not closed).
func (e *Entry) Open() bool { return e.Step != StepClosed }

// Submitted reports whether the reassignment of tp was submitted by this operation.
func (e *Entry) Submitted(tp model.TopicPartition) bool {
	for _, s := range e.Reassignments {
		if s == tp {
			return true
		}
	}
	return false
}

// Record is an entry as stored, with its revision.
type Record struct {
	Entry
	Revision uint64
}

// Errors.
var (
	// ErrExists: Begin found an entry for the cluster (an operation to resolve first:
	// transient, the next attempt resolves it).
	ErrExists = retry.Transient(errors.New("the cluster has an operation in the journal already"))
	// ErrFenced: the entry changed since this holder last wrote it (another holder adopted
	// it): this holder has lost its lock and must stop.
	ErrFenced = &fencedError{}
)

type fencedError struct{}

func (*fencedError) Error() string {
	return "journal entry changed by another holder since our last write: the lock is lost"
}

// Transient: the event is worth trying again (the new holder finishes the operation).
func (*fencedError) Transient() bool { return true }

// Store is the journal: entries kept, one per cluster, in a revision-checked key-value
// store (a JetStream bucket, or memory for tests). An entry of any size up to
// MaxEntryBytes is stored: one too large for one message goes in chunks (see chunked).
type Store struct{ kv kv }

// New returns the journal in the JetStream key-value bucket Bucket, bound (and created
// when missing) on first use, so that a worker starts while NATS is still unreachable.
func New(js jetstream.JetStream) *Store { return newStore(newNatsKV(js)) }

// NewReader returns the journal for reading only (Get, List): the bucket is bound if it
// exists, never created or changed; a missing bucket is an error that wraps
// jetstream.ErrBucketNotFound.
func NewReader(js jetstream.JetStream) *Store {
	return newStore(newNatsKV(js, kvbucket.Existing()))
}

func newStore(kv kv) *Store { return &Store{kv: &chunked{kv: kv}} }

// Get returns the cluster's entry (open or closed), or nil when it has none.
func (s *Store) Get(ctx context.Context, cluster string) (*Record, error) {
	val, rev, err := s.kv.get(ctx, cluster)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("read journal of cluster %s: %w", cluster, err))
	}
	r := &Record{Revision: rev}
	if err := json.Unmarshal(val, &r.Entry); err != nil {
		return nil, fmt.Errorf("decode journal of cluster %s (revision %d): %w", cluster, rev, err)
	}
	return r, nil
}

// List returns every entry, open or closed (for operators and tests).
func (s *Store) List(ctx context.Context) ([]*Record, error) {
	// Keys are cluster names, one token each: "*" lists them and never a chunk.
	keys, err := s.kv.keys(ctx, "*")
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("list journal: %w", err))
	}
	var out []*Record
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		r, err := s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Close ends r, an entry whose operation is over (step done) and whose result is stored,
// if it is unchanged since it was read. It needs no lock: nobody needs more of the entry
// than what it left, and a holder that took it over meanwhile changed its revision.
func (s *Store) Close(ctx context.Context, r *Record) error {
	if r.Step != StepDone {
		return fmt.Errorf("journal of cluster %s: close an entry at step %s: only finished ones", r.Cluster, r.Step)
	}
	o := &Op{s: s, key: r.Cluster, rev: r.Revision, alive: func() error { return nil }, Entry: r.Entry}
	return o.Close(ctx)
}

// Op is the journal entry of the operation in hand, written by the lock holder only.
type Op struct {
	s     *Store
	key   string
	rev   uint64
	alive func() error
	// Entry is the entry as last written (or about to be: change it, then Save).
	Entry Entry
}

// Begin records a new operation for e.Cluster over prev, the cluster's entry as read under
// the lock: nil (none) or closed. alive reports whether the caller still holds the
// cluster's lock (nil) or why not; it runs before every write.
func (s *Store) Begin(ctx context.Context, alive func() error, prev *Record, e Entry) (*Op, error) {
	if prev != nil && prev.Open() {
		return nil, fmt.Errorf("journal of cluster %s: event %s's operation is open: %w", e.Cluster, prev.Event, ErrExists)
	}
	o := &Op{s: s, key: e.Cluster, alive: alive, Entry: e}
	if o.Entry.Started.IsZero() {
		o.Entry.Started = time.Now().UTC()
	}
	if o.Entry.Step == "" {
		o.Entry.Step = StepPlanned
	}
	if prev == nil {
		return o, o.write(ctx, "write", func(raw []byte) (uint64, error) { return s.kv.create(ctx, o.key, raw) })
	}
	o.rev = prev.Revision
	return o, o.Save(ctx)
}

// TakeOver makes the caller the writer of r (an entry whose holder is gone, or this
// event's own from an earlier attempt), as worker on its attempt-th try: the entry is
// rewritten at once, so a former holder that still runs unaware of its lost lock is fenced
// from then on.
func (s *Store) TakeOver(ctx context.Context, alive func() error, r *Record, worker string, attempt int) (*Op, error) {
	o := &Op{s: s, key: r.Cluster, rev: r.Revision, alive: alive, Entry: r.Entry}
	o.Entry.Worker, o.Entry.Attempt = worker, attempt
	if err := o.Save(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// Save writes the entry, only if nobody else wrote it since this Op last did.
func (o *Op) Save(ctx context.Context) error {
	return o.write(ctx, "write", func(raw []byte) (uint64, error) { return o.s.kv.update(ctx, o.key, raw, o.rev) })
}

// Close ends the operation, its result stored: the entry keeps only what the operation
// left on the cluster (Left), for the next operation to read the cluster at least as new.
func (o *Op) Close(ctx context.Context) error {
	e := o.Entry
	o.Entry = Entry{Event: e.Event, Type: e.Type, Cluster: e.Cluster, Worker: e.Worker, Attempt: e.Attempt,
		Started: e.Started, Strategy: e.Strategy, Step: StepClosed, Left: e.Left}
	if err := o.Save(ctx); err != nil {
		o.Entry = e
		return err
	}
	return nil
}

// write encodes the entry and stores it with put, checking the lock first.
func (o *Op) write(ctx context.Context, verb string, put func(raw []byte) (uint64, error)) error {
	if err := o.alive(); err != nil {
		return fmt.Errorf("%s journal of cluster %s: %w", verb, o.key, err)
	}
	o.Entry.Updated = time.Now().UTC()
	raw, err := json.Marshal(o.Entry)
	if err != nil {
		return fmt.Errorf("encode journal of cluster %s: %w", o.key, err)
	}
	if len(raw) > MaxEntryBytes {
		return fmt.Errorf("%s journal of cluster %s: %w", verb, o.key, &tooLarge{what: "the entry", size: len(raw), max: MaxEntryBytes})
	}
	rev, err := put(raw)
	switch {
	case errors.Is(err, errExists):
		return fmt.Errorf("journal of cluster %s: %w", o.key, ErrExists)
	case errors.Is(err, errRevision), errors.Is(err, errNotFound):
		return fmt.Errorf("%s journal of cluster %s: %w", verb, o.key, ErrFenced)
	case err != nil:
		return retry.Transient(fmt.Errorf("%s journal of cluster %s: %w", verb, o.key, err))
	}
	o.rev = rev
	return nil
}

// Revision is the revision this Op last wrote.
func (o *Op) Revision() uint64 { return o.rev }

// Note adds a remark for the result, once.
func (o *Op) Note(s string) {
	for _, n := range o.Entry.Notes {
		if n == s {
			return
		}
	}
	o.Entry.Notes = append(o.Entry.Notes, s)
}
