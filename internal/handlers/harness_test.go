package handlers_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/cancel"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// TestMain prints the tally of the fault tests (go test -v shows it).
func TestMain(m *testing.M) {
	code := m.Run()
	fmt.Println(testenv.Report())
	os.Exit(code)
}

// requestCounter counts the admin requests a client sends, by API key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[key]++
}

func (c *requestCounter) get(key int16) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

const (
	keyElectLeaders               = 43
	keyAlterPartitionReassignment = 45
)

// retries counts the retries the fleet's workers logged whose error contains what.
func (f *fleet) retries(what string) int {
	n := 0
	for _, e := range f.warnings.FilterMessage("retrying").All() {
		if err, _ := e.ContextMap()["error"].(string); strings.Contains(err, what) {
			n++
		}
	}
	return n
}

// fleet is a set of in-process workers serving one real cluster of the stack under an
// alias of its own (a cluster name unique to the test), with their own durable consumer
// filtered on the alias's subjects, so tests sharing the stack never see each other's
// events.
type fleet struct {
	t        testing.TB
	env      *testenv.Env
	real     string // the stack cluster
	alias    string
	requests *requestCounter
	// warnings holds what the fleet's workers logged at warning level and above.
	warnings *observer.ObservedLogs
	observe  zapcore.Core
	js       jetstream.JetStream
	nc       *nats.Conn
	lockWait time.Duration
	strategy kafka.Strategy
	// hook, when set, is every worker's operation.Config.Hook; configure, when set, may
	// change the handlers' config of each worker started.
	hook      func(step string)
	configure func(*handlers.Config)
	// approval, when set, is every worker's approval policy (plans in KAFKAMENDER_PLANS,
	// swept every sweep, default 200ms).
	approval *approval.Policy
	sweep    time.Duration
}

func token(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func newFleet(t testing.TB, env *testenv.Env, real string) *fleet {
	t.Helper()
	env.FreeEventsStream(t)
	nc := env.NATS(t)
	js := testenv.JetStream(t, nc)
	observe, warnings := observer.New(zapcore.WarnLevel)
	return &fleet{t: t, env: env, real: real, alias: token("c"), requests: &requestCounter{counts: map[int16]int{}},
		warnings: warnings, observe: observe, js: js, nc: nc, lockWait: time.Minute, strategy: kafka.StrategyAuto}
}

// start runs one worker of the fleet until the test ends.
func (f *fleet) start(worker string) { f.startKillable(worker) }

// startKillable runs one worker of the fleet, on a NATS connection of its own, and returns
// a kill function: it drops the worker's connection and stops it at once, as a crash
// would: no acknowledgement, negative or not, leaves the worker.
func (f *fleet) startKillable(worker string) (kill func()) {
	f.t.Helper()
	return f.startWith(worker, workerOpts{}).kill
}

// writeLog records the times of the write requests (API keys in writeKeys) a client sends.
type writeLog struct {
	mu    sync.Mutex
	times []time.Time
}

// writeKeys are the requests that change a cluster: AlterConfigs, ElectLeaders,
// IncrementalAlterConfigs, AlterPartitionReassignments, AlterReplicaLogDirs.
var writeKeys = map[int16]bool{33: true, 43: true, 44: true, 45: true, 34: true}

func (w *writeLog) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if !writeKeys[key] {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.times = append(w.times, time.Now())
}

// last is the time of the last write sent (zero: none).
func (w *writeLog) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.times) == 0 {
		return time.Time{}
	}
	return w.times[len(w.times)-1]
}

// workerOpts changes one worker of a fleet.
type workerOpts struct {
	zk       string        // ZooKeeper address of its session (default: the stack's)
	lockWait time.Duration // default: the fleet's
}

// fleetWorker is a running worker of a fleet.
type fleetWorker struct {
	kill   func() // as a crash: the connection drops, nothing is acknowledged
	stop   func() // as a graceful stop (SIGTERM)
	sess   *locks.Session
	writes *writeLog
}

func (f *fleet) startWith(worker string, o workerOpts) *fleetWorker {
	t := f.t
	t.Helper()
	if o.zk == "" {
		o.zk = stack.ZooKeeperAddr
	}
	if o.lockWait == 0 {
		o.lockWait = f.lockWait
	}
	writes := &writeLog{}
	nc := f.env.NATS(t)
	js, err := natsjs.New(nc, 0, nil) // as the worker: on the stack's NATS cluster, 3 replicas
	if err != nil {
		t.Fatal(err)
	}
	c := f.env.Cluster(t, f.real)
	cl := f.env.Kafka(t, f.real, kgo.WithHooks(f.requests, writes))
	sess, err := locks.Connect(locks.SessionConfig{Servers: []string{o.zk}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	lk, err := locks.New(sess, locks.Config{Root: lockRoot, Worker: worker, Wait: o.lockWait})
	if err != nil {
		t.Fatal(err)
	}
	hc := &handlers.Cluster{Name: f.alias, Client: cl, Locker: locks.ZK(lk), Strategy: f.strategy}
	if c.Mode == stack.ModeZooKeeper {
		hc.ZK, hc.Chroot = sess, c.Chroot
	}
	log := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewTee(c, f.observe)
	}))).Named(worker)
	cfg := handlers.Config{
		Clusters: map[string]*handlers.Cluster{f.alias: hc}, JS: js, Logger: log, BlockedWait: 5 * time.Second,
		CopyPoll: 500 * time.Millisecond, RF: config.ReplicationFactor{ForeignWait: 5 * time.Second},
	}
	if f.configure != nil {
		f.configure(&cfg)
	}
	h, err := handlers.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancels := cancel.New(js)
	ocfg := operation.Config{Journal: journal.New(js), Results: pipeline.ResultsOn(js), Logger: log, Hook: f.hook, Cancels: cancels}
	if f.approval != nil {
		ocfg.Approval, ocfg.Plans = *f.approval, approval.NewStore(js)
	}
	eng, err := h.Engine(ocfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := map[string]pipeline.Handler{} // every type the handlers serve, as the worker does
	for _, typ := range h.Types() {
		hs[typ] = eng
	}
	hs[events.TypeOperationCancel] = &cancel.Handler{Store: cancels, Results: pipeline.ResultsOn(js), Guard: h, Logger: log, Wait: 3 * time.Second}
	pl, err := pipeline.New(nc, hs, pipeline.Config{
		Worker: worker, JetStream: js, Clusters: []string{f.alias}, Consumer: f.alias,
		FilterSubjects: []string{events.EventsSubjectPrefix + "." + f.alias + ".>", events.EventsSubjectPrefix + ".unknown" + f.alias + ".>"},
		AckWait:        10 * time.Second, Logger: log, InactiveThreshold: time.Minute,
		// As the worker does (canLock): without a lock session, take no events.
		CanServe: func(string) error { _, err := sess.Current(); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	swept := make(chan struct{})
	go func() {
		defer close(done)
		_ = pl.Run(ctx)
		<-swept
	}()
	go func() {
		defer close(swept)
		eng.RunSweeps(ctx, cmp.Or(f.sweep, 200*time.Millisecond), nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		testenv.DeleteConsumers(context.Background(), f.js, f.alias)
	})
	testenv.Eventually(t, 30*time.Second, pl.Ready)
	return &fleetWorker{sess: sess, writes: writes, kill: func() {
		testenv.CountFault()
		nc.Close()
		cancel()
		<-done
	}, stop: func() {
		testenv.CountFault()
		cancel() // as on SIGTERM: the connection stays, the events in hand are handed back
		<-done
	}}
}

// event is an envelope for the fleet's alias, ready to publish.
func (f *fleet) event(typ string, data any) *events.Envelope {
	raw, err := json.Marshal(data)
	if err != nil {
		f.t.Fatal(err)
	}
	return &events.Envelope{SpecVersion: "1.0", ID: token("ev-"), Source: "test/" + f.t.Name(), Type: typ,
		Time: time.Now().UTC(), DataContentType: "application/json", Data: raw}
}

// publish publishes a raw body on subject with no JetStream message id (so the stream does
// not dedupe it) and returns a channel that receives the result for id.
func (f *fleet) publishRaw(subject, id string, body []byte, opts ...jetstream.PublishOpt) <-chan *events.Result {
	t := f.t
	t.Helper()
	ch := testenv.WatchResults(t, f.nc, id)
	if _, err := f.js.Publish(t.Context(), subject, body, opts...); err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
	testenv.CountEvent()
	return ch
}

// publish publishes an event for the alias and returns its result channel.
func (f *fleet) publish(env *events.Envelope) <-chan *events.Result {
	f.t.Helper()
	raw, err := json.Marshal(env)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.publishRaw(events.Subject(f.alias, env.Type), env.ID, raw)
}

// wait returns the next result from ch.
func wait(t testing.TB, ch <-chan *events.Result, timeout time.Duration) *events.Result {
	t.Helper()
	return testenv.NextResult(t, ch, timeout)
}

// run publishes an event and waits for its result.
func (f *fleet) run(env *events.Envelope) *events.Result {
	f.t.Helper()
	return wait(f.t, f.publish(env), 3*time.Minute)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// noLeftovers checks that nothing of the fleet's is left on the cluster (testenv.CheckNoLeftovers).
func (f *fleet) noLeftovers(topics []string, topicThrottles map[string]string, rate string) {
	f.t.Helper()
	f.env.CheckNoLeftovers(f.t, f.js, f.env.Kafka(f.t, f.real), testenv.Leftovers{Cluster: f.real, Alias: f.alias, Topics: topics,
		TopicThrottles: topicThrottles, Rate: rate, Lock: testenv.ZooKeeperLock(lockRoot)})
}

// lockRoot is where the fleets' workers keep their locks: in the stack's ZooKeeper, for
// clusters of either mode.
const lockRoot = "/kafkamender-test/locks"

// stored returns the one result stored for event id (testenv.StoredResult).
func (f *fleet) stored(id string) *events.Result {
	f.t.Helper()
	return testenv.StoredResult(f.t, f.js, id)
}

// consumerState is the fleet consumer's delivery state.
func (f *fleet) consumerState() *jetstream.ConsumerInfo {
	t := f.t
	t.Helper()
	c, err := f.js.Consumer(t.Context(), events.EventsStream, pipeline.ClusterConsumer(f.alias, f.alias))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
