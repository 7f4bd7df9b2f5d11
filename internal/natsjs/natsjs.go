// Package natsjs gives the worker's JetStream assets their replica count (nats.replicas)
// in one place: every stream and key-value bucket the worker creates through a
// [JetStream] gets it, whichever package creates them (the pipeline's streams, the journal,
// the locks, the cool-downs, …).
//
// An asset that exists already keeps the replicas it has. A worker never scales a stream
// on its own: a change of replicas moves data between servers and is the operator's call
// (nats stream edit). One with fewer replicas than wanted is recorded instead, for /readyz
// and the log ([JetStream.Shortfalls]).
package natsjs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// ClusterReplicas is the replica count when nats.replicas is unset and the server reports
// a cluster: a stream of three replicas survives the loss of one server.
const ClusterReplicas = 3

// Replicas is the replica count of new assets: configured when it is set (not 0), else
// ClusterReplicas when the server nc is connected to reports a cluster (its INFO names
// one), else 1.
func Replicas(nc *nats.Conn, configured int) int {
	if configured > 0 {
		return configured
	}
	if nc != nil && nc.ConnectedClusterName() != "" {
		return ClusterReplicas
	}
	return 1
}

// Shortfall is an asset with fewer replicas than the worker would give it.
type Shortfall struct {
	// Asset is the stream's name (a key-value bucket's is KV_<bucket>).
	Asset    string `json:"asset"`
	Replicas int    `json:"replicas"`
	Want     int    `json:"want"`
}

// JetStream is a jetstream.JetStream that creates streams and key-value buckets with the
// replica count of nats.replicas, and keeps an existing asset's.
type JetStream struct {
	jetstream.JetStream
	nc         *nats.Conn
	configured int
	logger     *zap.Logger

	mu    sync.Mutex
	short map[string]Shortfall // by asset
}

// New returns the JetStream of nc whose new assets get Replicas(nc, configured) replicas,
// resolved when each is created (the worker may start while NATS is down). logger gets a
// warning for each asset found with fewer.
func New(nc *nats.Conn, configured int, logger *zap.Logger) (*JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return &JetStream{JetStream: js, nc: nc, configured: configured, logger: logger, short: map[string]Shortfall{}}, nil
}

// Want is the replica count new assets get now.
func (j *JetStream) Want() int { return Replicas(j.nc, j.configured) }

// Shortfalls lists the assets this worker found with fewer replicas than Want, by name.
func (j *JetStream) Shortfalls() []Shortfall {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Shortfall, 0, len(j.short))
	for _, k := range slices.Sorted(maps.Keys(j.short)) {
		out = append(out, j.short[k])
	}
	return out
}

// CreateStream creates a stream with Want replicas unless cfg says how many.
func (j *JetStream) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = j.Want()
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	s, err := j.JetStream.CreateStream(ctx, cfg)
	return wrapStream(s), err
}

// CreateOrUpdateStream creates the stream with Want replicas (unless cfg says how many),
// or updates it to cfg keeping the replicas it has.
func (j *JetStream) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	if cfg.Replicas, err = j.keep(ctx, cfg.Name, cfg.Replicas); err != nil {
		return nil, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	s, err := j.JetStream.CreateOrUpdateStream(ctx, cfg)
	return wrapStream(s), err
}

// UpdateStream updates the stream to cfg keeping the replicas it has.
func (j *JetStream) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	if cfg.Replicas, err = j.keep(ctx, cfg.Name, cfg.Replicas); err != nil {
		return nil, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	s, err := j.JetStream.UpdateStream(ctx, cfg)
	return wrapStream(s), err
}

// CreateKeyValue creates a bucket with Want replicas unless cfg says how many.
func (j *JetStream) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = j.Want()
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	kv, err := j.JetStream.CreateKeyValue(ctx, cfg)
	return wrapKV(kv), err
}

// CreateOrUpdateKeyValue creates the bucket with Want replicas (unless cfg says how many),
// or updates it to cfg keeping the replicas it has.
func (j *JetStream) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var err error
	if cfg.Replicas, err = j.keep(ctx, kvStream(cfg.Bucket), cfg.Replicas); err != nil {
		return nil, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	kv, err := j.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
	return wrapKV(kv), err
}

// UpdateKeyValue updates the bucket to cfg keeping the replicas it has.
func (j *JetStream) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var err error
	if cfg.Replicas, err = j.keep(ctx, kvStream(cfg.Bucket), cfg.Replicas); err != nil {
		return nil, err
	}
	ctx, cancel := bound(ctx)
	defer cancel()
	kv, err := j.JetStream.UpdateKeyValue(ctx, cfg)
	return wrapKV(kv), err
}

// KeyValue binds an existing bucket, and records it when it has fewer replicas than Want
// (a bucket bound as it is, never updated, is checked here).
func (j *JetStream) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	bctx, cancel := bound(ctx)
	defer cancel()
	kv, err := j.JetStream.KeyValue(bctx, bucket)
	if err == nil {
		// Only to report a shortfall: the bucket is bound either way.
		_, _ = j.keep(ctx, kvStream(bucket), 0)
	}
	return wrapKV(kv), err
}

func kvStream(bucket string) string { return "KV_" + bucket }

// keep returns the replicas to create or update the stream with: the stream's own when it
// exists (recording a shortfall against want, or Want when want is 0), else want or Want.
// A stream it cannot read is an error: an update sent without knowing the replicas could
// change them.
func (j *JetStream) keep(ctx context.Context, stream string, want int) (int, error) {
	if want == 0 {
		want = j.Want()
	}
	s, err := j.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return want, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read stream %s's replicas before creating or updating it: %w", stream, err)
	}
	have := max(s.CachedInfo().Config.Replicas, 1)
	j.record(stream, have, want)
	return have, nil
}

// record notes (and logs, when it is news) a stream with fewer replicas than want, or
// forgets one that has enough now.
func (j *JetStream) record(stream string, have, want int) {
	j.mu.Lock()
	old, had := j.short[stream]
	if have >= want {
		delete(j.short, stream)
		j.mu.Unlock()
		return
	}
	sf := Shortfall{Asset: stream, Replicas: have, Want: want}
	j.short[stream] = sf
	j.mu.Unlock()
	if (!had || old != sf) && j.logger != nil {
		j.logger.Warn("a JetStream asset has fewer replicas than nats.replicas wants; the worker never changes an existing asset's replicas: scale it with nats stream edit",
			zap.String("asset", stream), zap.Int("replicas", have), zap.Int("want", want),
			zap.String("command", "nats stream edit "+stream+" --replicas "+strconv.Itoa(want)))
	}
}
