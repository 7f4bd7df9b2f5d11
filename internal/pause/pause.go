// Package pause keeps the pauses of clusters (cluster-pause, cluster-resume): while a
// cluster is paused its events wait in the cluster's queue, in publish order, and are not
// run (the pipeline holds them, see pipeline.Pauses); dry runs are still answered. A pause
// is durable: it is a key of the JetStream key-value bucket events.PausesBucket (key = the
// cluster's name), so it outlives every worker, and every worker of the fleet sees it.
//
// A pause with an end (Until) ends by itself: a key whose Until has passed reads as no
// pause, and the next pause or resume of the cluster replaces or deletes it.
package pause

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// Pause is a cluster's pause, the value of its key.
type Pause struct {
	Cluster string `json:"cluster"`
	Reason  string `json:"reason"`
	// By is the source of the cluster-pause event; Event its id.
	By    string    `json:"by"`
	Event string    `json:"event"`
	Since time.Time `json:"since"`
	// Until is when the pause ends by itself; zero: at the cluster-resume.
	Until time.Time `json:"until,omitzero"`
}

// Active reports whether the pause holds at now.
func (p *Pause) Active(now time.Time) bool {
	return p != nil && (p.Until.IsZero() || now.Before(p.Until))
}

// String says the pause in one line, as held events' progress and /readyz show it.
func (p *Pause) String() string {
	s := fmt.Sprintf("cluster %s paused by %s since %s", p.Cluster, p.By, p.Since.UTC().Format(time.RFC3339))
	if !p.Until.IsZero() {
		s += " until " + p.Until.UTC().Format(time.RFC3339)
	}
	return s + " (event " + p.Event + "): " + p.Reason
}

// Store reads and writes the pauses.
type Store struct {
	bucket *kvbucket.Bucket
	now    func() time.Time
}

// New returns the pauses of the fleet on js; the bucket is created on first use (with
// kvbucket.Existing: only read if it exists).
func New(js jetstream.JetStream, opts ...kvbucket.Option) *Store {
	return &Store{now: time.Now, bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      events.PausesBucket,
		Description: "kafkamender: paused clusters (cluster-pause), key = cluster",
		History:     1,
		Storage:     jetstream.FileStorage,
		MaxBytes:    8 << 20, // full: a pause fails and says so, nothing dropped
	}, opts...)}
}

// Get returns cluster's pause, nil when it is not paused (no key, or its Until passed).
// An error is transient: the bucket could not be read.
func (s *Store) Get(ctx context.Context, cluster string) (*Pause, error) {
	p, _, err := s.get(ctx, cluster)
	if err != nil || !p.Active(s.now()) {
		return nil, err
	}
	return p, nil
}

// get returns the key's pause (nil when none), ended or not, and its revision.
func (s *Store) get(ctx context.Context, cluster string) (*Pause, uint64, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, cluster)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, retry.Transient(fmt.Errorf("read the pause of cluster %s: %w", cluster, err))
	}
	var p Pause
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		// Not ours to guess at: a pause that cannot be read holds the cluster, and says so.
		return &Pause{Cluster: cluster, Reason: fmt.Sprintf("the pause stored in %s is unreadable (%v): resume the cluster to end it", events.PausesBucket, err),
			By: "unknown", Event: "unknown", Since: e.Created()}, e.Revision(), nil
	}
	return &p, e.Revision(), nil
}

// Put pauses p.Cluster, replacing the pause it had; it returns that earlier pause (nil
// when the cluster was not paused).
func (s *Store) Put(ctx context.Context, p Pause) (*Pause, error) {
	prev, _, err := s.get(ctx, p.Cluster)
	if err != nil {
		return nil, err
	}
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if _, err := kv.Put(ctx, p.Cluster, raw); err != nil {
		return nil, retry.Transient(fmt.Errorf("store the pause of cluster %s: %w", p.Cluster, err))
	}
	if !prev.Active(s.now()) {
		prev = nil
	}
	return prev, nil
}

// Resume ends cluster's pause; it returns the pause it ended, nil when the cluster was not
// paused (or its pause had ended by itself).
func (s *Store) Resume(ctx context.Context, cluster string) (*Pause, error) {
	prev, _, err := s.get(ctx, cluster)
	if err != nil || prev == nil {
		return nil, err
	}
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	if err := kv.Purge(ctx, cluster); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, retry.Transient(fmt.Errorf("delete the pause of cluster %s: %w", cluster, err))
	}
	if !prev.Active(s.now()) {
		return nil, nil
	}
	return prev, nil
}

// List returns the clusters' pauses that hold now, by cluster.
func (s *Store) List(ctx context.Context) (map[string]*Pause, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("list the pauses: %w", err))
	}
	out := map[string]*Pause{}
	for k := range keys.Keys() {
		if strings.HasPrefix(k, "held.") {
			continue // counts of held deliveries, not pauses
		}
		p, err := s.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out[k] = p
		}
	}
	return out, nil
}

// holdKey is the key of the count of held deliveries of the event at stream sequence seq
// (pipeline.Pauses): cluster names have no dots, so no cluster's key is one.
func holdKey(seq uint64) string { return fmt.Sprintf("held.%d", seq) }

// Holds implements pipeline.Pauses.
func (s *Store) Holds(ctx context.Context, seq uint64) (int, error) {
	n, _, err := s.holds(ctx, seq)
	return n, err
}

func (s *Store) holds(ctx context.Context, seq uint64) (int, uint64, error) {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return 0, 0, err
	}
	e, err := kv.Get(ctx, holdKey(seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, retry.Transient(fmt.Errorf("read the held deliveries of event %d: %w", seq, err))
	}
	var n int
	if err := json.Unmarshal(e.Value(), &n); err != nil {
		return 0, e.Revision(), nil
	}
	return n, e.Revision(), nil
}

// AddHold implements pipeline.Pauses: a revision-checked update, so that two workers
// (one stopping, one taking the event up) never lose a count.
func (s *Store) AddHold(ctx context.Context, seq uint64, delta int) error {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return err
	}
	for range 10 {
		n, rev, err := s.holds(ctx, seq)
		if err != nil {
			return err
		}
		raw, _ := json.Marshal(max(0, n+delta))
		if rev == 0 {
			_, err = kv.Create(ctx, holdKey(seq), raw)
		} else {
			_, err = kv.Update(ctx, holdKey(seq), raw, rev)
		}
		if err == nil {
			return nil
		}
	}
	return retry.Transient(fmt.Errorf("count the held deliveries of event %d: too many concurrent updates", seq))
}

// ForgetHolds implements pipeline.Pauses.
func (s *Store) ForgetHolds(ctx context.Context, seq uint64) error {
	kv, err := s.bucket.KeyValue(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, holdKey(seq)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}
