package natsjs

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RequestTimeout bounds each JetStream API request and publish made through a
// [JetStream], its streams and its key-value buckets, whatever the caller's context allows
// (nats.go waits until the context's deadline when it has one). On a NATS cluster a request
// sent while a stream or the meta group elects a leader can get no answer at all; bounded,
// it fails in seconds and the caller's retry sends it again to the new leader, instead of
// waiting out a lock's acquire timeout or an operation's whole budget. It is nats.go's own
// timeout for a context without a deadline.
const RequestTimeout = 5 * time.Second

// bound is ctx with a deadline at most RequestTimeout away.
func bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, RequestTimeout)
}

// Publish publishes with at most RequestTimeout for the acknowledgement.
func (j *JetStream) Publish(ctx context.Context, subject string, payload []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return j.JetStream.Publish(ctx, subject, payload, opts...)
}

// PublishMsg publishes with at most RequestTimeout for the acknowledgement.
func (j *JetStream) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return j.JetStream.PublishMsg(ctx, msg, opts...)
}

// Stream binds a stream with at most RequestTimeout for its information; the stream's
// requests are bounded too.
func (j *JetStream) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	bctx, cancel := bound(ctx)
	defer cancel()
	s, err := j.JetStream.Stream(bctx, name)
	return wrapStream(s), err
}

// Consumer binds a consumer with at most RequestTimeout.
func (j *JetStream) Consumer(ctx context.Context, stream, consumer string) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return j.JetStream.Consumer(ctx, stream, consumer)
}

// CreateOrUpdateConsumer creates or updates a consumer with at most RequestTimeout.
func (j *JetStream) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return j.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
}

// DeleteConsumer deletes a consumer with at most RequestTimeout.
func (j *JetStream) DeleteConsumer(ctx context.Context, stream, consumer string) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return j.JetStream.DeleteConsumer(ctx, stream, consumer)
}

// stream is a jetstream.Stream whose requests are bounded by RequestTimeout.
type stream struct{ jetstream.Stream }

func wrapStream(s jetstream.Stream) jetstream.Stream {
	if s == nil {
		return nil
	}
	return stream{s}
}

func (s stream) Info(ctx context.Context, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.Info(ctx, opts...)
}

func (s stream) Purge(ctx context.Context, opts ...jetstream.StreamPurgeOpt) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.Purge(ctx, opts...)
}

func (s stream) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.GetMsg(ctx, seq, opts...)
}

func (s stream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.GetLastMsgForSubject(ctx, subject)
}

func (s stream) DeleteMsg(ctx context.Context, seq uint64) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.DeleteMsg(ctx, seq)
}

func (s stream) CreateOrUpdateConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.CreateOrUpdateConsumer(ctx, cfg)
}

func (s stream) CreateConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.CreateConsumer(ctx, cfg)
}

func (s stream) UpdateConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.UpdateConsumer(ctx, cfg)
}

func (s stream) Consumer(ctx context.Context, name string) (jetstream.Consumer, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.Consumer(ctx, name)
}

func (s stream) DeleteConsumer(ctx context.Context, name string) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return s.Stream.DeleteConsumer(ctx, name)
}

// keyValue is a jetstream.KeyValue whose requests are bounded by RequestTimeout (its
// watches are not: they live as long as their caller wants).
type keyValue struct{ jetstream.KeyValue }

func wrapKV(kv jetstream.KeyValue) jetstream.KeyValue {
	if kv == nil {
		return nil
	}
	return keyValue{kv}
}

func (kv keyValue) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Get(ctx, key)
}

func (kv keyValue) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.GetRevision(ctx, key, revision)
}

func (kv keyValue) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Put(ctx, key, value)
}

func (kv keyValue) PutString(ctx context.Context, key string, value string) (uint64, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.PutString(ctx, key, value)
}

func (kv keyValue) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Create(ctx, key, value, opts...)
}

func (kv keyValue) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Update(ctx, key, value, revision)
}

func (kv keyValue) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Delete(ctx, key, opts...)
}

func (kv keyValue) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Purge(ctx, key, opts...)
}

func (kv keyValue) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	ctx, cancel := bound(ctx)
	defer cancel()
	return kv.KeyValue.Status(ctx)
}
