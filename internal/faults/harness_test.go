package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
	"github.com/kafkamender/kafkamender/internal/worker"
)

// workerBin is the cmd/worker binary, built once for the package.
var workerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "kafkamender-faults-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		root, err := testenv.Root()
		if err == nil {
			workerBin = filepath.Join(dir, "worker")
			args := []string{"build", "-o", workerBin}
			if raceEnabled {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, "./cmd/worker")...)
			cmd.Dir = root
			if out, berr := cmd.CombinedOutput(); berr != nil {
				err = fmt.Errorf("go build ./cmd/worker: %v\n%s", berr, out)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		fmt.Println(testenv.Report())
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// throttleRate is the replication throttle the fault tests ask for: a value no other test
// uses, so that "no throttle of ours is left" is a search for it. Kafka measures a
// replication rate as if ten one-second windows had passed, so a copy bursts about ten
// seconds' worth before the throttle bites: 3 MB per partition copy for about ten seconds
// at this rate, long enough to kill a worker in the middle and see the next one adopt it.
const throttleRate = 150_001

// rig is one fault test's world: a cluster of the stack under an alias of its own (so
// its events, consumer, lock and journal entry are the test's alone), worker processes,
// and the checks.
type rig struct {
	t     *testing.T
	env   *testenv.Env
	real  string // the stack cluster
	alias string
	zk    string // ZooKeeper address the workers use (the stack's, or a proxy's)
	nc    *nats.Conn
	js    jetstream.JetStream
	cl    *kgo.Client
	adm   *kadm.Client
	// maxAttempts, when set, is every worker's nats.max_attempts.
	maxAttempts int
	// extra, when set, is more top-level configuration for every worker (YAML).
	extra string
	// natsURL, when set, is the workers' nats.url (default every node of the stack's NATS
	// cluster).
	natsURL string
}

func newRig(t *testing.T, env *testenv.Env, real string) *rig {
	t.Helper()
	env.FreeEventsStream(t)
	nc := env.NATS(t)
	js := testenv.JetStream(t, nc)
	cl := env.Kafka(t, real, kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &rig{t: t, env: env, real: real, alias: testenv.Name(t, "f"), zk: stack.ZooKeeperAddr, nc: nc, js: js, cl: cl, adm: kadm.NewClient(cl)}
	t.Cleanup(func() {
		testenv.DeleteConsumers(context.Background(), js, r.alias)
	})
	return r
}

func (r *rig) config(name string) string {
	c := r.env.Cluster(r.t, r.real)
	attempts := r.maxAttempts
	if attempts == 0 {
		attempts = 10
	}
	natsURL := stack.NATSClusterURL
	if r.natsURL != "" {
		natsURL = r.natsURL
	}
	zk := "    lock: {backend: nats}\n"
	if r.lockAt().Backend == config.LockZooKeeper {
		zk = "    zookeeper: " + r.zk + c.Chroot + "\n"
	}
	return fmt.Sprintf(`worker:
  id: %s
log:
  level: debug
  format: console
http:
  listen: 127.0.0.1:0
nats:
  url: %s
  consumer: %s
  subjects: [kafkamender.events.%s.>]
  ack_wait: 3s
  max_attempts: %d
lock:
  zookeeper: %s
  root: %s
  session_timeout: 3s
  acquire_timeout: 2m
  nats: {bucket: %s, ttl: 3s}
replication_factor:
  foreign_wait: 10s
clusters:
  %s:
    bootstrap_servers: [%s]
%s    strategy: auto
`, name, natsURL, r.alias, r.alias, attempts, r.zk, lockRoot, lockBucket, r.alias, strings.Join(c.Bootstrap(), ", "), zk) + r.extra
}

// Where the fault tests' workers keep their locks: lock.root and lock.nats.bucket.
const (
	lockRoot   = "/kafkamender-test/faults"
	lockBucket = "KAFKAMENDER_TEST_LOCKS"
)

// lockAt is where the workers of the rig (rig.config, fleet.config) keep its cluster's
// lock: a ZooKeeper-mode cluster in its ZooKeeper, a KRaft one in NATS (the key-value
// lock), so that the crash tests cover both lock backends.
func (r *rig) lockAt() testenv.LockAt {
	if r.env.Cluster(r.t, r.real).Mode == stack.ModeZooKeeper {
		return testenv.ZooKeeperLock(lockRoot)
	}
	return testenv.NATSLock(lockBucket)
}

// proc is a worker process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *lines
	done chan struct{}
	err  error
}

// start runs a worker process; with pauseAt, it stops for ever at the first of those
// steps it reaches. It returns once the worker consumes events.
func (r *rig) start(name string, pauseAt ...string) *proc {
	r.t.Helper()
	return startProc(r.t, name, r.config(name), pauseAt...)
}

// startProc runs a worker process with the configuration yaml (see rig.start).
func startProc(t *testing.T, name, yaml string, pauseAt ...string) *proc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(workerBin, "--config", cfg)
	cmd.Env = testenv.WorkerEnv(worker.PauseEnv + "=" + strings.Join(pauseAt, ","))
	p := &proc{t: t, name: name, cmd: cmd, out: newLines(), done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.out.read(pr)
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		// A worker built with -race reports a race on its output and goes on; it would
		// exit with status 66 only at a normal exit, and the tests end it with SIGKILL.
		if out := p.out.String(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("worker %s reported a data race (see its output)", name)
		}
		// Its output is logged when the test failed, or always with
		// KAFKAMENDER_TEST_WORKER_LOGS set (where a passing test spends its time).
		if t.Failed() || os.Getenv("KAFKAMENDER_TEST_WORKER_LOGS") != "" {
			t.Logf("=== worker %s output ===\n%s", name, p.out.String())
		}
	})
	p.waitFor("consuming events", 60*time.Second)
	return p
}

// waitFor waits until the worker printed a line containing s.
func (p *proc) waitFor(s string, timeout time.Duration) {
	p.t.Helper()
	if !p.out.wait(s, timeout, p.done) {
		p.t.Fatalf("worker %s did not print %q within %s (exited: %v)", p.name, s, timeout, p.exited())
	}
}

// waitPaused waits until the worker stopped at step.
func (p *proc) waitPaused(step string, timeout time.Duration) {
	p.t.Helper()
	p.waitFor("KAFKAMENDER-PAUSED "+step, timeout)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL: no deferred function, no acknowledgement, no lock release runs.
func (p *proc) kill() {
	if !p.exited() {
		testenv.CountFault()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop ends a worker at the end of its test (SIGKILL, not counted as a fault).
func (p *proc) stop() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// term sends SIGTERM and waits for a clean exit.
func (p *proc) term(timeout time.Duration) {
	p.t.Helper()
	testenv.CountFault()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Fatalf("worker %s exit after SIGTERM: %v", p.name, p.err)
		}
	case <-time.After(timeout):
		p.t.Fatalf("worker %s did not exit within %s of SIGTERM", p.name, timeout)
	}
}

// lines collects a process's output and lets tests wait for a line.
type lines struct {
	mu   sync.Mutex
	buf  strings.Builder
	more chan struct{}
}

func newLines() *lines { return &lines{more: make(chan struct{})} }

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.buf.WriteString(sc.Text())
		l.buf.WriteByte('\n')
		close(l.more)
		l.more = make(chan struct{})
		l.mu.Unlock()
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lines) wait(s string, timeout time.Duration, done <-chan struct{}) bool {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		found, more := strings.Contains(l.buf.String(), s), l.more
		l.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-more:
		case <-done:
			return strings.Contains(l.String(), s)
		case <-deadline:
			return false
		}
	}
}

// publish publishes an event for the rig's cluster and returns its id and a channel that
// receives the results published for it (replays included).
func (r *rig) publish(typ string, data any) (string, <-chan *events.Result) {
	t := r.t
	t.Helper()
	env := r.envelope(typ, data)
	ch := testenv.WatchResults(t, r.nc, env.ID)
	if _, err := r.js.Publish(t.Context(), events.Subject(r.alias, typ), r.marshal(env), jetstream.WithMsgID(env.ID)); err != nil {
		t.Fatal(err)
	}
	testenv.CountEvent()
	return env.ID, ch
}

// envelope is an event for the rig's cluster, with a fresh id.
func (r *rig) envelope(typ string, data any) *events.Envelope {
	raw, err := json.Marshal(data)
	if err != nil {
		r.t.Fatal(err)
	}
	return &events.Envelope{SpecVersion: "1.0", ID: testenv.Name(r.t, "ev"), Source: "faults/" + r.t.Name(), Type: typ,
		Time: time.Now().UTC(), DataContentType: "application/json", Data: raw}
}

func (r *rig) marshal(env *events.Envelope) []byte {
	body, err := json.Marshal(env)
	if err != nil {
		r.t.Fatal(err)
	}
	return body
}

// result waits for the first result of an event.
func (r *rig) result(ch <-chan *events.Result, timeout time.Duration) *events.Result {
	r.t.Helper()
	return testenv.NextResult(r.t, ch, timeout)
}

// oneStored checks that exactly one result of event id is stored (testenv.StoredResult).
func (r *rig) oneStored(id string) *events.Result {
	r.t.Helper()
	return testenv.StoredResult(r.t, r.js, id)
}

// topic creates a topic for the test (deleted at its end) and fills each partition with
// perPartition bytes of records.
func (r *rig) topic(prefix string, assignment [][]int32, perPartition int, configs map[string]string) string {
	t := r.t
	t.Helper()
	name := testenv.Name(t, prefix)
	testenv.CreateTopic(t, r.cl, name, assignment, configs)
	if perPartition > 0 {
		testenv.Produce(t, r.cl, name, len(assignment), perPartition/50_000, 50_000)
	}
	return name
}

// partitions reads a topic's partitions.
func (r *rig) partitions(topic string) []model.Partition {
	r.t.Helper()
	return r.env.Partitions(r.t, r.real, r.cl, topic)
}

// outcome: see testenv.CheckOutcome.
func (r *rig) outcome(res *events.Result, topic string, before []model.Partition, want func(model.Partition) bool, leaders bool) {
	r.t.Helper()
	r.env.CheckOutcome(r.t, r.real, r.cl, res, topic, before, want, leaders)
}

// noLeftovers: see testenv.CheckNoLeftovers; topicThrottles are the topic throttle values
// set by others before, which must be as they were.
func (r *rig) noLeftovers(topics []string, topicThrottles map[string]string) {
	r.t.Helper()
	r.noLeftoversAt(topics, topicThrottles, throttleRate)
}

// noLeftoversAt is noLeftovers for operations that asked for the throttle rate.
func (r *rig) noLeftoversAt(topics []string, topicThrottles map[string]string, rate int) {
	r.t.Helper()
	r.env.CheckNoLeftovers(r.t, r.js, r.cl, testenv.Leftovers{Cluster: r.real, Alias: r.alias, Topics: topics,
		TopicThrottles: topicThrottles, Rate: strconv.Itoa(rate), Lock: r.lockAt()})
}

// logDirOf is the log directory of broker that holds the current replica of topic-p.
func (r *rig) logDirOf(broker int32, topic string, p int32) string {
	r.t.Helper()
	ds, err := r.adm.DescribeBrokerLogDirs(r.t.Context(), broker, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for dir, d := range ds {
		if rp, ok := d.Topics.Lookup(topic, p); ok && !rp.IsFuture {
			return dir
		}
	}
	r.t.Fatalf("%s-%d has no replica on broker %d", topic, p, broker)
	return ""
}
