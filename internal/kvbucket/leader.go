package kvbucket

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/natsjs"
)

// Latest reads the latest entry of key from the bucket's stream leader, where the
// key-value Get may read a stale one. It answers as KeyValue.Get does:
// jetstream.ErrKeyNotFound for a key never written, deleted or purged;
// jetstream.ErrBucketNotFound for a bucket that does not exist; other failures are
// transient (retry.Transient). A bucket bound by KeyValue or Stream (unless Existing)
// reads with it: its Get is Latest. A Bound bucket has no JetStream to ask the leader
// with: Latest is its Get.
//
// The key-value Get is a direct get, which any replica of the bucket may answer,
// including one that has not yet applied the latest writes: a write is acknowledged once
// a quorum stored it, and a replica of the quorum applies it a moment later. On the
// stack's three-node cluster about one read in a hundred through a follower's node,
// right after a write, returned the entry before it: a worker that had just taken a lock
// read that nobody held it. Latest asks with a message get
// ($JS.API.STREAM.MSG.GET.KV_<bucket>), which only the stream's leader answers, and sees
// every write acknowledged before it asked. While the stream has no leader (an election,
// a lost quorum) it fails, where a replica would have answered with what it has.
//
// A user not allowed that request (docs/security.md gave the worker only the direct get
// before) gets no answer: the server refuses the request, the client logs the
// violation, and the request times out. Latest then reads with the direct get, as before,
// from then on for this bucket.
func (b *Bucket) Latest(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv, err := b.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	if _, leader := kv.(*leaderReads); !leader && b.js != nil { // Existing
		kv = &leaderReads{KeyValue: kv, b: b}
	}
	return kv.Get(ctx, key)
}

// leaderReads is a bound bucket whose Get reads from the stream's leader.
type leaderReads struct {
	jetstream.KeyValue
	b *Bucket
}

func (l *leaderReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if !keyValid(key) {
		return nil, jetstream.ErrInvalidKey
	}
	if l.b.leaderDenied.Load() {
		return l.KeyValue.Get(ctx, key)
	}
	e, err := latest(ctx, l.b.js, l.b.config.Bucket, key)
	if err != nil && natsjs.LeaderReadRefused(l.b.js.Conn(), "KV_"+l.b.config.Bucket) {
		l.b.leaderDenied.Store(true)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.b.js.Options().DefaultTimeout)
		defer cancel()
		return l.KeyValue.Get(ctx, key)
	}
	if errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, err
}

// keyValid is the key-value API's check of a key (a key with a wildcard would name
// another key's subject).
func keyValid(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-/_=.", r)) {
			return false
		}
	}
	return true
}

func latest(ctx context.Context, js jetstream.JetStream, bucket, key string) (jetstream.KeyValueEntry, error) {
	m, err := natsjs.LastFromLeader(ctx, js, "KV_"+bucket, "$KV."+bucket+"."+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, jetstream.ErrKeyNotFound
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("key-value bucket %s: %w", bucket, jetstream.ErrBucketNotFound)
	case err != nil:
		return nil, fmt.Errorf("key-value bucket %s, key %s: %w", bucket, key, err)
	}
	en := &entry{bucket: bucket, key: key, value: m.Data, revision: m.Sequence, created: m.Time, op: operation(m.Header)}
	if en.op != jetstream.KeyValuePut {
		return en, jetstream.ErrKeyDeleted
	}
	return en, nil
}

// operation tells a put from a delete or purge marker, as the key-value Get does: by the
// KV-Operation header, or by the marker the server writes when it removes an entry
// (Nats-Marker-Reason).
func operation(h nats.Header) jetstream.KeyValueOp {
	switch h.Get("KV-Operation") {
	case "DEL":
		return jetstream.KeyValueDelete
	case "PURGE":
		return jetstream.KeyValuePurge
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// entry is a key-value entry read by Latest.
type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.revision }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return e.op }
