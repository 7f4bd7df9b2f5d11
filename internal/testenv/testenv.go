// Package testenv gives integration tests the local stack of real servers (internal/stack):
// it finds the running stack, or starts it once when it is not running, and hands out
// clients that close themselves when the test ends.
//
// Tests share one stack, across packages and `go test` processes, so:
//   - every test names its own topics, streams and znodes (Name), and leaves the
//     cluster-wide state (brokers, configs, controller) as it found it;
//   - a test that stops, kills or pauses a server, or restarts NATS, takes the stack
//     exclusively (GetExclusive): it waits until no other test uses the stack, and no
//     other test starts until it is done. Other tests take it shared (Get). The lock is a
//     pair of flock(2) files with writer preference, so it works across processes.
//
// Under `go test -short` (the Taskfile's test:unit) integration tests are skipped; the
// normal run (`go tool task test`) runs them.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// Env is the running local stack as a test sees it.
type Env struct {
	Stack     *stack.Stack
	exclusive bool
}

var (
	upOnce sync.Once
	upSt   *stack.Stack
	upErr  error
)

// Root returns the repository root.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate testenv source")
	}
	return stack.FindRoot(filepath.Dir(file))
}

func startStack(t testing.TB) *stack.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local stack (skipped under -short)")
	}
	upOnce.Do(func() {
		closeInheritedOnExec()
		root, err := Root()
		if err != nil {
			upErr = err
			return
		}
		st, err := stack.New(stack.Options{Root: root, Logf: func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "testenv: "+f+"\n", a...)
		}})
		if err != nil {
			upErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Under the shared test lock: a fault test in another test process holds it
		// exclusively while a server is stopped on purpose, and starting that server
		// behind its back would race its own restart (two brokers on one port, one exits).
		release := acquire(t, st, false)
		defer release()
		upErr = st.Up(ctx)
		upSt = st
	})
	if upErr != nil {
		t.Fatalf("local stack: %v", upErr)
	}
	return upSt
}

// closeInheritedOnExec marks the file descriptors this process inherited (above stderr)
// close-on-exec, so that the servers it starts (they outlive it) do not keep them open. One
// such descriptor is the lock file of `flock <file> go test …`: a server that inherits it
// holds that lock for as long as it runs, and every later `flock <file>` waits for ever.
// Go opens its own descriptors close-on-exec already; where /proc is missing, nothing is done.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// Get returns the stack for a test that uses it without disturbing servers.
func Get(t testing.TB) *Env {
	t.Helper()
	st := startStack(t)
	release := acquire(t, st, false)
	t.Cleanup(release)
	return &Env{Stack: st}
}

// GetExclusive returns the stack for a test that stops, kills or pauses servers. When the
// test ends every server is started again and answers before other tests go on.
func GetExclusive(t testing.TB) *Env {
	t.Helper()
	st := startStack(t)
	release := acquire(t, st, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, name := range stack.ServerNames() {
			_ = st.Resume(name) // a paused server would never answer
		}
		if err := st.Up(ctx); err != nil {
			t.Errorf("restore the stack after a fault test: %v", err)
		}
		release()
	})
	return &Env{Stack: st, exclusive: true}
}

// acquire takes the shared or exclusive stack lock. A writer first holds the turnstile,
// which new readers must pass, so a fault test is not starved by a stream of readers.
func acquire(t testing.TB, st *stack.Stack, exclusive bool) (release func()) {
	t.Helper()
	dir := filepath.Dir(st.StateDir())
	open := func(name string) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("stack lock: %v", err)
		}
		return f
	}
	turnstile, main := open("tests.turnstile"), open("tests.lock")
	flock := func(f *os.File, how int) {
		for {
			err := syscall.Flock(int(f.Fd()), how)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				t.Fatalf("stack lock %s: %v", f.Name(), err)
			}
			return
		}
	}
	if exclusive {
		flock(turnstile, syscall.LOCK_EX)
		flock(main, syscall.LOCK_EX)
		return func() {
			_ = syscall.Flock(int(main.Fd()), syscall.LOCK_UN)
			_ = syscall.Flock(int(turnstile.Fd()), syscall.LOCK_UN)
			main.Close()
			turnstile.Close()
		}
	}
	flock(turnstile, syscall.LOCK_SH)
	flock(main, syscall.LOCK_SH)
	_ = syscall.Flock(int(turnstile.Fd()), syscall.LOCK_UN)
	turnstile.Close()
	return func() {
		_ = syscall.Flock(int(main.Fd()), syscall.LOCK_UN)
		main.Close()
	}
}

// Cluster returns the named Kafka cluster of the stack ("local" or "kraft").
func (e *Env) Cluster(t testing.TB, name string) stack.Cluster {
	t.Helper()
	c, err := stack.ClusterByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Kafka returns a franz-go client for the named cluster, closed when the test ends.
func (e *Env) Kafka(t testing.TB, cluster string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c := e.Cluster(t, cluster)
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.DialTimeout(3 * time.Second),
		kgo.MetadataMinAge(200 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kafka client for %s: %v", cluster, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for the named cluster, closed when the test ends.
func (e *Env) Admin(t testing.TB, cluster string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(e.Kafka(t, cluster))
}

// ZooKeeper connects to the stack's ZooKeeper (no chroot: paths of the "local" cluster
// start with stack.KafkaChroot). The connection closes when the test ends.
func (e *Env) ZooKeeper(t testing.TB) *zk.Conn {
	t.Helper()
	return ConnectZK(t, stack.ZooKeeperAddr, 10*time.Second)
}

// ConnectZK connects to ZooKeeper at addr and waits for the session; closed at test end.
func ConnectZK(t testing.TB, addr string, sessionTimeout time.Duration) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect([]string{addr}, sessionTimeout, zk.WithLogInfo(false),
		zk.WithLogger(zkTestLogger{t}))
	if err != nil {
		t.Fatalf("zookeeper %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-deadline:
			t.Fatalf("zookeeper %s: no session after 30s (state %v)", addr, conn.State())
		}
	}
}

type zkTestLogger struct{ t testing.TB }

func (l zkTestLogger) Printf(f string, a ...any) { l.t.Logf("zk: "+f, a...) }

// NATS connects to the stack's nats-server; drained when the test ends.
func (e *Env) NATS(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(stack.NATSClusterURL, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (e *Env) mustBeExclusive(t testing.TB) {
	t.Helper()
	if !e.exclusive {
		t.Fatal("fault helpers disturb other tests: get the stack with testenv.GetExclusive")
	}
}

// StopBroker stops a broker gracefully and waits until the cluster's metadata no longer
// lists it.
func (e *Env) StopBroker(t testing.TB, cluster string, id int32) {
	t.Helper()
	e.mustBeExclusive(t)
	c := e.Cluster(t, cluster)
	CountFault()
	if err := e.Stack.Stop(t.Context(), c.ServerName(id)); err != nil {
		t.Fatalf("stop %s: %v", c.ServerName(id), err)
	}
	e.waitUnlisted(t, c, id)
}

// KillBroker kills a broker (SIGKILL, no controlled shutdown) and waits until the cluster's
// metadata no longer lists it (in ZooKeeper mode, once its session expires).
func (e *Env) KillBroker(t testing.TB, cluster string, id int32) {
	t.Helper()
	e.mustBeExclusive(t)
	c := e.Cluster(t, cluster)
	CountFault()
	if err := e.Stack.Kill(t.Context(), c.ServerName(id)); err != nil {
		t.Fatalf("kill %s: %v", c.ServerName(id), err)
	}
	e.waitUnlisted(t, c, id)
}

func (e *Env) waitUnlisted(t testing.TB, c stack.Cluster, id int32) {
	t.Helper()
	cl := e.Kafka(t, c.Name)
	Eventually(t, 90*time.Second, func() error {
		md, err := kafka.BrokerMetadata(t.Context(), cl)
		if err != nil {
			return err
		}
		for _, b := range md.Brokers {
			if b.NodeID == id {
				return fmt.Errorf("metadata of %s still lists broker %d", c.Name, id)
			}
		}
		return nil
	})
}

// StartBroker starts a stopped broker and waits until the cluster's metadata lists it.
func (e *Env) StartBroker(t testing.TB, cluster string, id int32) {
	t.Helper()
	e.mustBeExclusive(t)
	c := e.Cluster(t, cluster)
	if err := e.Stack.Start(t.Context(), c.ServerName(id)); err != nil {
		t.Fatalf("start %s: %v", c.ServerName(id), err)
	}
}

// PauseBroker stops a broker's process (SIGSTOP) without it knowing: it holds its
// connections and sessions but answers nothing, as a broker stalled by a long GC pause or
// a full disk would. ResumeBroker (or the end of the test) lets it go on.
func (e *Env) PauseBroker(t testing.TB, cluster string, id int32) {
	t.Helper()
	e.mustBeExclusive(t)
	c := e.Cluster(t, cluster)
	CountFault()
	if err := e.Stack.Pause(c.ServerName(id)); err != nil {
		t.Fatalf("pause %s: %v", c.ServerName(id), err)
	}
}

// ResumeBroker lets a paused broker go on (SIGCONT).
func (e *Env) ResumeBroker(t testing.TB, cluster string, id int32) {
	t.Helper()
	c := e.Cluster(t, cluster)
	if err := e.Stack.Resume(c.ServerName(id)); err != nil {
		t.Fatalf("resume %s: %v", c.ServerName(id), err)
	}
}

// StopCluster stops every broker of a cluster gracefully and at once, the controllers of a
// KRaft cluster with them: the cluster is down. StartCluster brings it back. At once, as
// a cluster goes down: one node after the other, the last KRaft node has no quorum left
// to grant its controlled shutdown, and waits for it until it is killed (a minute, then a
// log recovery at the next start).
func (e *Env) StopCluster(t testing.TB, cluster string) {
	t.Helper()
	e.mustBeExclusive(t)
	c := e.Cluster(t, cluster)
	CountFault()
	names := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		names[i] = c.ServerName(b.ID)
	}
	if err := e.Stack.StopServers(t.Context(), names...); err != nil {
		t.Fatal(err)
	}
}

// StartCluster starts every broker of a cluster and waits until its metadata lists them
// all: Stack.Up starts every stopped server before it waits for any (a KRaft node answers
// only once a quorum of controllers runs), and a broker is ready once listed.
func (e *Env) StartCluster(t testing.TB, cluster string) {
	t.Helper()
	e.mustBeExclusive(t)
	if err := e.Stack.Up(t.Context()); err != nil {
		t.Fatalf("start %s: %v", cluster, err)
	}
}

// StopNATS stops nats-server gracefully (JetStream data is kept); StartNATS starts it.
func (e *Env) StopNATS(t testing.TB) {
	t.Helper()
	e.mustBeExclusive(t)
	CountFault()
	if err := e.Stack.Stop(t.Context(), "nats"); err != nil {
		t.Fatalf("stop nats: %v", err)
	}
}

// StartNATS starts the nats-server StopNATS stopped.
func (e *Env) StartNATS(t testing.TB) {
	t.Helper()
	if err := e.Stack.Start(t.Context(), "nats"); err != nil {
		t.Fatalf("start nats: %v", err)
	}
}

// RestartNATS stops nats-server gracefully and starts it again (JetStream data is kept).
func (e *Env) RestartNATS(t testing.TB) {
	t.Helper()
	e.mustBeExclusive(t)
	CountFault()
	if err := e.Stack.Restart(t.Context(), "nats"); err != nil {
		t.Fatalf("restart nats: %v", err)
	}
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// Name returns a name unique to this test and run, usable as a Kafka topic, a NATS stream
// or subject token and a znode: prefix, the test's name and a random suffix.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := strings.Trim(unsafeName.ReplaceAllString(t.Name(), "-"), "-")
	if len(n) > 60 {
		n = n[len(n)-60:]
	}
	return fmt.Sprintf("%s-%s-%s", prefix, n, hex.EncodeToString(b[:]))
}

// Eventually calls check until it returns nil or timeout passes, then fails the test with
// the last error. Use it instead of sleeping.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	if err := poll(t, timeout, check); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually that returns the last error instead of failing the test: for
// goroutines other than the test's, which must not call t.Fatal.
func Poll(t testing.TB, timeout time.Duration, check func() error) error {
	return poll(t, timeout, check)
}

// poll calls check every 200ms until it returns nil, and returns nil; or, once timeout
// passed or the test ended, the last error.
func poll(t testing.TB, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not true after %s: %w", timeout, err)
		}
		select {
		case <-t.Context().Done():
			return fmt.Errorf("test ended while waiting: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// FreeEventsStream deletes the fleet-wide default consumer of KAFKAMENDER_EVENTS if a
// worker run by hand or the demo left it on the local stack: it takes every event subject,
// and a work-queue stream refuses the narrower consumers that tests create beside it.
func (e *Env) FreeEventsStream(t testing.TB) {
	t.Helper()
	js, err := jetstream.New(e.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	if n := DeleteConsumers(t.Context(), js, "kafkamender-workers"); n > 0 {
		t.Logf("deleted %d consumers of the default fleet kafkamender-workers left on the local stack", n)
	}
}

// DeleteConsumers deletes a fleet's consumers of stream KAFKAMENDER_EVENTS: the one named
// prefix (of earlier versions) and the per-cluster ones, prefix_<cluster>. It returns how
// many it deleted.
func DeleteConsumers(ctx context.Context, js jetstream.JetStream, prefix string) int {
	s, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		return 0 // no stream yet
	}
	n := 0
	names := s.ConsumerNames(ctx)
	var doomed []string
	for name := range names.Name() {
		if name == prefix || strings.HasPrefix(name, prefix+"_") {
			doomed = append(doomed, name)
		}
	}
	for _, name := range doomed {
		if s.DeleteConsumer(ctx, name) == nil {
			n++
		}
	}
	return n
}

// LockWorkerAddr serialises, across test processes, the tests that run a worker on the
// address of deployments/local/worker.yaml (127.0.0.1:8080), where the local
// Alertmanager sends its notifications. Held until the test ends.
func (e *Env) LockWorkerAddr(t testing.TB) { e.flock(t, "tests.worker-addr") }

// LockBrokerThrottles serialises, across test processes, the tests that set broker-level
// replication throttle rates (leader/follower.replication.throttled.rate): those are
// cluster-wide, and two operations restoring them by compare-and-restore at once would
// each be right and together leave a value behind. Held until the test ends.
func (e *Env) LockBrokerThrottles(t testing.TB) { e.flock(t, "tests.throttles") }

// LockLegacyReassignments serialises, across test processes, the tests that reassign
// partitions of the legacy cluster (Kafka 2.3): it has one /admin/reassign_partitions for
// the whole cluster, so another test's reassignment there is a foreign one that the worker
// waits for (a fresh-clone run timed an event out waiting for another package's shed).
// Take it before LockBrokerThrottles. Held until the test ends.
func (e *Env) LockLegacyReassignments(t testing.TB) { e.flock(t, "tests.legacy-reassignments") }

// flock takes an exclusive file lock next to the stack's state until the test ends.
func (e *Env) flock(t testing.TB, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(filepath.Dir(e.Stack.StateDir()), name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("%s lock: %v", name, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("%s lock: %v", name, err)
		}
		break
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}

// WorkerEnv is the environment of a worker process a test starts: the test's own, less
// the variables that override configuration (a developer's shell may export one, such as
// KAFKAMENDER_NATS_URL, which would override the test's configuration), plus extra
// ("NAME=value" entries).
func WorkerEnv(extra ...string) []string {
	return append(config.WithoutOverrides(os.Environ()), extra...)
}

// FreeAddr returns a loopback address whose port was free a moment ago, for a server a
// test starts (a worker's HTTP listener, say).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
