package locks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

const cluster = "kafka-test"

// Two lockers on separate sessions: the second is told who holds the lock when its wait
// runs out, and takes the lock as soon as the first releases it. No claim is left over.
func TestBusyThenHandOff(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	la, lb := f.locker("worker-a", nil), f.locker("worker-b", nil)

	ha, err := la.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	f.wantClaims(la, cluster, ha.Node())

	// The claim node says who holds the lock.
	data, _, err := f.obs.Get(ha.Node())
	if err != nil {
		t.Fatal(err)
	}
	var claim map[string]string
	if err := json.Unmarshal(data, &claim); err != nil {
		t.Fatalf("claim data %s: %v", data, err)
	}
	if claim["worker"] != "worker-a" || claim["event"] != "event-a" {
		t.Errorf("claim data = %s, want worker-a and event-a", data)
	}
	// Taken at once: the claim's time is when it took the lock (one ZooKeeper write saved).
	if _, err := time.Parse(time.RFC3339, claim["claimed_at"]); err != nil || claim["acquired_at"] != "" {
		t.Errorf("claim data %s: want claimed_at (%v), and no acquired_at for a lock taken at once", data, err)
	}

	// A short wait ends with ErrBusy naming the holder, and leaves no claim.
	start := time.Now()
	_, err = lb.Acquire(ctx, cluster, "event-b", locks.WithWait(300*time.Millisecond))
	waited := time.Since(start)
	if !errors.Is(err, locks.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || !locks.IsTransient(err) || !markedTransient(err) {
		t.Fatalf("acquire of a busy lock: %v, want ErrBusy (transient)", err)
	}
	if waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Errorf("acquire of a busy lock returned after %s, want about 300ms", waited)
	}
	var busy *locks.BusyError
	if !errors.As(err, &busy) || busy.Holder.Worker != "worker-a" || busy.Holder.Event != "event-a" || busy.Holder.Node != ha.Node() {
		t.Errorf("busy error holder = %+v, want worker-a, event-a, %s", busy, ha.Node())
	}
	want := "acquire lock for cluster " + cluster + ": lock busy: held by worker worker-a for event event-a since "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("busy error = %q, want prefix %q", err, want)
	}
	f.wantClaims(la, cluster, ha.Node())

	// A long wait ends when the holder releases.
	ch := acquireAsync(ctx, lb, cluster, "event-b")
	f.waitClaims(la, cluster, 2)
	select {
	case r := <-ch:
		t.Fatalf("second locker got the lock while the first held it: %+v", r)
	default:
	}
	if hd, err := lb.Holder(ctx, cluster); err != nil || hd == nil || hd.Worker != "worker-a" {
		t.Fatalf("holder while a holds: %+v, %v", hd, err)
	}
	release(t, ha)
	r := await(t, ch, 10*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	hb := r.h
	f.wantClaims(la, cluster, hb.Node())
	if hd, err := la.Holder(ctx, cluster); err != nil || hd == nil || hd.Worker != "worker-b" || hd.Event != "event-b" || hd.AcquiredAt.IsZero() {
		t.Fatalf("holder after hand-off: %+v, %v", hd, err)
	}
	if err := ha.Err(); !errors.Is(err, locks.ErrReleased) {
		t.Errorf("released lock: Err() = %v, want ErrReleased", err)
	}
	release(t, hb)
	f.wantClaims(la, cluster)
	if hd, err := la.Holder(ctx, cluster); err != nil || hd != nil {
		t.Fatalf("holder after release: %+v, %v", hd, err)
	}
}

// Cancelling a waiting Acquire returns at once, removes its claim, and leaves nothing that
// takes the lock later.
func TestCancelWhileWaiting(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	la, lb, lc := f.locker("worker-a", nil), f.locker("worker-b", nil), f.locker("worker-c", nil)

	ha, err := la.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	ch := acquireAsync(cctx, lb, cluster, "event-b")
	f.waitClaims(la, cluster, 2)

	start := time.Now()
	cancel()
	r := await(t, ch, 5*time.Second)
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancelled acquire returned after %s", took)
	}
	if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, locks.ErrBusy) || locks.IsTransient(r.err) || markedTransient(r.err) {
		t.Fatalf("cancelled acquire: %v, %v; want context.Canceled only", r.h, r.err)
	}
	f.wantClaims(la, cluster, ha.Node()) // the cancelled claim is gone already

	release(t, ha)
	f.wantClaims(la, cluster)
	// Nobody took the lock behind the caller's back: a third locker gets it at once, and
	// it is the only claim.
	hc, err := lc.Acquire(ctx, cluster, "event-c", locks.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("lock after the cancelled acquire: %v", err)
	}
	f.wantClaims(lc, cluster, hc.Node())
	release(t, hc)
	f.wantClaims(lc, cluster)
}

// The holder's session expires for real (cut off behind a proxy until ZooKeeper drops
// it): the holder is told, another worker takes the lock, and a fenced write of the old
// holder fails on the server and changes nothing.
func TestHolderSessionExpires(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	proxy := testenv.NewZKProxy(t)
	sa := f.session(proxy.Addr(), locks.SessionConfig{
		Timeout:             2 * time.Second,
		LossAfterDisconnect: -1, // wait for the server's verdict
	})
	la, lb := f.locker("worker-a", sa), f.locker("worker-b", nil)
	events, stop := sa.Subscribe(64)
	defer stop()

	dataPath := f.root + "/data"
	if _, err := f.obs.Create(dataPath, []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ha, err := la.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ha.Multi(ctx, &zk.SetDataRequest{Path: dataPath, Data: []byte("v1"), Version: -1}); err != nil {
		t.Fatalf("fenced write while holding: %v", err)
	}
	expired := sa.Expired()
	ch := acquireAsync(ctx, lb, cluster, "event-b")
	f.waitClaims(la, cluster, 2)

	ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := proxy.ExpireSession(ectx, sa.Conn()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ha.Lost(), 15*time.Second, "holder told of its expired session")
	if err := context.Cause(ha.Context()); !errors.Is(err, locks.ErrLost) || !errors.Is(err, zk.ErrSessionExpired) {
		t.Errorf("cause of the lost lock = %v, want ErrLost and zk.ErrSessionExpired", err)
	}
	waitClosed(t, expired, time.Second, "session's Expired channel")
	sawExpired := false
	for !sawExpired {
		select {
		case ev := <-events:
			sawExpired = ev.State == zk.StateExpired
		case <-time.After(5 * time.Second):
			t.Fatal("no StateExpired event on the subscription")
		}
	}

	r := await(t, ch, 15*time.Second)
	if r.err != nil {
		t.Fatalf("acquire after the holder's session expired: %v", r.err)
	}
	hb := r.h

	// The old holder cannot write: refused locally…
	if _, err := ha.Multi(ctx, &zk.SetDataRequest{Path: dataPath, Data: []byte("stale"), Version: -1}); !errors.Is(err, locks.ErrLost) {
		t.Errorf("fenced write of the lost holder: %v, want ErrLost", err)
	}
	// …and by ZooKeeper, on the connection's new session, before anyone noticed.
	g, err := sa.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID() == ha.SessionID() {
		t.Fatalf("session 0x%x survived its expiry", g.ID())
	}
	if _, err := sa.Conn().Multi(ha.Fence(), &zk.SetDataRequest{Path: dataPath, Data: []byte("stale"), Version: -1}); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("raw fenced write of the lost holder: %v, want zk.ErrNoNode", err)
	}
	if data, _, err := f.obs.Get(dataPath); err != nil || string(data) != "v1" {
		t.Errorf("data after the stale writes = %q, %v; want v1", data, err)
	}
	// The new holder writes; releasing the lost one is harmless and idempotent.
	if _, err := hb.Multi(ctx, &zk.SetDataRequest{Path: dataPath, Data: []byte("v2"), Version: -1}); err != nil {
		t.Fatalf("fenced write of the new holder: %v", err)
	}
	release(t, ha)
	release(t, ha)
	f.wantClaims(la, cluster, hb.Node())
	release(t, hb)
	f.wantClaims(la, cluster)
}

// A session that expires while its Acquire waits makes the Acquire fail, transiently,
// without a claim left; the locker works again on the next session.
func TestSessionExpiresWhileWaiting(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	proxy := testenv.NewZKProxy(t)
	sb := f.session(proxy.Addr(), locks.SessionConfig{Timeout: 2 * time.Second, LossAfterDisconnect: -1})
	la, lb := f.locker("worker-a", nil), f.locker("worker-b", sb)

	ha, err := la.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	ch := acquireAsync(ctx, lb, cluster, "event-b")
	f.waitClaims(la, cluster, 2)
	ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := proxy.ExpireSession(ectx, sb.Conn()); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 15*time.Second)
	if !errors.Is(r.err, locks.ErrLost) || !errors.Is(r.err, zk.ErrSessionExpired) || !locks.IsTransient(r.err) || !markedTransient(r.err) {
		t.Fatalf("acquire whose session expired: %v, %v; want transient ErrLost", r.h, r.err)
	}
	f.wantClaims(la, cluster, ha.Node())
	release(t, ha)

	hb, err := lb.Acquire(ctx, cluster, "event-b", locks.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("acquire on the next session: %v", err)
	}
	f.wantClaims(lb, cluster, hb.Node())
	release(t, hb)
}

// A connection down for longer than LossAfterDisconnect loses the lock without waiting for
// the server; when the same session comes back, the lost claim is deleted.
func TestLossAfterDisconnect(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	proxy := testenv.NewZKProxy(t)
	sa := f.session(proxy.Addr(), locks.SessionConfig{Timeout: 8 * time.Second, LossAfterDisconnect: 300 * time.Millisecond})
	la := f.locker("worker-a", sa)

	ha, err := la.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	waitClosed(t, ha.Lost(), 5*time.Second, "holder told of the long disconnection")
	if err := ha.Err(); !errors.Is(err, locks.ErrLost) || !errors.Is(err, locks.ErrDisconnected) {
		t.Errorf("cause = %v, want ErrLost and ErrDisconnected", err)
	}
	if _, err := ha.Multi(ctx, &zk.SetDataRequest{Path: f.root, Data: nil, Version: -1}); !errors.Is(err, locks.ErrLost) {
		t.Errorf("fenced write after the loss: %v, want ErrLost", err)
	}
	proxy.Heal()
	g, err := sa.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID() != ha.SessionID() {
		t.Fatalf("session 0x%x replaced by 0x%x; want it resumed", ha.SessionID(), g.ID())
	}
	// The claim survived with the session; it is deleted in the background.
	testenv.Eventually(t, 10*time.Second, func() error { return f.claimsAre(la, cluster) })
	release(t, ha)
}

// Five workers on separate sessions increment a counter with read-modify-write under the
// lock: no update is lost and no two hold the lock at once.
func TestMutualExclusion(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	const workers, rounds = 5, 4
	counter := f.root + "/counter"
	if _, err := f.obs.Create(counter, []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var (
		inside, overlaps atomic.Int32
		wg               sync.WaitGroup
	)
	for w := range workers {
		s := f.session(stack.ZooKeeperAddr, locks.SessionConfig{})
		l := f.locker(fmt.Sprintf("worker-%d", w), s)
		wg.Go(func() {
			for r := range rounds {
				err := l.Do(ctx, cluster, fmt.Sprintf("event-%d-%d", w, r), func(ctx context.Context, h *locks.Held) error {
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					defer inside.Add(-1)
					data, _, err := s.Conn().Get(counter)
					if err != nil {
						return err
					}
					n, err := strconv.Atoi(string(data))
					if err != nil {
						return err
					}
					time.Sleep(time.Millisecond) // widen the window a lost update needs
					// Unversioned: only the lock keeps updates from being lost.
					_, err = h.Multi(ctx, &zk.SetDataRequest{Path: counter, Data: []byte(strconv.Itoa(n + 1)), Version: -1})
					return err
				})
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	data, _, err := f.obs.Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), strconv.Itoa(workers*rounds); got != want {
		t.Errorf("counter = %s, want %s", got, want)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times two workers held the lock at once", n)
	}
	f.wantClaims(f.locker("observer", nil), cluster)
}

// Release is idempotent, ends the Held, and frees the lock at once.
func TestReleaseIdempotent(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	l := f.locker("worker-a", nil)

	h, err := l.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("Err() of a held lock = %v", err)
	}
	for i := range 3 {
		if err := h.Release(ctx); err != nil {
			t.Fatalf("release #%d: %v", i+1, err)
		}
	}
	waitClosed(t, h.Lost(), time.Second, "Lost after release")
	if err := h.Err(); !errors.Is(err, locks.ErrReleased) || errors.Is(err, locks.ErrLost) {
		t.Errorf("Err() after release = %v, want ErrReleased only", err)
	}
	if _, err := h.Multi(ctx, &zk.SetDataRequest{Path: f.root, Version: -1}); !errors.Is(err, locks.ErrReleased) {
		t.Errorf("fenced write after release: %v, want ErrReleased", err)
	}
	f.wantClaims(l, cluster)
	h2, err := l.Acquire(ctx, cluster, "event-b", locks.WithWait(time.Second))
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	release(t, h2)
}

// Do releases the lock when its function fails or panics.
func TestDoReleasesOnErrorAndPanic(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	l := f.locker("worker-a", nil)

	errBoom := errors.New("boom")
	err := l.Do(ctx, cluster, "event-a", func(ctx context.Context, h *locks.Held) error {
		if err := f.claimsAre(l, cluster, h.Node()); err != nil {
			t.Error(err)
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("Do = %v, want the function's error", err)
	}
	f.wantClaims(l, cluster)

	func() {
		defer func() {
			if r := recover(); r != "panic under lock" {
				t.Errorf("recovered %v", r)
			}
		}()
		_ = l.Do(ctx, cluster, "event-b", func(context.Context, *locks.Held) error {
			panic("panic under lock")
		})
	}()
	f.wantClaims(l, cluster)
}

// A claim node that is changed or deleted by someone else (an operator breaking the lock)
// fences its holder out: its next fenced write fails and the lock is lost.
func TestClaimTamperedWith(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	l := f.locker("worker-a", nil)
	dataPath := f.root + "/data"
	if _, err := f.obs.Create(dataPath, []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// Changed: the fence's version check fails on the server.
	h, err := l.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.obs.Set(h.Node(), []byte(`{"worker":"operator"}`), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Multi(ctx, &zk.SetDataRequest{Path: dataPath, Data: []byte("v1"), Version: -1}); !errors.Is(err, locks.ErrLost) || !errors.Is(err, zk.ErrBadVersion) {
		t.Errorf("fenced write after the claim changed: %v, want ErrLost and zk.ErrBadVersion", err)
	}
	waitClosed(t, h.Lost(), time.Second, "lock lost after the fence failed")
	testenv.Eventually(t, 5*time.Second, func() error { return f.claimsAre(l, cluster) })
	release(t, h)

	// Deleted: the holder is told.
	h, err = l.Acquire(ctx, cluster, "event-b")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.obs.Delete(h.Node(), -1); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, h.Lost(), 5*time.Second, "lock lost after its claim was deleted")
	if err := h.Err(); !errors.Is(err, locks.ErrLost) || !strings.Contains(err.Error(), "was deleted") {
		t.Errorf("cause = %v, want ErrLost: claim node was deleted", err)
	}
	if _, err := h.Multi(ctx, &zk.SetDataRequest{Path: dataPath, Data: []byte("v1"), Version: -1}); !errors.Is(err, locks.ErrLost) {
		t.Errorf("fenced write after the claim was deleted: %v, want ErrLost", err)
	}
	if data, _, err := f.obs.Get(dataPath); err != nil || string(data) != "v0" {
		t.Errorf("data = %q, %v; want v0", data, err)
	}
	release(t, h)
}

// Closing the Session loses its locks and makes later Acquires fail for good.
func TestSessionClose(t *testing.T) {
	f := setup(t)
	ctx := t.Context()
	s := f.session(stack.ZooKeeperAddr, locks.SessionConfig{})
	l := f.locker("worker-a", s)
	events, _ := s.Subscribe(8)

	h, err := l.Acquire(ctx, cluster, "event-a")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	waitClosed(t, h.Lost(), time.Second, "lock lost when the session closed")
	if err := h.Err(); !errors.Is(err, locks.ErrLost) || !errors.Is(err, locks.ErrClosed) {
		t.Errorf("cause = %v, want ErrLost and ErrClosed", err)
	}
	waitClosed(t, s.Done(), time.Second, "session done")
	if _, err := s.Current(); !errors.Is(err, locks.ErrClosed) {
		t.Errorf("Current after Close: %v, want ErrClosed", err)
	}
	if _, err := l.Acquire(ctx, cluster, "event-b"); !errors.Is(err, locks.ErrClosed) || locks.IsTransient(err) || markedTransient(err) {
		t.Errorf("acquire after Close: %v, want ErrClosed (not transient)", err)
	}
	for range events { // the subscription ends with the session
	}
	release(t, h)
	// Closing the connection ended the session, and its claim with it.
	testenv.Eventually(t, 5*time.Second, func() error { return f.claimsAre(l, cluster) })
}
