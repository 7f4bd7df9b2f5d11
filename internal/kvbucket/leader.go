package kvbucket

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// Latest reads the latest entry of key from the bucket's stream leader, where the
// key-value Get may read a stale one.
//
// The key-value Get is a direct get, which any replica of the bucket may answer,
// including one that has not yet applied the latest writes: a write is acknowledged once
// a quorum stored it, and a replica of the quorum applies it a moment later. On a
// three-node NATS cluster a worker that has just taken a lock can read, a few
// milliseconds later, that nobody holds it. Latest asks with a message get
// ($JS.API.STREAM.MSG.GET.KV_<bucket>), which only the stream's leader answers, and sees
// every write acknowledged before it was asked. It needs that permission besides the
// direct get's (docs/security.md).
//
// It returns what KeyValue.Get returns: jetstream.ErrKeyNotFound for a key never written
// or purged from the stream, the entry and jetstream.ErrKeyDeleted for a delete or purge
// marker, jetstream.ErrBucketNotFound for a bucket that does not exist. Other failures
// are transient (retry.Transient).
func (b *Bucket) Latest(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if b.js == nil {
		return nil, fmt.Errorf("key-value bucket %s: no leader read (a Bound bucket)", b.config.Bucket)
	}
	return latest(ctx, b.js, b.config.Bucket, key)
}

// msgGetResponse is the JetStream API's answer to a message get (the server's
// JSApiMsgGetResponse).
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

func latest(ctx context.Context, js jetstream.JetStream, bucket, key string) (jetstream.KeyValueEntry, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + bucket + "." + key})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js.Options())+"STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s, key %s, from the leader: %w", bucket, key, err))
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s, key %s, from the leader: %w", bucket, key, err))
	}
	if e := resp.Error; e != nil {
		switch e.ErrorCode {
		case jetstream.JSErrCodeMessageNotFound:
			return nil, jetstream.ErrKeyNotFound
		case jetstream.JSErrCodeStreamNotFound:
			return nil, fmt.Errorf("key-value bucket %s: %w", bucket, jetstream.ErrBucketNotFound)
		}
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s, key %s, from the leader: %w", bucket, key, e))
	}
	m := resp.Message
	if m == nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s, key %s, from the leader: an answer without a message", bucket, key))
	}
	en := &entry{bucket: bucket, key: key, value: m.Data, revision: m.Sequence, created: m.Time}
	if len(m.Header) > 0 {
		hdr, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, retry.Transient(fmt.Errorf("key-value bucket %s, key %s, from the leader: headers: %w", bucket, key, err))
		}
		en.op = operation(hdr)
	}
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

// apiPrefix is the subject prefix of js's API requests, as jetstream builds it.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
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
