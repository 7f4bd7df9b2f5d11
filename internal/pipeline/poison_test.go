package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

func TestPanicIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.Concurrency = 1 // the same loop must go on with the next event
	core, logs := observer.New(zap.ErrorLevel)
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	reg := withMetrics(t, &cfg)
	terminated := e.watchTerminated()
	var released atomic.Bool
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		if job.Event.ID == "ev-panic" {
			defer released.Store(true) // as a handler releases its lock
			panic("boom")
		}
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	seq := e.publish("ev-panic")

	res := e.waitResult("ev-panic")
	if res.Status != events.StatusFailed || res.Error != "handler panicked: boom" || res.Attempt != 1 {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq)
	if !released.Load() {
		t.Error("the handler's defers did not run")
	}

	e.publish("ev-after-panic")
	if res := e.waitResult("ev-after-panic"); res.Status != events.StatusSucceeded {
		t.Errorf("next event's result = %+v", res)
	}
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 2 || ci.NumRedelivered != 0 {
		t.Errorf("delivered %d, redelivered %d; want 2, 0", ci.Delivered.Consumer, ci.NumRedelivered)
	}

	if got := metricstest.NonZero(t, reg, "kafkamender_dead_letters_total"); got != `kafkamender_dead_letters_total{cluster="`+cluster+`",type="replica-change-requested"} 1` {
		t.Errorf("dead letters counted: %q", got)
	}
	n, dead := e.deadLetters(cluster)
	if n != 1 {
		t.Fatalf("%d dead letters; want 1", n)
	}
	if dead.Subject != "kafkamender.dead.local" || string(dead.Data) != string(body("ev-panic")) {
		t.Errorf("dead letter on %s: %s", dead.Subject, dead.Data)
	}
	want := map[string]string{
		events.HeaderOriginalSubject:           events.Subject(cluster, evType),
		events.HeaderStreamSequence:            strconv.FormatUint(seq, 10),
		events.HeaderDeliveries:                "1",
		events.HeaderReason:                    "handler panicked: boom",
		events.HeaderEventID:                   "ev-panic",
		jetstream.MsgIDHeader:                  fmt.Sprintf("dead-%d", seq),
		events.HeaderOriginalPrefix + "Msg-Id": "ev-panic",
		"X-Test":                               "kept",
	}
	for k, v := range want {
		if got := dead.Header.Get(k); got != v {
			t.Errorf("dead letter header %s = %q; want %q", k, got, v)
		}
	}

	var logged bool
	for _, entry := range logs.All() {
		fields := entry.ContextMap()
		if stack, _ := fields["stack"].(string); fields["panic"] == "boom" && strings.Contains(stack, "panic(") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no error log with the panic and its stack: %+v", logs.All())
	}
}

// crash hands the next delivery to a pipeline that dies while its handler runs: its
// connection closes before the handler returns, so the message is neither acknowledged nor
// negatively acknowledged. It returns the attempt the handler saw.
func (e *env) crash(cfg pipeline.Config) int {
	e.t.Helper()
	nc := e.connect()
	cfg.Concurrency = 1
	started := make(chan int, 1)
	stop := e.start(nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		started <- job.Attempt
		<-ctx.Done()
		return nil, ctx.Err()
	})
	var attempt int
	select {
	case attempt = <-started:
	case <-time.After(20 * time.Second):
		e.t.Fatal("no delivery for the crashing worker")
	}
	nc.Close()
	stop()
	return attempt
}

func TestDeliveryLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 2
	cfg.AckWait = 500 * time.Millisecond
	e.setup(cfg)
	seq := e.publish("ev-crasher")
	for want := 1; want <= cfg.MaxAttempts; want++ {
		if got := e.crash(cfg); got != want {
			t.Fatalf("crashing worker got attempt %d; want %d", got, want)
		}
	}

	terminated := e.watchTerminated()
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	res := e.waitResult("ev-crasher")
	if res.Status != events.StatusFailed || res.Attempt != 3 ||
		res.Error != "delivered 3 times without a result: the worker handling it stopped each time" {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq)
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 3 || n.get() != 0 {
		t.Errorf("delivered %d, handled %d; want 3, 0", ci.Delivered.Consumer, n.get())
	}
	if ci.Config.MaxDeliver != cfg.MaxAttempts+1 {
		t.Errorf("consumer MaxDeliver = %d; want %d", ci.Config.MaxDeliver, cfg.MaxAttempts+1)
	}
	count, dead := e.deadLetters(cluster)
	if count != 1 || dead.Header.Get(events.HeaderDeliveries) != "3" || dead.Header.Get(events.HeaderEventID) != "ev-crasher" ||
		!strings.HasPrefix(dead.Header.Get(events.HeaderReason), "delivered 3 times") {
		t.Errorf("%d dead letters, last %+v", count, dead)
	}
}

// The last delivery too ends without an acknowledgement (the worker that took it died
// before it could give up on the event): JetStream's max-deliveries advisory has the
// workers settle the event from the stream, once.
func TestMaxDeliveriesAdvisory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 1
	cfg.AckWait = time.Second
	e.setup(cfg)
	seq := e.publish("ev-lost")
	if got := e.crash(cfg); got != 1 {
		t.Fatalf("crashing worker got attempt %d; want 1", got)
	}
	// The last delivery, taken by a worker that dies at once.
	cons, err := e.js.Consumer(t.Context(), events.EventsStream, pipeline.ClusterConsumer(pipeline.DefaultConsumer, cluster))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var delivered uint64
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		delivered = md.NumDelivered
	}
	if delivered != 2 {
		t.Fatalf("last delivery is delivery %d; want 2", delivered)
	}

	// Two workers hear the advisory once the last delivery's ack wait passes.
	var n calls
	h := func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	}
	e.start(e.nc, cfg, h)
	cfg2 := config(t)
	cfg2.Worker, cfg2.MaxAttempts, cfg2.AckWait = "w2", cfg.MaxAttempts, cfg.AckWait
	e.start(e.connect(), cfg2, h)

	res := e.waitResult("ev-lost")
	if res.Status != events.StatusFailed || res.Attempt != 2 ||
		res.Error != "delivered 2 times without a result: the worker handling it stopped each time" {
		t.Errorf("stored result = %+v", res)
	}
	ci := e.waitSettled()
	if n.get() != 0 {
		t.Errorf("handler ran %d times", n.get())
	}
	if ci.Delivered.Consumer != 2 {
		t.Errorf("consumer delivered %d times; want 2", ci.Delivered.Consumer)
	}
	e.eventually("dead letter", func() bool { c, _ := e.deadLetters(cluster); return c > 0 })
	count, dead := e.deadLetters(cluster)
	if count != 1 || dead.Header.Get(events.HeaderDeliveries) != "2" ||
		dead.Header.Get(events.HeaderStreamSequence) != strconv.FormatUint(seq, 10) {
		t.Errorf("%d dead letters, last %+v", count, dead)
	}
	if c, _ := e.stored("ev-lost"); c != 1 {
		t.Errorf("%d results stored; want 1", c)
	}
}
