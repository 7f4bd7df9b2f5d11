// Package kvbucket binds a JetStream key-value bucket on first use: a worker builds what
// uses a bucket while NATS may be down, and the bucket is created (or bound) by the first
// call that needs it. Every bucket of kafkamender is bound through a [Bucket] (their names:
// package events), each with its own configuration.
package kvbucket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// Bucket is a JetStream key-value bucket bound on first use. It is safe for concurrent
// use: calls wait for a bind in progress, and share its bucket. A bind that fails binds
// nothing: the next call tries again.
type Bucket struct {
	js     jetstream.JetStream
	config jetstream.KeyValueConfig
	keep   bool
	only   bool // Existing
	check  func(context.Context, jetstream.KeyValue) error

	leaderDenied atomic.Bool // the server refused a leader read (Latest)

	mu     sync.Mutex
	kv     jetstream.KeyValue
	stream jetstream.Stream // bound by Stream only
}

// Option changes how a Bucket binds.
type Option func(*Bucket)

// KeepExisting binds a bucket that exists as it is, never changing its configuration: only
// a missing bucket is created with the Bucket's. For a bucket whose configuration the
// fleet must agree on rather than impose (a worker configured otherwise would change it
// under the others).
func KeepExisting() Option { return func(b *Bucket) { b.keep = true } }

// Existing binds the bucket only if it exists, never creating or changing it: for readers
// (the emitter's status) whose permissions allow no more. A missing bucket is an error
// that wraps jetstream.ErrBucketNotFound. Its Get is the key-value API's direct get, which
// a replica may answer with an older entry (see Latest): good enough for a status.
func Existing() Option { return func(b *Bucket) { b.only = true } }

// Check runs f on the bucket each time it is bound, before anything uses it: an error of f
// is returned as it is (not marked transient), and the next call binds again.
func Check(f func(context.Context, jetstream.KeyValue) error) Option {
	return func(b *Bucket) { b.check = f }
}

// New returns the bucket config.Bucket on js, bound on first use with
// jetstream.CreateOrUpdateKeyValue and config: created if missing, updated to config if
// not (see KeepExisting). Its Get reads from the stream's leader (see Latest), unless
// Existing.
func New(js jetstream.JetStream, config jetstream.KeyValueConfig, opts ...Option) *Bucket {
	b := &Bucket{js: js, config: config}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Bound returns a Bucket that is kv, bound already, and has no stream: for tests that wrap
// a bucket to inject faults.
func Bound(kv jetstream.KeyValue) *Bucket {
	return &Bucket{config: jetstream.KeyValueConfig{Bucket: kv.Bucket()}, kv: kv}
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.config.Bucket }

// KeyValue returns the bucket, bound now if no call bound it yet. A failure to bind is
// transient (retry.Transient), and names the bucket.
func (b *Bucket) KeyValue(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bind(ctx)
}

// Stream returns the bucket and its stream (KV_<name>), for what the key-value API does
// not do (purge a subject, list the subjects that hold messages); both bound now if no
// call bound them yet. A failure is transient, and names the bucket.
func (b *Bucket) Stream(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kv, err := b.bind(ctx)
	if err != nil {
		return nil, nil, err
	}
	if b.stream == nil {
		if b.js == nil {
			return nil, nil, fmt.Errorf("key-value bucket %s: no stream (a Bound bucket)", b.config.Bucket)
		}
		stream, err := b.js.Stream(ctx, "KV_"+b.config.Bucket)
		if err != nil {
			return nil, nil, retry.Transient(fmt.Errorf("stream of key-value bucket %s: %w", b.config.Bucket, err))
		}
		b.stream = stream
	}
	return kv, b.stream, nil
}

// bind binds the bucket unless it is bound; the caller holds mu.
func (b *Bucket) bind(ctx context.Context) (jetstream.KeyValue, error) {
	if b.kv != nil {
		return b.kv, nil
	}
	var (
		kv  jetstream.KeyValue
		err error
	)
	switch {
	case b.only:
		kv, err = b.js.KeyValue(ctx, b.config.Bucket)
	case b.keep:
		kv, err = b.js.KeyValue(ctx, b.config.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = b.js.CreateKeyValue(ctx, b.config)
			if errors.Is(err, jetstream.ErrBucketExists) { // another worker created it first
				kv, err = b.js.KeyValue(ctx, b.config.Bucket)
			}
		}
	default:
		kv, err = b.js.CreateOrUpdateKeyValue(ctx, b.config)
	}
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s: %w", b.config.Bucket, err))
	}
	if b.check != nil {
		if err := b.check(ctx, kv); err != nil {
			return nil, err
		}
	}
	if !b.only {
		kv = &leaderReads{KeyValue: kv, b: b}
	}
	b.kv = kv
	return kv, nil
}
