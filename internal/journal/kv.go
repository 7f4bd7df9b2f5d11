package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
)

// kv is where the journal keeps its entries: a revision-checked key-value store. Keys are
// dot-separated tokens (NATS subjects), values bytes.
type kv interface {
	// get returns the value of key and its revision; errNotFound when it has none.
	get(ctx context.Context, key string) ([]byte, uint64, error)
	// create stores a value under a key that has none; errExists otherwise.
	create(ctx context.Context, key string, val []byte) (uint64, error)
	// update stores a value if the key is at revision rev; errRevision otherwise
	// (errNotFound when the key has no value).
	update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error)
	// remove erases key's value of revision rev, leaving nothing: no delete marker, no
	// history (it is for keys written once). A value gone already is no error.
	remove(ctx context.Context, key string, rev uint64) error
	// keys lists the keys that have a value and match filter (NATS subject wildcards: "*"
	// one token, ">" the rest), with their revisions.
	keys(ctx context.Context, filter string) (map[string]uint64, error)
	// maxValue is the largest value one write stores (0: no limit).
	maxValue() int
}

var (
	errNotFound = errors.New("no such key")
	errExists   = errors.New("key exists")
	errRevision = errors.New("revision mismatch")
)

// payloadHeadroom is what a key-value write needs besides its value within the server's
// max_payload: the message headers (expected revision, and room for what a later server
// or client adds).
const payloadHeadroom = 8 << 10

// natsKV is kv on the JetStream key-value bucket Bucket.
type natsKV struct {
	js     jetstream.JetStream
	bucket *kvbucket.Bucket
}

var _ kv = (*natsKV)(nil)

func newNatsKV(js jetstream.JetStream, opts ...kvbucket.Option) *natsKV {
	return &natsKV{js: js, bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "kafkamender operation journal: the operation in hand on each Kafka cluster",
		History:     16,
		Storage:     jetstream.FileStorage,
		MaxBytes:    512 << 20, // full: a write fails (the operation waits), never an entry dropped
	}, opts...)}
}

// kv is the bucket and its stream, KV_<Bucket>, bound on first use.
func (n *natsKV) kv(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	return n.bucket.Stream(ctx)
}

func (n *natsKV) get(ctx context.Context, key string) ([]byte, uint64, error) {
	kv, _, err := n.kv(ctx)
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
	kv, _, err := n.kv(ctx)
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
	kv, _, err := n.kv(ctx)
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

// remove purges key's subject from the bucket's stream, up to revision rev. A key-value
// delete or purge would leave a marker per key for good (a delete keeps the value too, in
// the key's history of 16): the chunks of every large write would pile up as markers. A
// stream purge of the subject leaves nothing. (Key-value streams deny deleting a message
// by sequence; they allow purging.)
func (n *natsKV) remove(ctx context.Context, key string, rev uint64) error {
	_, stream, err := n.kv(ctx)
	if err != nil {
		return err
	}
	err = stream.Purge(ctx, jetstream.WithPurgeSubject("$KV."+Bucket+"."+key), jetstream.WithPurgeSequence(rev+1))
	if err != nil {
		return fmt.Errorf("remove %s (revision %d): %w", key, rev, err)
	}
	return nil
}

// keys asks the stream which subjects under filter hold messages (one request, the
// common answer being none) and, only when some do, reads their revisions with a
// headers-only watch (which skips deleted keys).
func (n *natsKV) keys(ctx context.Context, filter string) (map[string]uint64, error) {
	kv, stream, err := n.kv(ctx)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + Bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+filter))
	if err != nil {
		return nil, err
	}
	if len(info.State.Subjects) == 0 {
		return nil, nil
	}
	w, err := kv.WatchFiltered(ctx, []string{filter}, jetstream.MetaOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	out := map[string]uint64{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list keys %s: the watch ended", filter)
			}
			if e == nil { // the keys as of the watch's start are all in
				return out, nil
			}
			out[e.Key()] = e.Revision()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// maxValue is the connection's max payload (the server's max_payload) less the headroom
// for headers: values larger than that are written in chunks.
func (n *natsKV) maxValue() int {
	mp := int(n.js.Conn().MaxPayload())
	if mp <= 0 {
		// Not connected yet (the server says its max_payload when a connection opens): the
		// write fails or waits for one; chunks of 64 KiB suit any server.
		return 64 << 10
	}
	return max(mp-payloadHeadroom, 1<<10)
}

// Memory is a journal kept in memory, for tests of what uses the journal: the same rules
// (revision-checked writes, one entry per cluster), and failures on demand.
type Memory struct {
	mu   sync.Mutex
	rev  uint64
	vals map[string]memValue
	// max, when set, is the largest value one write stores: larger entries are written in
	// chunks, as in JetStream.
	max int
	// fail, when set, is asked before each write (op "create" or "update") of key: a
	// non-nil error fails the write, which then stores nothing (but see ErrAckLost).
	fail func(op, key string) error
}

// ErrAckLost, returned (or wrapped) by the function given to Memory.FailWrites for an
// update, stores the update and then fails it: the write whose acknowledgement a NATS node
// lost as it stopped.
var ErrAckLost = errors.New("the write was stored, its acknowledgement lost")

var _ kv = (*Memory)(nil)

type memValue struct {
	val []byte
	rev uint64
}

// NewMemory returns a journal kept in memory, and the memory (to inject failures).
func NewMemory() (*Store, *Memory) { return NewMemoryMaxValue(0) }

// NewMemoryMaxValue is NewMemory with max the largest value one write stores (as a NATS
// server's max_payload bounds a message), so that entries larger than max are written in
// chunks, as they are in JetStream: chunk writes (op "create", key
// "<cluster>.chunks.<nonce>.<i>") reach FailWrites too. 0: no limit, as NewMemory.
func NewMemoryMaxValue(max int) (*Store, *Memory) {
	m := &Memory{vals: map[string]memValue{}, max: max}
	return newStore(m), m
}

// FailWrites makes each later write ask f first (op is "create" or "update"): a non-nil
// error fails the write (an update failed with ErrAckLost is stored all the same). Nil:
// writes succeed again.
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
	if err := m.check("create", key, val); err != nil {
		return 0, err
	}
	if _, ok := m.vals[key]; ok {
		return 0, errExists
	}
	return m.put(key, val), nil
}

func (m *Memory) update(_ context.Context, key string, val []byte, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	failed := m.check("update", key, val)
	if failed != nil && !errors.Is(failed, ErrAckLost) {
		return 0, failed
	}
	v, ok := m.vals[key]
	switch {
	case !ok:
		return 0, errNotFound
	case v.rev != rev:
		return 0, errRevision
	}
	n := m.put(key, val)
	if failed != nil {
		return 0, failed
	}
	return n, nil
}

func (m *Memory) check(op, key string, val []byte) error {
	if m.fail != nil {
		if err := m.fail(op, key); err != nil {
			return err
		}
	}
	if m.max > 0 && len(val) > m.max {
		return fmt.Errorf("%s %s: value of %d bytes over the maximum of %d", op, key, len(val), m.max)
	}
	return nil
}

func (m *Memory) put(key string, val []byte) uint64 {
	m.rev++
	m.vals[key] = memValue{val: append([]byte(nil), val...), rev: m.rev}
	return m.rev
}

func (m *Memory) remove(_ context.Context, key string, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.vals[key]; ok && v.rev == rev {
		delete(m.vals, key)
	}
	return nil
}

func (m *Memory) keys(_ context.Context, filter string) (map[string]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]uint64{}
	for k, v := range m.vals {
		if events.SubjectMatches(filter, k) {
			out[k] = v.rev
		}
	}
	return out, nil
}

func (m *Memory) maxValue() int { return m.max }
