// Package fleetstatus reads what the fleet is doing on each cluster, as the workers keep
// it in NATS: paused or not, the lock and its holder, the operation in flight, the events
// waiting, the plans awaiting approval. emitter status prints it; the console shows it.
package fleetstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/pause"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// Cluster is one cluster's status, as emitter status -o json prints it.
type Cluster struct {
	Cluster  string       `json:"cluster"`
	Paused   *pause.Pause `json:"paused,omitempty"`
	Lock     Lock         `json:"lock"`
	InFlight *InFlight    `json:"in_flight,omitempty"`
	// Waiting counts the events in the cluster's queue not yet delivered; Out those
	// delivered and not yet answered (at most one: a running or held event).
	Waiting uint64 `json:"waiting"`
	Out     int    `json:"out"`
	// ControlWaiting counts the control events (pause, resume, cancel) not yet taken.
	ControlWaiting uint64 `json:"control_waiting"`
	// PlansAwaiting are the ids of the cluster's plans awaiting approval, oldest first.
	PlansAwaiting []string `json:"plans_awaiting"`
}

// Lock says where the fleet keeps a cluster's lock, and its holder.
type Lock struct {
	// Location is where the fleet keeps the cluster's lock ("" before its first lock).
	Location string  `json:"location,omitempty"`
	Holder   *Holder `json:"holder,omitempty"` // NATS locks only
}

// Holder is the part of a NATS lock's record (locks.Holder) that status shows; the
// emitter and the console do not link package locks, which links the ZooKeeper client.
type Holder struct {
	Worker     string    `json:"worker"`
	Event      string    `json:"event"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	ClaimedAt  time.Time `json:"claimed_at,omitzero"`
}

// InFlight is the operation a cluster's journal holds open.
type InFlight struct {
	Event         string       `json:"event"`
	Type          string       `json:"type"`
	Step          journal.Step `json:"step"`
	Worker        string       `json:"worker"`
	Attempt       int          `json:"attempt"`
	Started       time.Time    `json:"started_at"`
	Updated       time.Time    `json:"updated_at"`
	Partitions    int          `json:"partitions"`
	Reassignments int          `json:"reassignments"`
}

// Read reads the status of cluster, or of every cluster the fleet named consumer (its
// nats.consumer) has a consumer for when cluster is "".
func Read(ctx context.Context, js jetstream.JetStream, consumer, cluster string) ([]Cluster, error) {
	stream, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s (no worker has started yet?): %w", events.EventsStream, err)
	}
	clusters := []string{cluster}
	if cluster == "" {
		clusters = nil
		names := stream.ConsumerNames(ctx)
		for n := range names.Name() {
			if c, ok := strings.CutPrefix(n, consumer+"_"); ok && !strings.Contains(c, "~") {
				clusters = append(clusters, c)
			}
		}
		if err := names.Err(); err != nil {
			return nil, fmt.Errorf("list the consumers of %s: %w", events.EventsStream, err)
		}
		slices.Sort(clusters)
	}
	awaiting, err := plansAwaiting(ctx, js, clusters)
	if err != nil {
		return nil, err
	}
	pauses, jr := pause.New(js, kvbucket.Existing()), journal.NewReader(js)
	out := make([]Cluster, 0, len(clusters))
	for _, c := range clusters {
		s := Cluster{Cluster: c, PlansAwaiting: awaiting[c]}
		if s.PlansAwaiting == nil {
			s.PlansAwaiting = []string{}
		}
		if s.Paused, err = pauses.Get(ctx, c); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, err
		}
		if rec, err := jr.Get(ctx, c); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("cluster %s: journal: %w", c, err)
		} else if rec != nil && rec.Open() {
			s.InFlight = &InFlight{Event: rec.Event, Type: rec.Type, Step: rec.Step, Worker: rec.Worker, Attempt: rec.Attempt,
				Started: rec.Started, Updated: rec.Updated, Partitions: len(rec.Changes), Reassignments: len(rec.Reassignments)}
		}
		if s.Lock, err = readLock(ctx, js, c); err != nil {
			return nil, fmt.Errorf("cluster %s: lock: %w", c, err)
		}
		if ci, err := consumerInfo(ctx, stream, pipeline.ClusterConsumer(consumer, c)); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c, err)
		} else if ci != nil {
			s.Waiting, s.Out = ci.NumPending, ci.NumAckPending
		}
		if ci, err := consumerInfo(ctx, stream, pipeline.ControlConsumer(consumer, c)); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c, err)
		} else if ci != nil {
			s.ControlWaiting = ci.NumPending + uint64(ci.NumAckPending)
		}
		out = append(out, s)
	}
	return out, nil
}

// plansAwaiting reads the ids of the plans awaiting approval of clusters, by cluster; none
// when the plans' bucket does not exist (no plan ever waited).
func plansAwaiting(ctx context.Context, js jetstream.JetStream, clusters []string) (map[string][]string, error) {
	if len(clusters) == 0 {
		return nil, nil
	}
	plans, err := approval.ReadStore(js).List(ctx, clusters...)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plans awaiting approval (bucket %s): %w", events.PlansBucket, err)
	}
	out := map[string][]string{}
	for _, p := range plans {
		if p.State == approval.Awaiting {
			out[p.Cluster] = append(out[p.Cluster], p.ID)
		}
	}
	return out, nil
}

// consumerInfo reads a consumer's state; nil when there is no such consumer.
func consumerInfo(ctx context.Context, stream jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return ci, nil
}

// readLock reads where the fleet keeps the cluster's lock and, in NATS, its holder.
func readLock(ctx context.Context, js jetstream.JetStream, cluster string) (Lock, error) {
	var ls Lock
	loc, err := kvValue(ctx, js, events.LockBackendsBucket, cluster)
	if err != nil || loc == nil {
		return ls, err
	}
	ls.Location = string(loc)
	bucket, ok := strings.CutPrefix(ls.Location, "nats kv ") // the worker's lockLocation
	if !ok {
		return ls, nil
	}
	raw, err := kvValue(ctx, js, strings.TrimSpace(bucket), cluster)
	if err != nil || raw == nil {
		return ls, err
	}
	var h Holder
	if err := json.Unmarshal(raw, &h); err != nil {
		return ls, fmt.Errorf("the holder's record: %w", err)
	}
	ls.Holder = &h
	return ls, nil
}

// kvValue reads a key of a bucket; nil when the bucket or the key does not exist.
func kvValue(ctx context.Context, js jetstream.JetStream, bucket, key string) ([]byte, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s, key %s: %w", bucket, key, err)
	}
	return e.Value(), nil
}
