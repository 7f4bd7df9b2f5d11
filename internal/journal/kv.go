package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// kv is where the journal keeps its entries: a revision-checked key-value store.
type kv interface {
	// get returns the value of key and its revision; errNotFound when it has none.
	get(ctx context.Context, key string) ([]byte, uint64, error)
	// create stores a value under a key that has none; errExists otherwise.
	create(ctx context.Context, key string, val []byte) (uint64, error)
	// update stores a value if the key is at revision rev; errRevision otherwise
	// (errNotFound when the key has no value).
	update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error)
	// keys lists the keys that have a value.
	keys(ctx context.Context) ([]string, error)
}

var (
	errNotFound = errors.New("no such key")
	errExists   = errors.New("key exists")
	errRevision = errors.New("revision mismatch")
)

// natsKV is kv on the JetStream key-value bucket Bucket.
type natsKV struct {
	js jetstream.JetStream

	mu     sync.Mutex
	bucket jetstream.KeyValue
}

func (n *natsKV) kv(ctx context.Context) (jetstream.KeyValue, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.bucket != nil {
		return n.bucket, nil
	}
	kv, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "kafkamender operation journal: the operation in hand on each Kafka cluster",
		History:     16,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s: %w", Bucket, err))
	}
	n.bucket = kv
	return kv, nil
}

func (n *natsKV) get(ctx context.Context, key string) ([]byte, uint64, error) {
	kv, err := n.kv(ctx)
	if err != nil {
		return nil, 0, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, errNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	if e.Operation() != jetstream.KeyValuePut {
		return nil, 0, errNotFound
	}
	return e.Value(), e.Revision(), nil
}

func (n *natsKV) create(ctx context.Context, key string, val []byte) (uint64, error) {
	kv, err := n.kv(ctx)
	if err != nil {
		return 0, err
	}
	rev, err := kv.Create(ctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, errExists
	}
	return rev, err
}

func (n *natsKV) update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	kv, err := n.kv(ctx)
	if err != nil {
		return 0, err
	}
	rev, err = kv.Update(ctx, key, val, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, errRevision
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, errNotFound
	}
	return rev, err
}

func (n *natsKV) keys(ctx context.Context) ([]string, error) {
	kv, err := n.kv(ctx)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Memory is a journal kept in memory, for tests of what uses the journal: the same rules
// (revision-checked writes, one entry per cluster), and failures on demand.
type Memory struct {
	mu   sync.Mutex
	rev  uint64
	vals map[string]memValue
	// fail, when set, is asked before each write (op "create" or "update") of key: a
	// non-nil error fails the write, which then stores nothing.
	fail func(op, key string) error
}

type memValue struct {
	val []byte
	rev uint64
}

// NewMemory returns a journal kept in memory, and the memory (to inject failures).
func NewMemory() (*Store, *Memory) {
	m := &Memory{vals: map[string]memValue{}}
	return &Store{kv: m}, m
}

// FailWrites makes each later write ask f first (op is "create" or "update"): a non-nil
// error fails the write. Nil: writes succeed again.
func (m *Memory) FailWrites(f func(op, key string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = f
}

func (m *Memory) get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	if !ok {
		return nil, 0, errNotFound
	}
	return append([]byte(nil), v.val...), v.rev, nil
}

func (m *Memory) create(_ context.Context, key string, val []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		if err := m.fail("create", key); err != nil {
			return 0, err
		}
	}
	if _, ok := m.vals[key]; ok {
		return 0, errExists
	}
	return m.put(key, val), nil
}

func (m *Memory) update(_ context.Context, key string, val []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		if err := m.fail("update", key); err != nil {
			return 0, err
		}
	}
	v, ok := m.vals[key]
	switch {
	case !ok:
		return 0, errNotFound
	case v.rev != rev:
		return 0, errRevision
	}
	return m.put(key, val), nil
}

func (m *Memory) put(key string, val []byte) uint64 {
	m.rev++
	m.vals[key] = memValue{val: append([]byte(nil), val...), rev: m.rev}
	return m.rev
}

func (m *Memory) keys(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.vals))
	for k := range m.vals {
		out = append(out, k)
	}
	return out, nil
}
