package locks

import (
	"context"
	"encoding/json"
)

// Lease is a held lock of either backend (*Held for ZooKeeper, *KVHeld for NATS
// key-value), with one contract: Context is cancelled, with a cause wrapping ErrLost or
// ErrReleased, as soon as the lock is lost or released; Err is nil while it is held;
// Release is idempotent. A holder checks Err before every write it makes under the lock.
type Lease interface {
	Cluster() string
	Info() Holder
	Context() context.Context
	Err() error
	Release(ctx context.Context) error
}

// Backend takes per-cluster locks: ZooKeeper (ZK) or NATS JetStream key-value (*KVLocker).
type Backend interface {
	Acquire(ctx context.Context, cluster, eventID string, opts ...AcquireOption) (Lease, error)
	Holder(ctx context.Context, cluster string) (*Holder, error)
}

var (
	_ Lease   = (*Held)(nil)
	_ Lease   = (*KVHeld)(nil)
	_ Backend = (*KVLocker)(nil)
	_ Backend = ZK(nil)
)

// ZK is the ZooKeeper Locker as a Backend; its leases are *Held (whose Multi fences
// ZooKeeper writes).
func ZK(l *Locker) Backend { return zkBackend{l} }

type zkBackend struct{ l *Locker }

func (b zkBackend) Acquire(ctx context.Context, cluster, eventID string, opts ...AcquireOption) (Lease, error) {
	h, err := b.l.Acquire(ctx, cluster, eventID, opts...)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (b zkBackend) Holder(ctx context.Context, cluster string) (*Holder, error) {
	return b.l.Holder(ctx, cluster)
}

// kvValue is the value of a key-value lock entry: the holder, and the claim's unique
// name (Holder.Node, which the ZooKeeper lock keeps in the node's path, not its data).
type kvValue struct {
	Holder
	Claim string `json:"claim"`
}

func encodeKVHolder(h Holder) ([]byte, error) { return json.Marshal(kvValue{Holder: h, Claim: h.Node}) }

// parseKVHolder decodes the value of a key-value lock entry.
func parseKVHolder(data []byte) Holder {
	var v kvValue
	_ = json.Unmarshal(data, &v)
	h := v.Holder
	h.Node = v.Claim
	return h
}
