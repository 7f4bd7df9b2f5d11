package handlers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

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

// fleet is a set of in-process workers serving one real cluster of the stack under an
// alias of its own (a cluster name unique to the test), with their own durable consumer
// filtered on the alias's subjects, so tests sharing the stack never see each other's
// events.
type fleet struct {
	t        *testing.T
	env      *testenv.Env
	real     string // the stack cluster
	alias    string
	requests *requestCounter
	js       jetstream.JetStream
	nc       *nats.Conn
	lockWait time.Duration
	strategy kafka.Strategy
}

func token(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func newFleet(t *testing.T, env *testenv.Env, real string) *fleet {
	t.Helper()
	env.FreeEventsStream(t)
	nc := env.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, env: env, real: real, alias: token("c"), requests: &requestCounter{counts: map[int16]int{}},
		js: js, nc: nc, lockWait: time.Minute, strategy: kafka.StrategyAuto}
}

// start runs one worker of the fleet until the test ends.
func (f *fleet) start(worker string) { f.startKillable(worker) }

// startKillable runs one worker of the fleet, on a NATS connection of its own, and returns
// a kill function: it drops the worker's connection and stops it at once, as a crash
// would: no acknowledgement, negative or not, leaves the worker.
func (f *fleet) startKillable(worker string) (kill func()) {
	t := f.t
	t.Helper()
	nc := f.env.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := f.env.Cluster(t, f.real)
	cl := f.env.Kafka(t, f.real, kgo.WithHooks(f.requests))
	servers := []string{stack.ZooKeeperAddr}
	sess, err := locks.Connect(locks.SessionConfig{Servers: servers, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	lk, err := locks.New(sess, locks.Config{Root: "/kafkamender-test/locks", Worker: worker, Wait: f.lockWait})
	if err != nil {
		t.Fatal(err)
	}
	hc := &handlers.Cluster{Name: f.alias, Client: cl, Locker: lk, Strategy: f.strategy}
	if c.Mode == stack.ModeZooKeeper {
		hc.ZK, hc.Chroot = sess, stack.KafkaChroot
	}
	log := zaptest.NewLogger(t).Named(worker)
	pl, err := pipeline.New(nc, map[string]pipeline.Handler{
		events.TypeReplicaChangeRequested: &handlers.ReplicaChange{Clusters: map[string]*handlers.Cluster{f.alias: hc}, Logger: log, BlockedWait: 5 * time.Second,
			RF: handlers.RFOptions{Poll: 500 * time.Millisecond, ForeignWait: 5 * time.Second}},
		events.TypeBrokerOverloaded: &handlers.BrokerOverloaded{Clusters: map[string]*handlers.Cluster{f.alias: hc}, JS: js, Logger: log},
	}, pipeline.Config{
		Worker: worker, Clusters: []string{f.alias}, Consumer: f.alias,
		FilterSubjects: []string{events.EventsSubjectPrefix + "." + f.alias + ".>", events.EventsSubjectPrefix + ".unknown" + f.alias + ".>"},
		AckWait:        10 * time.Second, Logger: log, InactiveThreshold: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = pl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if s, err := f.js.Stream(context.Background(), events.EventsStream); err == nil {
			_ = s.DeleteConsumer(context.Background(), f.alias)
		}
	})
	testenv.Eventually(t, 30*time.Second, pl.Ready)
	return func() {
		nc.Close()
		cancel()
		<-done
	}
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
	ch := make(chan *events.Result, 4)
	sub, err := f.nc.Subscribe(events.ResultSubject(id), func(m *nats.Msg) {
		var r events.Result
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Errorf("result is not JSON: %v: %s", err, m.Data)
			return
		}
		ch <- &r
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.js.Publish(t.Context(), subject, body, opts...); err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
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
func wait(t *testing.T, ch <-chan *events.Result, timeout time.Duration) *events.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		t.Fatalf("no result within %s", timeout)
		return nil
	}
}

// run publishes an event and waits for its result.
func (f *fleet) run(env *events.Envelope) *events.Result {
	f.t.Helper()
	return wait(f.t, f.publish(env), 3*time.Minute)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
