package locks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
)

// The NATS JetStream key-value lock: for clusters without ZooKeeper (KRaft), the lock of
// cluster C is the key C of the bucket KVConfig.Bucket.
//
// # Protocol
//
//   - Acquire: a revision-checked create of the key (it succeeds only when the key is
//     absent or deleted). The value is JSON (worker, event, times, and a random token
//     that tells this claim from any other).
//   - Held: the holder renews the entry every TTL/3 with a revision-checked update of its
//     own revision. The bucket's max age is TTL: an entry not renewed for TTL is removed by
//     the server, which leaves a delete marker (LimitMarkerTTL) that wakes the waiters.
//   - Waiting: waiters watch the key and try again when it is deleted or expires (a timer
//     set to its expiry covers a marker that does not come); no polling, unless the watch
//     cannot be created (a leader election): then the waiter reads the entry from the
//     stream's leader and tries again, at least once a second.
//   - Stale entry: a waiter that has seen the same revision of the entry for TTL + margin
//     of its own clock deletes it, conditional on that revision, and tries again. The
//     server should have removed it by then; after a leader election of the bucket's
//     stream it was seen to keep such an entry for many seconds (CI, nats-server 2.12).
//   - Release: a delete conditional on the holder's revision (a holder that lost the lock
//     cannot delete the next holder's entry).
//   - Loss: the holder is told (Context cancelled with ErrLost) when a renewal finds
//     another revision or no entry (taken over, or deleted by an operator), when the watch
//     sees the key deleted or rewritten by someone else, and — without hearing anything —
//     when its last successful renewal is older than TTL − margin.
//
// # Timing
//
// A renewal sent at local time s (monotonic clock) is stored by the server no earlier
// than s, and the server removes the entry TTL after it stored it, by the server's
// clock. The holder counts its lock valid until s + TTL − margin of its own monotonic
// clock, and Err reports ErrLost from then on, even before the renewal goroutine notices:
// so no write is made under the lock after the entry can have expired, as long as the two
// clocks advance at rates within margin/TTL of each other (the default margin is TTL/5:
// 20%). Offsets between the clocks do not matter, only rates; NTP keeps rates within a
// few parts per million. With renewals every TTL/3, two renewals in a row may fail (NATS
// restarting, a slow network) before the lock is given up. A waiter takes the lock only
// after the entry is gone, so mutual exclusion rests on the server's revision-checked
// writes, like the ZooKeeper lock rests on ZooKeeper's. A waiter that deletes a stale
// entry first saw its revision at w, after the renewal that wrote it was sent (s < w):
// it deletes at w + TTL + margin of its clock, after the holder's s + TTL − margin by the
// same bound on rates, and the delete fails if the holder renewed meanwhile.
//
// Kafka writes are not fenced by the server (Kafka knows nothing of the lock): as with the
// ZooKeeper lock, the holder checks Err before each write; the bound on a write in flight
// when the lock is lost is the same margin. ZooKeeper writes need the ZooKeeper lock
// (Held.Multi): clusters whose metadata lives in ZooKeeper keep their lock there.

// Defaults of KVConfig.
const (
	DefaultKVBucket = events.LocksBucket
	DefaultKVTTL    = 10 * time.Second
)

// KVConfig configures a KVLocker.
type KVConfig struct {
	// Bucket is the key-value bucket of the locks. Default KAFKAMENDER_LOCKS.
	Bucket string
	// Worker identifies this worker in its claims. Required.
	Worker string
	// TTL is how long an entry lives without renewal: how soon a dead holder's lock is
	// free. Default 10s; at least 1s.
	TTL time.Duration
	// Margin is how long before the entry can expire the holder stops counting on the
	// lock (see Timing). Default TTL/5.
	Margin time.Duration
	// Wait bounds how long Acquire waits for another holder. Default 5m.
	Wait time.Duration
	// Replicas of the bucket's stream. Default: what the JetStream given to NewKV creates
	// (the worker's gives nats.replicas, natsjs), else the server's default, 1.
	Replicas int
	// Logger. Default: no logging.
	Logger *zap.Logger
}

func (c *KVConfig) setDefaults() {
	if c.Bucket == "" {
		c.Bucket = DefaultKVBucket
	}
	if c.TTL == 0 {
		c.TTL = DefaultKVTTL
	}
	if c.Margin == 0 {
		c.Margin = c.TTL / 5
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports every problem of the configuration.
func (c KVConfig) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Worker) == "" {
		errs = append(errs, errors.New("worker: empty"))
	}
	if c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("ttl: %s is less than 1s", c.TTL))
	}
	if c.Margin <= 0 || c.Margin >= c.TTL/2 {
		errs = append(errs, fmt.Errorf("margin: %s must be positive and less than half the ttl %s", c.Margin, c.TTL))
	}
	if c.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait: %s is negative", c.Wait))
	}
	return errors.Join(errs...)
}

// KVLocker takes per-cluster locks in a NATS JetStream key-value bucket. It is safe for
// concurrent use and not reentrant.
type KVLocker struct {
	cfg    KVConfig
	logger *zap.Logger
	kv     *kvbucket.Bucket
}

// NewKV returns a KVLocker on js. The bucket is created on first use, so a locker can be
// built while NATS is down; an existing bucket is never changed (see TTLMismatchError).
func NewKV(js jetstream.JetStream, cfg KVConfig) (*KVLocker, error) {
	if js == nil {
		return nil, errors.New("kv locker: nil JetStream")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kv locker config: %w", err)
	}
	l := &KVLocker{cfg: cfg, logger: cfg.Logger}
	// The bucket is never changed once created (a worker configured otherwise would change
	// it under the others), and a worker whose TTL differs from it takes no lock.
	l.kv = kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:         cfg.Bucket,
		Description:    "kafkamender per-cluster locks (key = cluster); entries expire unless renewed",
		History:        1,
		TTL:            cfg.TTL,
		LimitMarkerTTL: cfg.TTL,
		Replicas:       cfg.Replicas,
		Storage:        jetstream.FileStorage,
		MaxBytes:       1 << 20, // a claim (a few hundred bytes) per cluster; full: an acquire fails
	}, kvbucket.KeepExisting(), kvbucket.Check(l.checkTTL))
	return l, nil
}

// Config is the locker's configuration, defaults filled in.
func (l *KVLocker) Config() KVConfig { return l.cfg }

// bucket is the locks' bucket, bound on first use.
func (l *KVLocker) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := l.kv.KeyValue(ctx)
	if err != nil {
		if _, mismatch := errors.AsType[*TTLMismatchError](err); !mismatch {
			err = fmt.Errorf("%w: nats: lock %w", ErrNoSession, err)
		}
		return nil, err
	}
	return kv, nil
}

// checkTTL refuses a bucket whose max age is not the locker's TTL. The bucket's max age is
// what expires a holder's entry: a worker that counted on a longer one than the bucket has
// would believe it held a lock another worker can take.
func (l *KVLocker) checkTTL(ctx context.Context, kv jetstream.KeyValue) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", l.cfg.Bucket, err)
	}
	if st.TTL() != l.cfg.TTL {
		return &TTLMismatchError{Bucket: l.cfg.Bucket, BucketTTL: st.TTL(), TTL: l.cfg.TTL}
	}
	return nil
}

// Check reports whether the locker can take locks in its bucket: NATS answers, and the
// bucket (created now if missing) expires entries after this locker's TTL; a
// *TTLMismatchError says it does not.
func (l *KVLocker) Check(ctx context.Context) error {
	_, err := l.bucket(ctx)
	return err
}

// Acquire takes the lock of cluster for the event eventID, waiting for the holder before
// it as long as ctx and the wait (KVConfig.Wait, WithWait) allow. Errors wrap *BusyError
// (the wait ran out while another claim held the lock), ErrNoSession (NATS unreachable:
// worth a retry), or the context's error.
func (l *KVLocker) Acquire(ctx context.Context, cluster, eventID string, opts ...AcquireOption) (_ Lease, err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			err = mark(fmt.Errorf("acquire lock for cluster %s: %w", cluster, err))
		}
	}()
	if err := checkKVKey(cluster); err != nil {
		return nil, fmt.Errorf("cluster name %q: %w", cluster, err)
	}
	wctx, cancel := waitContext(ctx, l.cfg.Wait, opts)
	defer cancel()
	bo := newBackoff()
	// Bound again until the wait ends: on a NATS cluster the bucket's stream may be
	// electing a leader, and a request to it then fails (natsjs bounds each) until one leads.
	kv, err := l.bucket(wctx)
	for err != nil {
		if _, mismatch := errors.AsType[*TTLMismatchError](err); mismatch {
			return nil, err
		}
		l.logger.Debug("lock bucket not bound; trying again", zap.String("cluster", cluster), zap.Error(err))
		if serr := sleepCtx(wctx, bo.NextBackOff()); serr != nil {
			return nil, err
		}
		kv, err = l.bucket(wctx)
	}
	bo.Reset()
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	info := Holder{Worker: l.cfg.Worker, Event: eventID, ClaimedAt: time.Now().UTC().Truncate(time.Millisecond),
		Node: "kv:" + l.cfg.Bucket + "/" + cluster + "#" + hex.EncodeToString(tok[:])}
	var (
		holder *Holder
		seen   seenRevision
	)
	for {
		if seen.stale(l.cfg.TTL + l.cfg.Margin) {
			l.breakStale(wctx, kv, cluster, seen)
		}
		info.AcquiredAt = time.Now().UTC().Truncate(time.Millisecond)
		data, err := encodeKVHolder(info)
		if err != nil {
			return nil, err
		}
		sent := time.Now()
		rev, err := kv.Create(wctx, cluster, data)
		if err == nil {
			h := newKVHeld(l, kv, cluster, info, data, rev, sent, ctx)
			// acquired_at is set before the create was sent: the lock is ours no earlier.
			l.logger.Info("lock acquired", zap.String("cluster", cluster), zap.String("event", eventID),
				zap.Uint64("revision", rev), zap.Duration("waited", time.Since(start)), zap.String("acquired_at", info.AcquiredAt.Format(time.RFC3339Nano)))
			return h, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if wctx.Err() != nil {
				return nil, l.explain(wctx, start, holder, err)
			}
			l.logger.Debug("lock create failed; trying again", zap.String("cluster", cluster), zap.Error(err))
			if err := sleepCtx(wctx, bo.NextBackOff()); err != nil {
				return nil, l.explain(wctx, start, holder, fmt.Errorf("%w: %w", ErrNoSession, err))
			}
			continue
		}
		bo.Reset()
		h, err := l.waitFree(wctx, kv, cluster, &seen)
		if h != nil {
			holder = h
		}
		if err != nil {
			return nil, l.explain(wctx, start, holder, err)
		}
	}
}

// seenRevision is the revision of a lock entry a waiter saw, and when it first saw it
// (monotonic clock).
type seenRevision struct {
	rev uint64
	at  time.Time
}

// see records that the entry is at revision rev now.
func (s *seenRevision) see(rev uint64) {
	if rev != s.rev {
		s.rev, s.at = rev, time.Now()
	}
}

// stale reports whether the same revision has been seen for at least d.
func (s seenRevision) stale(d time.Duration) bool {
	return s.rev != 0 && time.Since(s.at) >= d
}

// breakStale deletes the entry of key if it is still at the revision seen, which has not
// changed for TTL + margin: its holder stopped counting on it (see Timing), and the server
// has not removed it. Failures are left to the next create, which says who holds the lock.
func (l *KVLocker) breakStale(ctx context.Context, kv jetstream.KeyValue, key string, seen seenRevision) {
	err := kv.Delete(ctx, key, jetstream.LastRevision(seen.rev))
	fields := []zap.Field{zap.String("cluster", key), zap.Uint64("revision", seen.rev), zap.Duration("seen_for", time.Since(seen.at))}
	if err != nil {
		l.logger.Info("lock entry not renewed and not removed by the server: its delete failed", append(fields, zap.Error(err))...)
		return
	}
	l.logger.Warn("lock entry not renewed and not removed by the server: deleted at its revision", fields...)
}

// waitFree watches the key until it is deleted, expires, or is found absent; it returns
// the holder it saw, and records the entry's revision in seen.
func (l *KVLocker) waitFree(ctx context.Context, kv jetstream.KeyValue, key string, seen *seenRevision) (*Holder, error) {
	// A watch is a consumer of the bucket's stream, which the meta leader places: while
	// the stream or the meta group elects a leader, its create can go unanswered for many
	// seconds (on the stack, after the bucket's leader was killed, for a whole 11 s
	// wait). Its create is bounded by TTL, and a waiter that cannot watch reads instead.
	// The bound cancels the watch's context, which is also the watch's life (nats.go
	// unsubscribes when it ends), so it is disarmed once the watch is made.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bound := time.AfterFunc(l.cfg.TTL, cancel)
	w, err := kv.Watch(wctx, key, jetstream.IncludeHistory())
	if !bound.Stop() && err == nil {
		_ = w.Stop()
		err = fmt.Errorf("not made within %s", l.cfg.TTL)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: watch lock %s: %w", ErrNoSession, key, err)
		}
		return l.readFree(ctx, kv, key, seen, err)
	}
	defer func() { _ = w.Stop() }()
	var holder *Holder
	expiry := time.NewTimer(l.cfg.TTL + time.Second)
	defer expiry.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return holder, fmt.Errorf("%w: watch of lock %s ended", ErrNoSession, key)
			}
			if e == nil {
				continue // the current value was delivered
			}
			if e.Operation() != jetstream.KeyValuePut {
				*seen = seenRevision{}
				return holder, nil // released, broken, or expired (limit marker)
			}
			var wait time.Duration
			holder, wait = l.saw(e, seen)
			expiry.Reset(wait)
		case <-expiry.C:
			return holder, nil // try again: the entry expired, or the create says who holds it
		case <-ctx.Done():
			return holder, context.Cause(ctx)
		}
	}
}

// readFree is waitFree without a watch, whose create failed (werr): it reads the entry
// from the bucket's stream leader, records its revision in seen, and waits until the entry
// can have expired, at most a second, before the next create.
func (l *KVLocker) readFree(ctx context.Context, kv jetstream.KeyValue, key string, seen *seenRevision, werr error) (*Holder, error) {
	l.logger.Debug("lock watch not created; reading the entry instead", zap.String("cluster", key), zap.Error(werr))
	var holder *Holder
	wait := time.Second
	rctx, cancel := context.WithTimeout(ctx, l.cfg.TTL)
	e, err := kv.Get(rctx, key) // a leader read (kvbucket.Bucket.Latest)
	cancel()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		*seen = seenRevision{}
		return nil, nil // released, broken, or expired
	case err != nil:
		l.logger.Debug("lock entry not read either; trying the create again", zap.String("cluster", key), zap.Error(err))
	default:
		var expires time.Duration
		holder, expires = l.saw(e, seen)
		wait = min(wait, expires)
	}
	return holder, sleepCtx(ctx, wait)
}

// saw records a put of the lock entry a waiter saw: its revision in seen. It returns the
// holder the entry names and how long to wait until it can have expired: TTL after the
// server stored it, unless renewed (a renewal is another put), and at least 200ms.
func (l *KVLocker) saw(e jetstream.KeyValueEntry, seen *seenRevision) (*Holder, time.Duration) {
	h := parseKVHolder(e.Value())
	seen.see(e.Revision())
	return &h, max(time.Until(e.Created().Add(l.cfg.TTL))+200*time.Millisecond, 200*time.Millisecond)
}

func (l *KVLocker) explain(ctx context.Context, start time.Time, holder *Holder, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		waited := time.Since(start).Round(time.Millisecond)
		if holder != nil {
			return &BusyError{Holder: *holder, cause: context.DeadlineExceeded}
		}
		return fmt.Errorf("gave up after %s: %w", waited, err)
	}
	return err
}

// Holder returns who holds the lock of cluster, or nil when nobody does. It reads from
// the bucket's leader (kvbucket.Bucket.Latest): a replica's answer may predate the last
// acquire or release.
func (l *KVLocker) Holder(ctx context.Context, cluster string) (*Holder, error) {
	kv, err := l.bucket(ctx)
	if err != nil {
		return nil, mark(err)
	}
	e, err := kv.Get(ctx, cluster)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mark(fmt.Errorf("%w: lock holder of cluster %s: %w", ErrNoSession, cluster, err))
	}
	h := parseKVHolder(e.Value())
	return &h, nil
}

// checkKVKey checks a cluster name as a key-value key.
func checkKVKey(s string) error {
	if err := checkName(s); err != nil {
		return err
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=.", r)) {
			return fmt.Errorf("%q is not allowed in a NATS key", r)
		}
	}
	if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
		return errors.New("must not start or end with '.'")
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// KVHeld is a lock taken by KVLocker.Acquire, valid until it is released or lost (see
// Held for the contract; it is the same).
type KVHeld struct {
	l       *KVLocker
	kv      jetstream.KeyValue
	cluster string
	info    Holder
	data    []byte
	logger  *zap.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // the renewal goroutine ended

	mu         sync.Mutex
	rev        uint64
	validUntil time.Time // monotonic: last renewal sent + TTL − margin
}

func newKVHeld(l *KVLocker, kv jetstream.KeyValue, cluster string, info Holder, data []byte, rev uint64, sent time.Time, parent context.Context) *KVHeld {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	h := &KVHeld{l: l, kv: kv, cluster: cluster, info: info, data: data, rev: rev,
		validUntil: sent.Add(l.cfg.TTL - l.cfg.Margin), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		logger: l.logger.With(zap.String("cluster", cluster), zap.String("event", info.Event))}
	go h.keep()
	return h
}

// Cluster is the cluster whose lock this is.
func (h *KVHeld) Cluster() string { return h.cluster }

// Info is what the entry says: worker, event, when the lock was taken.
func (h *KVHeld) Info() Holder { return h.info }

// Context is cancelled when the lock is released or lost; context.Cause wraps ErrReleased
// or ErrLost.
func (h *KVHeld) Context() context.Context { return h.ctx }

// Err is nil while the lock is held, then why it is not (wrapping ErrLost or
// ErrReleased). Past the validity of the last renewal it reports the loss at once.
func (h *KVHeld) Err() error {
	if h.ctx.Err() == nil {
		h.mu.Lock()
		expired := time.Now().After(h.validUntil)
		h.mu.Unlock()
		if !expired {
			return nil
		}
		h.lose(fmt.Errorf("%w: not renewed within %s (the entry may have expired)", ErrLost, h.l.cfg.TTL-h.l.cfg.Margin))
	}
	return mark(context.Cause(h.ctx))
}

// Release gives the lock up: it cancels Context and deletes the entry if it is still
// ours. It may be called any number of times, also after the lock was lost.
func (h *KVHeld) Release(ctx context.Context) error {
	stopped := time.Now() // the holder counts on the lock no more
	lost := h.ctx.Err() != nil && errors.Is(context.Cause(h.ctx), ErrLost)
	h.cancel(fmt.Errorf("lock of cluster %s: %w", h.cluster, ErrReleased))
	<-h.done
	if lost {
		return nil // not ours any more: nothing to delete
	}
	h.mu.Lock()
	rev := h.rev
	h.mu.Unlock()
	err := h.kv.Delete(ctx, h.cluster, jetstream.LastRevision(rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// A renewal cut short by the release may have landed after all: the entry is
		// still ours if it carries our token.
		if e, gerr := h.kv.Get(ctx, h.cluster); gerr == nil && parseKVHolder(e.Value()).Node == h.info.Node {
			err = h.kv.Delete(ctx, h.cluster, jetstream.LastRevision(e.Revision()))
		}
	}
	// stopped_at: when the holder stopped counting on the lock, before the entry went. It
	// is logged whatever became of the entry: a holder whose delete failed stopped all
	// the same (fault tests read each holder's window from these lines).
	released := func(entry string) {
		h.logger.Info("lock released", zap.Duration("held", time.Since(h.info.AcquiredAt)),
			zap.String("stopped_at", stopped.UTC().Format(time.RFC3339Nano)), zap.String("entry", entry))
	}
	switch {
	case err == nil:
		released("deleted")
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
		released("expired or taken over meanwhile") // nothing of ours is left
		return nil
	default:
		released("not deleted: it expires within " + h.l.cfg.TTL.String())
		return mark(fmt.Errorf("%w: release lock of cluster %s (it expires within %s): %w", ErrNoSession, h.cluster, h.l.cfg.TTL, err))
	}
}

func (h *KVHeld) lose(cause error) {
	if h.ctx.Err() != nil {
		return
	}
	h.cancel(fmt.Errorf("lock of cluster %s: %w", h.cluster, cause))
	if errors.Is(context.Cause(h.ctx), ErrLost) {
		// stopped_at: from when the holder did not count on the lock (Err says lost past
		// the last renewal's validity, even before this line).
		h.mu.Lock()
		stopped := time.Now()
		if h.validUntil.Before(stopped) {
			stopped = h.validUntil
		}
		h.mu.Unlock()
		h.logger.Warn("lock lost: stop before the next write", zap.Error(cause), zap.String("stopped_at", stopped.UTC().Format(time.RFC3339Nano)))
	}
}

// keep renews the entry every TTL/3 and watches it, until the lock is released or lost.
func (h *KVHeld) keep() {
	defer close(h.done)
	ttl := h.l.cfg.TTL
	watchCtx, stopWatch := context.WithCancel(h.ctx)
	defer stopWatch()
	go h.watch(watchCtx)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		h.mu.Lock()
		deadline := time.Until(h.validUntil)
		h.mu.Unlock()
		expire := time.NewTimer(deadline)
		select {
		case <-h.ctx.Done():
			expire.Stop()
			return
		case <-expire.C:
			h.lose(fmt.Errorf("%w: not renewed within %s (the entry may have expired)", ErrLost, ttl-h.l.cfg.Margin))
			return
		case <-tick.C:
			expire.Stop()
			h.renew()
		}
	}
}

func (h *KVHeld) renew() {
	h.mu.Lock()
	rev := h.rev
	h.mu.Unlock()
	sent := time.Now()
	ctx, cancel := context.WithTimeout(h.ctx, h.l.cfg.TTL/3)
	defer cancel()
	next, err := h.kv.Update(ctx, h.cluster, h.data, rev)
	switch {
	case err == nil:
		h.mu.Lock()
		h.rev, h.validUntil = next, sent.Add(h.l.cfg.TTL-h.l.cfg.Margin)
		h.mu.Unlock()
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
		h.lose(fmt.Errorf("%w: the lock entry was taken over or deleted (renewal of revision %d: %v)", ErrLost, rev, err))
	case h.ctx.Err() != nil:
	default:
		h.logger.Warn("lock renewal failed; trying again", zap.Error(err))
	}
}

// watch marks the lock lost when the entry is deleted or rewritten by someone else.
func (h *KVHeld) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := h.kv.Watch(ctx, h.cluster, jetstream.UpdatesOnly())
		if err != nil {
			if sleepCtx(ctx, time.Second) != nil {
				return
			}
			continue
		}
		for ctx.Err() == nil {
			e, ok := <-w.Updates()
			if !ok {
				break
			}
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				h.lose(fmt.Errorf("%w: the lock entry was deleted (%s)", ErrLost, e.Operation()))
				_ = w.Stop()
				return
			}
			if parseKVHolder(e.Value()).Node != h.info.Node {
				h.lose(fmt.Errorf("%w: the lock entry was rewritten by someone else", ErrLost))
				_ = w.Stop()
				return
			}
		}
		_ = w.Stop()
	}
}
