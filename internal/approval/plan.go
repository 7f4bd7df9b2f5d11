package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// State is where a plan stands.
type State string

const (
	Awaiting  State = "awaiting"  // waits for plan-approved or plan-denied
	Approved  State = "approved"  // approved: it runs (or ran) under its approval event
	Denied    State = "denied"    // denied: its event ended denied
	Expired   State = "expired"   // not answered in time: its event ended expired
	Stale     State = "stale"     // approved, but the cluster had changed: its event ended rejected
	Cancelled State = "cancelled" // its event was cancelled (operation-cancel) while it waited
)

// Plan is a plan that waits, or waited, for approval: exactly what runs when it is
// approved, with the state it depends on.
type Plan struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	// Event, Type and Source are the planned event's; Request is its message as journaled
	// (the approval runs it as that event).
	Event   string          `json:"event"`
	Type    string          `json:"type"`
	Source  string          `json:"source"`
	Reason  string          `json:"reason,omitempty"`
	Request json.RawMessage `json:"request"`

	Strategy string                  `json:"strategy,omitempty"`
	Changes  []events.Change         `json:"changes"`
	Skipped  []events.Skip           `json:"skipped,omitempty"`
	Noop     []events.TopicPartition `json:"noop,omitempty"`
	Notes    []string                `json:"notes,omitempty"`
	// Timeout is the operation's time from its start (its deadline, counted from the
	// approval); 0: none.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Floor is what the cluster's previous operation left, when the plan was made.
	Floor []model.Seen `json:"floor,omitempty"`

	Fingerprint Fingerprint `json:"fingerprint"`
	Size        Size        `json:"size"`
	// Why says why it waits (Policy.Requires).
	Why string `json:"why"`

	PlannedBy string    `json:"planned_by"` // the worker
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`

	State State `json:"state"`
	// The answer, once there is one: who (the approval's source), by which event, when,
	// why; Differences, for a stale plan, what had changed.
	DecidedBy    string    `json:"decided_by,omitempty"`
	DecidedEvent string    `json:"decided_event,omitempty"`
	DecidedAt    time.Time `json:"decided_at,omitzero"`
	DecidedWhy   string    `json:"decided_why,omitempty"`
	Differences  []string  `json:"differences,omitempty"`
}

// PlanID is the id of the plan of event id on cluster: the same for every delivery of the
// event, so that a redelivery finds the plan it made rather than make another.
func PlanID(cluster, event string) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + event))
	return "plan-" + hex.EncodeToString(sum[:10])
}

// Expired reports whether the plan, still awaiting, is past its expiry at now.
func (p *Plan) Expired(now time.Time) bool { return p.State == Awaiting && !now.Before(p.ExpiresAt) }

// Decided says the plan's answer in words, for a rejected second answer: "approved by ops
// at … (event …)".
func (p *Plan) Decided() string {
	if p.State == Awaiting {
		return "awaiting approval"
	}
	return p.answered(p.State)
}

// ApprovedWords says the approval of a stale plan (approved, but it could not run) as
// Decided says an approved one: "approved by ops at … (event …)".
func (p *Plan) ApprovedWords() string { return p.answered(Approved) }

func (p *Plan) answered(st State) string {
	s := string(st)
	if p.DecidedBy != "" {
		s += " by " + p.DecidedBy
	}
	if !p.DecidedAt.IsZero() {
		s += " at " + p.DecidedAt.UTC().Format(time.RFC3339)
	}
	if p.DecidedEvent != "" {
		s += " (event " + p.DecidedEvent + ")"
	}
	return s
}

// Awaiting is the interim result of the plan's event while it waits.
func (p *Plan) Awaiting() *events.Result {
	res := &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Status: events.StatusAwaitingApproval,
		Strategy: p.Strategy, Worker: p.PlannedBy, StartedAt: p.CreatedAt, Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop,
		Reason: p.Reason, PlanID: p.ID, ExpiresAt: p.ExpiresAt}
	res.AddNote(fmt.Sprintf("the plan waits for approval (%s): send plan-approved or plan-denied with plan_id %s before %s",
		p.Why, p.ID, p.ExpiresAt.UTC().Format(time.RFC3339)))
	for _, n := range p.Notes {
		res.AddNote(n)
	}
	return res
}

// KeepFor is how long a plan is kept in its bucket after its last change.
const KeepFor = MaxExpiry + 24*time.Hour

// MaxPlanBytes bounds a stored plan: a plan larger than a NATS message cannot wait.
const MaxPlanBytes = 900 << 10

// Store reads and writes the plans (events.PlansBucket, key <cluster>.<plan id>).
type Store struct {
	bucket *kvbucket.Bucket
}

// NewStore returns the plans of the fleet on js; the bucket is created on first use.
func NewStore(js jetstream.JetStream) *Store {
	return &Store{bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      events.PlansBucket,
		Description: "kafkamender: plans awaiting approval, key = <cluster>.<plan id>",
		History:     1,
		TTL:         KeepFor,
		Storage:     jetstream.FileStorage,
		MaxBytes:    256 << 20, // full: a plan cannot wait, and its event fails saying so
	})}
}

// ReadStore returns the plans for readers (the emitter): the bucket is bound only if it
// exists.
func ReadStore(js jetstream.JetStream) *Store {
	return &Store{bucket: kvbucket.New(js, jetstream.KeyValueConfig{Bucket: events.PlansBucket}, kvbucket.Existing())}
}

func key(cluster, id string) string { return cluster + "." + id }

// ErrNotFound is the error of Get for a plan the bucket does not hold.
var ErrNotFound = errors.New("no such plan")

// ErrConflict is the error of Update when the plan changed since it was read.
var ErrConflict = errors.New("the plan changed since it was read")

// Get returns the plan id of cluster and its revision (for Update).
func (s *Store) Get(ctx context.Context, cluster, id string) (*Plan, uint64, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, key(cluster, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, retry.Transient(fmt.Errorf("read plan %s: %w", id, err))
	}
	var p Plan
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, fmt.Errorf("plan %s in %s is unreadable: %w", id, events.PlansBucket, err)
	}
	return &p, e.Revision(), nil
}

// Create stores a new plan; a plan with its id stored already is returned instead (a
// redelivery of its event), with created false.
func (s *Store) Create(ctx context.Context, p *Plan) (stored *Plan, created bool, err error) {
	raw, err := Encode(p)
	if err != nil {
		return nil, false, err
	}
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, false, err
	}
	if _, err := kv.Create(ctx, key(p.Cluster, p.ID), raw); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			old, _, gerr := s.Get(ctx, p.Cluster, p.ID)
			return old, false, gerr
		}
		return nil, false, retry.Transient(fmt.Errorf("store plan %s: %w", p.ID, err))
	}
	return p, true, nil
}

// Encode encodes a plan for its bucket; a plan over MaxPlanBytes is an error.
func Encode(p *Plan) ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxPlanBytes {
		return nil, fmt.Errorf("the plan of %d changes is %d bytes, over the %d a stored plan may have: it cannot wait for approval (split the event)", len(p.Changes), len(raw), MaxPlanBytes)
	}
	return raw, nil
}

// Update writes p over revision rev; ErrConflict when it changed since.
func (s *Store) Update(ctx context.Context, p *Plan, rev uint64) (uint64, error) {
	raw, err := Encode(p)
	if err != nil {
		return 0, err
	}
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return 0, err
	}
	n, err := kv.Update(ctx, key(p.Cluster, p.ID), raw, rev)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, ErrConflict
	}
	if err != nil {
		return 0, retry.Transient(fmt.Errorf("update plan %s: %w", p.ID, err))
	}
	return n, nil
}

// List returns the plans of the given clusters (every cluster when none is given), oldest
// first.
func (s *Store) List(ctx context.Context, clusters ...string) ([]*Plan, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("list plans: %w", err))
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []*Plan
	for _, k := range keys {
		cluster, id, ok := strings.Cut(k, ".")
		if !ok || len(clusters) > 0 && !slices.Contains(clusters, cluster) {
			continue
		}
		p, _, err := s.Get(ctx, cluster, id)
		if errors.Is(err, ErrNotFound) {
			continue // gone since it was listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plan) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Find returns the plan id of whichever cluster holds it (for the emitter, given only the
// id).
func (s *Store) Find(ctx context.Context, id string) (*Plan, error) {
	plans, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range plans {
		if p.ID == id {
			return p, nil
		}
	}
	return nil, ErrNotFound
}
