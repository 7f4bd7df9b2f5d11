package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
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
		if job.Event().ID == "ev-panic" {
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
		started <- job.Attempt()
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
	if ci.Config.MaxDeliver != -1 {
		t.Errorf("consumer MaxDeliver = %d; want -1 (the pipeline bounds the attempts)", ci.Config.MaxDeliver)
	}
	count, dead := e.deadLetters(cluster)
	if count != 1 || dead.Header.Get(events.HeaderDeliveries) != "3" || dead.Header.Get(events.HeaderEventID) != "ev-crasher" ||
		!strings.HasPrefix(dead.Header.Get(events.HeaderReason), "delivered 3 times") {
		t.Errorf("%d dead letters, last %+v", count, dead)
	}
}

// The delivery that gives the event up is lost too (the worker that took it died before it
// could): the consumer has no delivery limit, so the event comes again, and the next
// worker gives it up: one result, one dead letter.
func TestGivingUpIsDeliveredAgain(t *testing.T) {
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
	// The delivery beyond the last attempt, taken by a worker that dies at once.
	e.fetchAndDrop(2)

	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	res := e.waitResult("ev-lost")
	if res.Status != events.StatusFailed || res.Attempt != 3 ||
		res.Error != "delivered 3 times without a result: the worker handling it stopped each time" {
		t.Errorf("stored result = %+v", res)
	}
	ci := e.waitSettled()
	if n.get() != 0 || ci.Delivered.Consumer != 3 {
		t.Errorf("handler ran %d times, consumer delivered %d times; want 0, 3", n.get(), ci.Delivered.Consumer)
	}
	count, dead := e.deadLetters(cluster)
	if count != 1 || dead.Header.Get(events.HeaderDeliveries) != "3" ||
		dead.Header.Get(events.HeaderStreamSequence) != strconv.FormatUint(seq, 10) {
		t.Errorf("%d dead letters, last %+v", count, dead)
	}
}

// fetchAndDrop takes the next delivery as a worker that dies at once (no acknowledgement of
// any kind) and checks it is delivery want.
func (e *env) fetchAndDrop(want uint64) {
	e.t.Helper()
	cons, err := e.js.Consumer(e.t.Context(), events.EventsStream, pipeline.ClusterConsumer(pipeline.DefaultConsumer, cluster))
	if err != nil {
		e.t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(20*time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	var delivered uint64
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			e.t.Fatal(err)
		}
		delivered = md.NumDelivered
	}
	if delivered != want {
		e.t.Fatalf("dropped delivery %d; want %d", delivered, want)
	}
}

// Storage is full when the event is given up: neither its dead letter nor its result can
// be stored. The event stays in the stream, delivered again and again, until storage is
// back; then it gets its one result (it did not before: the server's delivery limit ended
// the deliveries, and nobody stored a result).
func TestGivingUpWaitsForStorage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 1
	cfg.AckWait = time.Second
	e.setup(cfg)
	e.publish("ev-full")
	if got := e.crash(cfg); got != 1 {
		t.Fatalf("crashing worker got attempt %d; want 1", got)
	}
	// The worker sets the streams up (which would lift the limits) before storage fills;
	// it takes no event until then.
	var full atomic.Bool
	cfg.CanServe = func(string) error {
		if !full.Load() {
			return errors.New("not yet")
		}
		return nil
	}
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	restore := e.fillStreams(events.DeadStream, events.ResultsStream)
	full.Store(true)
	// Given up on, and delivered again, several times while storage is full.
	e.eventually("deliveries while storage is full", func() bool { return e.consumer().Delivered.Consumer >= 4 })
	if c, _ := e.stored("ev-full"); c != 0 || e.eventsLeft() != 1 {
		t.Fatalf("while storage is full: %d results, %d events left; want 0, 1", c, e.eventsLeft())
	}
	restore()
	res := e.waitResult("ev-full")
	if res.Status != events.StatusFailed || !strings.HasPrefix(res.Error, "delivered ") || n.get() != 0 {
		t.Errorf("stored result = %+v (handler ran %d times)", res, n.get())
	}
	e.waitSettled()
	if count, _ := e.deadLetters(cluster); count != 1 {
		t.Errorf("%d dead letters; want 1", count)
	}
}

// fillStreams makes the streams refuse every new message (a limit of the messages they
// hold, new ones discarded), as when storage is full, and returns a function that lifts
// the limit again.
func (e *env) fillStreams(names ...string) (restore func()) {
	e.t.Helper()
	ctx := e.t.Context()
	var saved []jetstream.StreamConfig
	for _, name := range names {
		s, err := e.js.Stream(ctx, name)
		if err != nil {
			e.t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		saved = append(saved, info.Config)
		full := info.Config
		full.MaxMsgs, full.Discard = int64(max(info.State.Msgs, 1)), jetstream.DiscardNew
		if info.State.Msgs == 0 {
			// One message to fill it: on a subject of the stream no result or letter uses.
			subject := strings.TrimSuffix(full.Subjects[0], ">") + "filler"
			if _, err := e.js.Publish(ctx, subject, []byte("{}")); err != nil {
				e.t.Fatal(err)
			}
		}
		if _, err := e.js.UpdateStream(ctx, full); err != nil {
			e.t.Fatal(err)
		}
	}
	return func() {
		e.t.Helper()
		for _, cfg := range saved {
			if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// The handler stored the result on the event's last attempt, and its worker died before
// acknowledging it: the delivery that gives the event up replays the stored result, and
// neither runs the handler nor dead-letters the event.
func TestGivingUpReplaysAStoredResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 1
	cfg.AckWait = time.Second
	e.setup(cfg)
	e.publish("ev-stored")
	nc := e.connect()
	published := make(chan struct{})
	stop := e.start(nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		if _, _, err := job.Publish(ctx, &events.Result{Status: events.StatusSucceeded, Strategy: "api"}); err != nil {
			return nil, err
		}
		close(published)
		<-ctx.Done() // dies before Handle returns: no acknowledgement
		return nil, ctx.Err()
	})
	select {
	case <-published:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not store its result")
	}
	nc.Close()
	stop()

	sub, err := e.nc.SubscribeSync(events.ResultSubject("ev-stored"))
	if err != nil {
		t.Fatal(err)
	}
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusFailed}, nil
	})
	m, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var replay events.Result
	if err := json.Unmarshal(m.Data, &replay); err != nil || !replay.Replayed || replay.Status != events.StatusSucceeded {
		t.Errorf("heard %s (%v); want the stored result replayed", m.Data, err)
	}
	ci := e.waitSettled()
	if c, res := e.stored("ev-stored"); c != 1 || res.Status != events.StatusSucceeded || n.get() != 0 {
		t.Errorf("%d results stored, last %+v; handler ran %d times", c, res, n.get())
	}
	if count, _ := e.deadLetters(cluster); count != 0 || ci.Delivered.Consumer != 2 {
		t.Errorf("%d dead letters, %d deliveries; want 0, 2", count, ci.Delivered.Consumer)
	}
}
