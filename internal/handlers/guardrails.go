package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// namedTopics are the topics an event names explicitly: replica-change-requested's and
// logdir-move-requested's topic, broker-overloaded's and the broker life cycle's topics.
func namedTopics(payload any) []string {
	switch req := payload.(type) {
	case *events.ReplicaChange:
		return []string{req.Topic}
	case *events.BrokerOverloaded:
		return req.Topics
	case *events.BrokerAdded:
		return req.Topics
	case *events.BrokerDrain:
		return req.Topics
	case *events.BrokerFailed:
		return req.Topics
	case *events.LogDirMove:
		if req.Topic != "" {
			return []string{req.Topic}
		}
	case *events.PartitionOffline:
		if req.Topic != "" {
			return []string{req.Topic}
		}
	}
	return nil
}

// asked is the timeout and the throttle an event asks for (0: none).
func asked(payload any) (time.Duration, int64) {
	switch req := payload.(type) {
	case *events.ReplicaChange:
		return req.Timeout.Duration, req.ThrottleBytesPerSec
	case *events.LogDirMove:
		return req.Timeout.Duration, req.ThrottleBytesPerSec
	case *events.BrokerFailed:
		return req.Timeout.Duration, req.ThrottleBytesPerSec
	case *events.BrokerDrain:
		return req.Timeout.Duration, req.ThrottleBytesPerSec
	case *events.BrokerAdded:
		return req.Timeout.Duration, req.ThrottleBytesPerSec
	}
	return 0, 0
}

// refuses checks ev against the guardrails that need no plan: the source allow-list, the
// protected topics the event names, then the timeout and throttle it asks for.
func (h *Handlers) refuses(ev *events.Event) error {
	if err := h.guard.Source(ev.Type, ev.Source); err != nil {
		return err
	}
	if err := h.guard.Topics(namedTopics(ev.Payload)...); err != nil {
		return err
	}
	return h.guard.Asks(asked(ev.Payload))
}

// Refuses implements operation.Guard: the source allow-list, the protected topics the
// event names, the timeout and throttle it asks for.
func (h *Handlers) Refuses(ev *events.Event) error { return h.refuses(ev) }

// Partitions implements operation.Guard: guardrails.max_partitions_per_event.
func (h *Handlers) Partitions(n int) error { return h.guard.Partitions(n) }

// Count implements operation.Guard: guardrails.max_operations_per_hour, counted across the
// fleet (events.GuardrailsBucket).
func (h *Handlers) Count(ctx context.Context, alive func() error, ev *events.Event) error {
	return h.ops.count(ctx, alive, ev.Cluster, ev.ID)
}

// protected is the planners' matcher of protected topics; nil when none is configured.
func (h *Handlers) protected() plan.Protected {
	if !h.guard.HasProtected() {
		return nil
	}
	return h.guard.Protected
}

// opLog keeps, per cluster, the operations that wrote to it within the last hour, for the
// whole fleet (events.GuardrailsBucket), and refuses those over
// guardrails.max_operations_per_hour.
type opLog struct {
	bucket *kvbucket.Bucket
	limit  int              // 0: no cap, nothing recorded
	now    func() time.Time // the clock of the records
}

func newOpLog(js jetstream.JetStream, limit int, now func() time.Time) *opLog {
	return &opLog{limit: limit, now: now, bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      events.GuardrailsBucket,
		Description: "operations that wrote to each Kafka cluster within the last hour: guardrails.max_operations_per_hour",
		TTL:         guardrails.Window,
		History:     1,
		Storage:     jetstream.FileStorage,
		MaxBytes:    16 << 20, // full: a write fails (the operation waits), nothing dropped
	})}
}

// conflictRetries bounds the rereads of a record that changed between our read and our
// write.
const conflictRetries = 5

// read returns the record of cluster and its revision (0: none).
func (o *opLog) read(ctx context.Context, kv jetstream.KeyValue, cluster string) ([]guardrails.Op, uint64, error) {
	e, err := kv.Get(ctx, cluster)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, transient(fmt.Errorf("read the operations of cluster %s (%s): %w", cluster, events.GuardrailsBucket, err))
	}
	if e.Operation() != jetstream.KeyValuePut {
		return nil, 0, nil
	}
	var ops []guardrails.Op
	if err := json.Unmarshal(e.Value(), &ops); err != nil {
		// Refused rather than taken for empty: the cap must not be lost to a bad write. The
		// key expires an hour after that write at the latest.
		return nil, 0, transient(fmt.Errorf("decode the operations of cluster %s (%s, revision %d): %w", cluster, events.GuardrailsBucket, e.Revision(), err))
	}
	return ops, e.Revision(), nil
}

// count records that the operation of event begins writing to cluster, or refuses it with a
// *guardrails.Violation when the cluster ran the cap of operations within the hour already.
// An event the record lists already (counted, then interrupted before its journal entry was
// written) is not counted again. The caller holds the cluster's lock, and alive reports
// whether it still does before each write; writes are revision-checked, so a write that
// races another (a holder that lost the lock and does not know it yet) reads the record
// again and decides again.
func (o *opLog) count(ctx context.Context, alive func() error, cluster, event string) error {
	if o.limit == 0 {
		return nil
	}
	kv, err := o.bucket.KeyValue(ctx)
	if err != nil {
		return err
	}
	for range conflictRetries {
		ops, rev, err := o.read(ctx, kv, cluster)
		if err != nil {
			return err
		}
		next, changed, err := guardrails.Admit(ops, cluster, event, o.now(), o.limit)
		if err != nil || !changed {
			return err
		}
		if err := alive(); err != nil {
			return fmt.Errorf("record the operation on cluster %s: %w", cluster, err)
		}
		data, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, cluster, data)
		} else {
			_, err = kv.Update(ctx, cluster, data, rev)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // written by someone else since our read
		default:
			return transient(fmt.Errorf("record the operation on cluster %s (%s): %w", cluster, events.GuardrailsBucket, err))
		}
	}
	return transient(fmt.Errorf("record the operation on cluster %s (%s): the record changed under each of %d writes", cluster, events.GuardrailsBucket, conflictRetries))
}
