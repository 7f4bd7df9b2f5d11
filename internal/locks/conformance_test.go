package locks_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// backend is one lock backend under the conformance suite.
type backend struct {
	name string
	// worker returns a Backend for a worker of its own (its own ZooKeeper session or NATS
	// connection) and a function that kills it as a crash would: no release, no renewal.
	worker func(t *testing.T, name string) (locks.Backend, func())
	// breakLock removes the lock of cluster as an operator would.
	breakLock func(t *testing.T, cluster string)
	// deadAfter bounds how long after a holder dies its lock is free.
	deadAfter time.Duration
}

// zkBackend runs the suite on the stack's ZooKeeper.
func zkBackend(t *testing.T) backend {
	f := setup(t)
	return backend{
		name: "zookeeper",
		worker: func(t *testing.T, name string) (locks.Backend, func()) {
			// Through a proxy: cutting it is a crash as ZooKeeper sees one (the session
			// expires after its timeout), not a clean close.
			proxy := testenv.NewZKProxy(t)
			s := f.session(proxy.Addr(), locks.SessionConfig{Timeout: 4 * time.Second})
			l, err := locks.New(s, locks.Config{Root: f.root, Worker: name, Logger: f.logger.Named(name)})
			if err != nil {
				t.Fatal(err)
			}
			return locks.ZK(l), proxy.Cut
		},
		breakLock: func(t *testing.T, cluster string) {
			children, _, err := f.obs.Children(f.root + "/" + cluster)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range children {
				_ = f.obs.Delete(f.root+"/"+cluster+"/"+c, -1)
			}
		},
		deadAfter: 15 * time.Second,
	}
}

// natsServer is a nats-server with JetStream in the test process, on a fixed port so that
// it can be restarted with its store.
type natsServer struct {
	t    *testing.T
	opts *server.Options
	s    *server.Server
}

func startNATSServer(t *testing.T) *natsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	n := &natsServer{t: t, opts: &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	n.start()
	t.Cleanup(func() { n.s.Shutdown() })
	return n
}

// serverStarts serialises the in-process servers' starts and stops: nats-server's start-up
// touches process-wide state, which the race detector reports when two tests start one at
// the same moment.
var serverStarts sync.Mutex

func (n *natsServer) start() {
	serverStarts.Lock()
	defer serverStarts.Unlock()
	s, err := server.NewServer(n.opts)
	if err != nil {
		n.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		n.t.Fatal("nats-server not ready")
	}
	n.s = s
}

func (n *natsServer) restart(down time.Duration) {
	testenv.CountFault()
	serverStarts.Lock()
	n.s.Shutdown()
	n.s.WaitForShutdown()
	serverStarts.Unlock()
	time.Sleep(down) // the outage being tested, not a wait for a condition
	n.start()
}

func (n *natsServer) connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(n.s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

const kvTTL = 3 * time.Second

// kvBackend runs the suite on NATS JetStream key-value, on an in-process server.
func kvBackend(t *testing.T, n *natsServer) backend {
	t.Parallel()
	return kvBackendOn(t, "LOCKS", n.connect)
}

// kvBackendOn runs the suite on the key-value bucket named bucket of the NATS connect
// reaches.
func kvBackendOn(t *testing.T, bucket string, connect func(t *testing.T) (*nats.Conn, jetstream.JetStream)) backend {
	_, obs := connect(t)
	return backend{
		name: "nats-kv",
		worker: func(t *testing.T, name string) (locks.Backend, func()) {
			nc, js := connect(t)
			// The locker's log, at debug, is printed if the test fails: a wait that ends
			// refused says what each create, watch and stale-entry delete got back.
			l, err := locks.NewKV(js, locks.KVConfig{Bucket: bucket, Worker: name, TTL: kvTTL,
				Logger: testLogger(t).Named(name)})
			if err != nil {
				t.Fatal(err)
			}
			return l, func() { testenv.CountFault(); nc.Close() }
		},
		breakLock: func(t *testing.T, cluster string) {
			kv, err := obs.KeyValue(t.Context(), bucket)
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.Delete(t.Context(), cluster); err != nil {
				t.Fatal(err)
			}
		},
		deadAfter: 3*kvTTL + 2*time.Second,
	}
}

// clusterKV is a bucket of this test's own on the local stack's three-node NATS cluster,
// created as the worker creates it: three replicas (natsjs). It is deleted when the test
// ends.
func clusterKV(t *testing.T, env *testenv.Env) (bucket string, connect func(t *testing.T) (*nats.Conn, jetstream.JetStream)) {
	bucket = testenv.Name(t, "LOCKS")
	connect = func(t *testing.T) (*nats.Conn, jetstream.JetStream) {
		nc := env.NATS(t)
		js, err := natsjs.New(nc, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	_, js := connect(t)
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })
	return bucket, connect
}

// eachBackend runs test on every lock backend: ZooKeeper, NATS key-value on one server,
// and NATS key-value with three replicas on the stack's NATS cluster.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("zookeeper", func(t *testing.T) { test(t, zkBackend(t)) })
	t.Run("nats-kv", func(t *testing.T) { test(t, kvBackend(t, startNATSServer(t))) })
	t.Run("nats-kv-cluster", func(t *testing.T) {
		t.Parallel()
		bucket, connect := clusterKV(t, testenv.Get(t))
		test(t, kvBackendOn(t, bucket, connect))
	})
}

// Mutual exclusion under contention: four workers take the lock five times each; never
// two at once, and while held the lock names its holder.
func TestConformanceMutualExclusion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var inside, max atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for w := range 4 {
			name := fmt.Sprintf("w%d", w)
			l, _ := b.worker(t, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					h, err := l.Acquire(t.Context(), "c1", fmt.Sprintf("%s-%d", name, i), locks.WithWait(time.Minute))
					if err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					if n > max.Load() {
						max.Store(n)
					}
					if hd, err := l.Holder(t.Context(), "c1"); err != nil || hd == nil || hd.Worker != name {
						errs <- fmt.Errorf("holder while %s holds it: %+v (%v)", name, hd, err)
					}
					time.Sleep(20 * time.Millisecond) // hold it a moment, while others wait
					if err := h.Err(); err != nil {
						errs <- fmt.Errorf("%s lost the lock while holding it: %w", name, err)
					}
					inside.Add(-1)
					if err := h.Release(t.Context()); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if max.Load() != 1 {
			t.Errorf("%d holders at once", max.Load())
		}
	})
}

// The holder is told when its lock is broken (an operator deleting it), and the next
// worker takes it at once.
func TestConformanceLossNotification(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, _ := b.worker(t, "a")
		h, err := a.Acquire(t.Context(), "c1", "ev-a")
		if err != nil {
			t.Fatal(err)
		}
		b.breakLock(t, "c1")
		select {
		case <-h.Context().Done():
		case <-time.After(15 * time.Second):
			t.Fatal("the holder was not told that its lock was broken")
		}
		if err := h.Err(); !errors.Is(err, locks.ErrLost) {
			t.Errorf("Err after the break = %v, want ErrLost", err)
		}
		other, _ := b.worker(t, "b")
		h2, err := other.Acquire(t.Context(), "c1", "ev-b", locks.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("the next worker after a break: %v", err)
		}
		_ = h.Release(t.Context()) // the lost holder's release must not free the new holder's lock
		if err := h2.Err(); err != nil {
			t.Fatalf("the new holder lost its lock to the old holder's release: %v", err)
		}
		_ = h2.Release(t.Context())
	})
}

// An Acquire given up (its context cancelled while waiting) leaves nothing behind: once
// the holder releases, another worker takes the lock at once.
func TestConformanceReleaseOnCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, _ := b.worker(t, "a")
		h, err := a.Acquire(t.Context(), "c1", "ev-a")
		if err != nil {
			t.Fatal(err)
		}
		w, _ := b.worker(t, "waiter")
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		_, err = w.Acquire(ctx, "c1", "ev-w")
		cancel()
		if err == nil {
			t.Fatal("an Acquire whose context ended took a held lock")
		}
		busy := locks.IsTransient(err)
		if !busy {
			t.Errorf("waiting out a held lock: %v, want a transient (busy) error", err)
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		c, _ := b.worker(t, "c")
		start := time.Now()
		h3, err := c.Acquire(t.Context(), "c1", "ev-c", locks.WithWait(5*time.Second))
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %s to acquire a released lock: the cancelled Acquire left something", d)
		}
		_ = h3.Release(t.Context())
	})
}

// A holder that dies (no release, no renewal) frees its lock within a bound (for
// ZooKeeper: its session expires while it holds the lock; TestHolderSessionExpires expires
// one on the server explicitly and checks the fencing of writes); it stops
// counting on the lock (Err, Context) before another worker can take it: no write after
// the loss.
func TestConformanceTakeoverAfterHolderDies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, kill := b.worker(t, "a")
		h, err := a.Acquire(t.Context(), "c1", "ev-a")
		if err != nil {
			t.Fatal(err)
		}
		var lostAt atomic.Int64
		context.AfterFunc(h.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
		kill()
		other, _ := b.worker(t, "b")
		h2, err := other.Acquire(t.Context(), "c1", "ev-b", locks.WithWait(b.deadAfter))
		if err != nil {
			t.Fatalf("the dead holder's lock is not free after %s: %v", b.deadAfter, err)
		}
		took := time.Now().UnixNano()
		if !errors.Is(h.Err(), locks.ErrLost) {
			t.Errorf("the dead holder's Err = %v, want ErrLost", h.Err())
		}
		if l := lostAt.Load(); l == 0 || l > took {
			t.Errorf("the dead holder counted on its lock until %v, after the next holder took it at %v",
				time.Unix(0, l), time.Unix(0, took))
		}
		_ = h2.Release(t.Context())
	})
}

// NATS restarting while the lock is held: a short outage (less than the TTL less the
// margin) keeps the lock, renewed again afterwards, and nobody else takes it; a long one
// loses it, and the holder knows before anyone else can take it.
func TestConformanceKVNATSRestart(t *testing.T) {
	n := startNATSServer(t)
	b := kvBackend(t, n)
	a, _ := b.worker(t, "a")
	h, err := a.Acquire(t.Context(), "c1", "ev-a")
	if err != nil {
		t.Fatal(err)
	}
	n.restart(300 * time.Millisecond)
	other, _ := b.worker(t, "b")
	if _, err := other.Acquire(t.Context(), "c1", "ev-b", locks.WithWait(2*kvTTL)); !errors.Is(err, locks.ErrBusy) {
		t.Fatalf("after a short NATS outage another worker got %v, want busy", err)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("a short NATS outage lost the lock: %v", err)
	}
	var lostAt atomic.Int64
	context.AfterFunc(h.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	n.restart(kvTTL + time.Second)
	h2, err := other.Acquire(t.Context(), "c1", "ev-b2", locks.WithWait(b.deadAfter))
	if err != nil {
		t.Fatalf("after a long NATS outage: %v", err)
	}
	if l := lostAt.Load(); l == 0 || l > time.Now().UnixNano() {
		t.Errorf("the holder did not know its lock was lost before another worker took it")
	}
	_ = h2.Release(t.Context())
}

// A lock held longer than the backend's timeouts (session timeout, entry TTL) stays held:
// the holder's renewals (or session) keep it, and nobody else takes it meanwhile.
func TestConformanceHeldLongerThanTTL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		a, _ := b.worker(t, "a")
		h, err := a.Acquire(t.Context(), "c1", "ev-a")
		if err != nil {
			t.Fatal(err)
		}
		other, _ := b.worker(t, "b")
		_, err = other.Acquire(t.Context(), "c1", "ev-b", locks.WithWait(3*kvTTL))
		if !errors.Is(err, locks.ErrBusy) {
			t.Fatalf("another worker, while the lock is held for %s: %v, want busy", 3*kvTTL, err)
		}
		if err := h.Err(); err != nil {
			t.Fatalf("the holder lost its lock while holding it: %v", err)
		}
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// The node leading the lock bucket's stream is killed while the lock is held: the holder
// keeps its lock through the election or is told it lost it before another worker takes
// it; never two holders. Then a holder dies and the node leading the bucket is killed at
// once: the dead holder's entry still expires under the new leader, and the next worker
// takes the lock only after the dead one stopped counting on it.
func TestConformanceKVClusterLeaderElection(t *testing.T) {
	env := testenv.GetExclusive(t)
	bucket, connect := clusterKV(t, env)
	b := kvBackendOn(t, bucket, connect)
	_, js := connect(t)
	stream := "KV_" + bucket

	a, _ := b.worker(t, "a")
	h, err := a.Acquire(t.Context(), "c1", "ev-a")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := js.Stream(t.Context(), stream); err != nil || info.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("the lock bucket on the NATS cluster: %v, replicas %d, want 3", err, info.CachedInfo().Config.Replicas)
	}
	var lostAt atomic.Int64
	context.AfterFunc(h.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	leader := testenv.StreamLeader(t, js, stream)
	env.KillNATSNode(t, leader)
	next := testenv.WaitStreamLeaderNot(t, js, stream, leader)
	t.Logf("the lock bucket's leader %s killed, %s leads", leader, next)
	other, _ := b.worker(t, "b")
	h2, err := other.Acquire(t.Context(), "c1", "ev-b", locks.WithWait(b.deadAfter))
	switch {
	case err == nil:
		took := time.Now().UnixNano()
		if l := lostAt.Load(); l == 0 || l > took {
			t.Fatalf("two holders: b took the lock at %v while a counted on it (lost at %v)", time.Unix(0, took), time.Unix(0, l))
		}
		t.Logf("a lost its lock in the election (%v) and b took it after", h.Err())
		_ = h2.Release(t.Context())
	case errors.Is(err, locks.ErrBusy):
		if err := h.Err(); err != nil {
			t.Fatalf("b was refused for %s, yet a does not hold the lock either: %v", b.deadAfter, err)
		}
		t.Log("a kept its lock through the election; b was refused")
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("b after the election: %v", err)
	}
	env.StartNATSNode(t, leader)
	testenv.StreamLeader(t, js, stream)

	// Holder expiry across an election.
	c, kill := b.worker(t, "c")
	h3, err := c.Acquire(t.Context(), "c1", "ev-c", locks.WithWait(b.deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	var cLostAt atomic.Int64
	context.AfterFunc(h3.Context(), func() { cLostAt.Store(time.Now().UnixNano()) })
	leader = testenv.StreamLeader(t, js, stream)
	kill()
	env.KillNATSNode(t, leader)
	d, _ := b.worker(t, "d")
	h4, err := d.Acquire(t.Context(), "c1", "ev-d", locks.WithWait(b.deadAfter+time.Minute))
	if err != nil {
		t.Fatalf("the dead holder's lock is not free after an election and %s: %v", b.deadAfter+time.Minute, err)
	}
	took := time.Now().UnixNano()
	if l := cLostAt.Load(); l == 0 || l > took {
		t.Errorf("the dead holder counted on its lock until %v, after d took it at %v", time.Unix(0, l), time.Unix(0, took))
	}
	_ = h4.Release(t.Context())
	env.StartNATSNode(t, leader)
}
