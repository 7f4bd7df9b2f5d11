package locks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// markedTransient reports whether err carries the marker package retry looks for.
func markedTransient(err error) bool {
	var m interface{ Transient() bool }
	return errors.As(err, &m) && m.Transient()
}

// fixture is what an integration test of locks works with: the shared stack, a connection
// to look at ZooKeeper with, and a lock root of its own.
type fixture struct {
	t      *testing.T
	env    *testenv.Env
	obs    *zk.Conn // observer connection, no locks taken on it
	root   string
	logger *zap.Logger
}

// setup runs the test in parallel with the others of the package, on the shared stack,
// with a lock root of its own, removed at the end.
func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	logger := testLogger(t) // first: its guard must outlive every other cleanup
	env := testenv.Get(t)
	obs := env.ZooKeeper(t)
	root := "/kafkamender-tests/" + testenv.Name(t, "locks")
	t.Cleanup(func() {
		if err := deleteTree(obs, root); err != nil {
			t.Logf("remove %s: %v", root, err)
		}
	})
	for _, p := range []string{"/kafkamender-tests", root} {
		if _, err := obs.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	return &fixture{t: t, env: env, obs: obs, root: root, logger: logger}
}

// session starts a Session to addr (the stack's ZooKeeper, or a proxy in front of it) and
// waits for its session; it is closed at the end of the test.
func (f *fixture) session(addr string, cfg locks.SessionConfig) *locks.Session {
	f.t.Helper()
	cfg.Servers = []string{addr}
	if cfg.Logger == nil {
		cfg.Logger = f.logger.Named("session")
	}
	s, err := locks.Connect(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(f.t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.Wait(ctx); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// locker returns a Locker for worker on its own session to the stack's ZooKeeper, or on s.
func (f *fixture) locker(worker string, s *locks.Session) *locks.Locker {
	f.t.Helper()
	if s == nil {
		s = f.session(stack.ZooKeeperAddr, locks.SessionConfig{})
	}
	l, err := locks.New(s, locks.Config{
		Root:           f.root,
		Worker:         worker,
		Wait:           20 * time.Second,
		CleanupTimeout: 5 * time.Second,
		Logger:         f.logger.Named(worker),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// children lists the claim nodes of a lock, sorted; none when the lock node is missing.
func (f *fixture) children(l *locks.Locker, cluster string) []string {
	f.t.Helper()
	kids, _, err := f.obs.Children(l.Path(cluster))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("children of %s: %v", l.Path(cluster), err)
	}
	slices.Sort(kids)
	return kids
}

// wantClaims fails the test unless the lock's claim nodes are exactly nodes (full paths).
func (f *fixture) wantClaims(l *locks.Locker, cluster string, nodes ...string) {
	f.t.Helper()
	if err := f.claimsAre(l, cluster, nodes...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) claimsAre(l *locks.Locker, cluster string, nodes ...string) error {
	got := f.children(l, cluster)
	want := make([]string, len(nodes))
	for i, n := range nodes {
		want[i] = strings.TrimPrefix(n, l.Path(cluster)+"/")
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("claims of %s: got %q, want %q", l.Path(cluster), got, want)
	}
	return nil
}

// waitClaims waits until the lock has n claim nodes.
func (f *fixture) waitClaims(l *locks.Locker, cluster string, n int) {
	f.t.Helper()
	testenv.Eventually(f.t, 10*time.Second, func() error {
		if got := f.children(l, cluster); len(got) != n {
			return fmt.Errorf("claims of %s: got %q, want %d", l.Path(cluster), got, n)
		}
		return nil
	})
}

type acquired struct {
	h   *locks.Held
	err error
}

// acquireAsync runs Acquire in a goroutine; the result arrives on the channel.
func acquireAsync(ctx context.Context, l *locks.Locker, cluster, event string, opts ...locks.AcquireOption) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		h, err := l.Acquire(ctx, cluster, event, opts...)
		ch <- acquired{h, err}
	}()
	return ch
}

// await returns the result of acquireAsync, failing the test after timeout.
func await(t *testing.T, ch <-chan acquired, timeout time.Duration) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		t.Fatalf("acquire did not return within %s", timeout)
		return acquired{}
	}
}

// waitClosed fails the test unless ch closes within timeout.
func waitClosed(t *testing.T, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

func release(t *testing.T, h *locks.Held) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	if err := h.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func deleteTree(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := deleteTree(conn, p+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// testLogger logs to the test, and not after the test ended (background goroutines may
// still log then).
func testLogger(t *testing.T) *zap.Logger {
	var (
		mu   sync.Mutex
		done bool
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	})
	w := zapcore.AddSync(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Log(strings.TrimRight(string(p), "\n"))
		}
		return len(p), nil
	}))
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), w, zap.DebugLevel))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
