package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// env is one in-process nats-server with JetStream, for one test.
type env struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := testenv.StartNATSServer(t, &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	}, nil)
	e := &env{t: t, srv: srv}
	var err error
	e.nc = e.connect()
	e.js, err = jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// connect opens a connection of its own (a worker of its own), closed when the test ends.
func (e *env) connect() *nats.Conn {
	e.t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	return nc
}

// handlerFunc is a Handler made of a function.
type handlerFunc func(ctx context.Context, job *pipeline.Job) (*events.Result, error)

func (f handlerFunc) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	return f(ctx, job)
}

const (
	cluster = "local"
	evType  = events.TypeReplicaChangeRequested
)

func config(t *testing.T) pipeline.Config {
	return pipeline.Config{
		Worker:      "w1",
		Clusters:    []string{cluster},
		Concurrency: 2,
		AckWait:     2 * time.Second,
		MaxAttempts: 3,
		RetryDelay:  func(int) time.Duration { return 100 * time.Millisecond },
		Logger:      zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
	}
}

// setup creates the streams and the consumer, as a worker would, without consuming.
func (e *env) setup(cfg pipeline.Config) {
	e.t.Helper()
	p, err := pipeline.New(e.nc, nil, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := p.Setup(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// start runs a pipeline on nc with h for evType until the returned stop is called (or the
// test ends); stop waits for Run to return. It returns once the pipeline is set up.
func (e *env) start(nc *nats.Conn, cfg pipeline.Config, h handlerFunc) (stop func()) {
	e.t.Helper()
	return e.startHandlers(nc, cfg, map[string]pipeline.Handler{evType: h})
}

// startHandlers is start with the handlers hs, by event type.
func (e *env) startHandlers(nc *nats.Conn, cfg pipeline.Config, hs map[string]pipeline.Handler) (stop func()) {
	e.t.Helper()
	p, err := pipeline.New(nc, hs, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				e.t.Errorf("pipeline run: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Error("pipeline did not stop")
		}
	})
	e.t.Cleanup(stop)
	e.eventually("pipeline ready", func() bool { return p.Ready() == nil })
	return stop
}

// body is a valid event of type evType with id.
func body(id string) []byte {
	b, err := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "test", Type: evType,
		DataContentType: events.ContentTypeJSON, Data: json.RawMessage(`{"topic":"orders","preferred_leader":2}`)})
	if err != nil {
		panic(err)
	}
	return b
}

// publish publishes a valid event with id (also its message id) and returns its stream
// sequence.
func (e *env) publish(id string) uint64 {
	e.t.Helper()
	return e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, evType), Data: body(id),
		Header: nats.Header{"X-Test": []string{"kept"}, jetstream.MsgIDHeader: []string{id}}})
}

func (e *env) publishRaw(m *nats.Msg) uint64 {
	e.t.Helper()
	ack, err := e.js.PublishMsg(e.t.Context(), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// stored returns the number of results stored for id and the last one.
func (e *env) stored(id string) (int, *events.Result) {
	e.t.Helper()
	ctx, subject := e.t.Context(), events.ResultSubject(id)
	s, err := e.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.t.Fatal(err)
	}
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return 0, nil
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		e.t.Fatal(err)
	}
	var res events.Result
	if err := json.Unmarshal(m.Data, &res); err != nil {
		e.t.Fatal(err)
	}
	return n, &res
}

// waitResult waits for the result of id and checks it is the only one stored.
func (e *env) waitResult(id string) *events.Result {
	e.t.Helper()
	var res *events.Result
	e.eventually("result of "+id, func() bool {
		var n int
		n, res = e.stored(id)
		return n > 0
	})
	if n, _ := e.stored(id); n != 1 {
		e.t.Fatalf("%d results stored for %s, want 1", n, id)
	}
	return res
}

// deadLetters returns the number of dead letters stored on the subject of cluster c, and the last one.
func (e *env) deadLetters(c string) (uint64, *jetstream.RawStreamMsg) {
	e.t.Helper()
	ctx := e.t.Context()
	s, err := e.js.Stream(ctx, events.DeadStream)
	if err != nil {
		e.t.Fatal(err)
	}
	subject := events.DeadSubject(c)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.t.Fatal(err)
	}
	n := info.State.Subjects[subject]
	if n == 0 {
		return 0, nil
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		e.t.Fatal(err)
	}
	return n, m
}

// eventsLeft is the number of messages in the work-queue stream.
func (e *env) eventsLeft() uint64 {
	e.t.Helper()
	return testenv.StreamMsgs(e.t, e.js, events.EventsStream)
}

func (e *env) consumer() *jetstream.ConsumerInfo {
	e.t.Helper()
	c, err := e.js.Consumer(e.t.Context(), events.EventsStream, pipeline.ClusterConsumer(pipeline.DefaultConsumer, cluster))
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

// waitSettled waits until the work-queue stream is empty and the consumer has nothing
// pending or unacknowledged.
func (e *env) waitSettled() *jetstream.ConsumerInfo {
	e.t.Helper()
	var ci *jetstream.ConsumerInfo
	e.eventually("event stream empty, nothing pending", func() bool {
		ci = e.consumer()
		return e.eventsLeft() == 0 && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	return ci
}

// watchTerminated returns a function that waits until JetStream told that the message at
// stream sequence seq was terminated.
func (e *env) watchTerminated() func(seq uint64) {
	e.t.Helper()
	var mu sync.Mutex
	seen := map[uint64]bool{}
	sub, err := e.nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED."+events.EventsStream+"."+pipeline.ClusterConsumer(pipeline.DefaultConsumer, cluster),
		func(m *nats.Msg) {
			var adv struct {
				StreamSeq uint64 `json:"stream_seq"`
			}
			if json.Unmarshal(m.Data, &adv) == nil {
				mu.Lock()
				seen[adv.StreamSeq] = true
				mu.Unlock()
			}
		})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return func(seq uint64) {
		e.t.Helper()
		e.eventually("terminated advisory", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[seq]
		})
	}
}

// eventually polls cond until it holds, failing the test after a generous deadline.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// calls counts handler calls.
type calls struct {
	mu sync.Mutex
	n  int
}

func (c *calls) inc() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *calls) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// checkEventsTotal compares the registry's kafkamender_events_total series that are not
// zero with samples ("series value" lines).
func checkEventsTotal(t *testing.T, reg *prometheus.Registry, samples string) {
	t.Helper()
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(samples), "\n") {
		want = append(want, strings.TrimSpace(l))
	}
	if got := metricstest.NonZero(t, reg, "kafkamender_events_total"); got != strings.Join(want, "\n") {
		t.Errorf("kafkamender_events_total:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// withMetrics gives cfg metrics on a registry of their own.
func withMetrics(t *testing.T, cfg *pipeline.Config) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{Clusters: cfg.Clusters})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = m
	return reg
}
