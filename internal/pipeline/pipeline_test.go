package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

func TestSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	reg := withMetrics(t, &cfg)
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded, Strategy: "api"}, nil
	})
	e.publish("ev-ok")

	res := e.waitResult("ev-ok")
	if res.Status != events.StatusSucceeded || res.Strategy != "api" || res.Attempt != 1 || res.Worker != "w1" ||
		res.Type != evType || res.Cluster != cluster || res.FinishedAt.IsZero() || res.Changes == nil || res.Skipped == nil {
		t.Errorf("stored result = %+v", res)
	}
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 1 || ci.NumRedelivered != 0 {
		t.Errorf("consumer delivered %d, redelivered %d; want 1, 0", ci.Delivered.Consumer, ci.NumRedelivered)
	}
	if n.get() != 1 {
		t.Errorf("handler called %d times", n.get())
	}
	checkEventsTotal(t, reg, `
kafkamender_events_total{status="succeeded",type="replica-change-requested"} 1
`)
}

func TestTransientThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	const delay = 400 * time.Millisecond
	cfg.RetryDelay = func(attempt int) time.Duration { return time.Duration(attempt) * delay }
	reg := withMetrics(t, &cfg)
	var mu sync.Mutex
	var failedAt, retriedAt time.Time
	var last []bool
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		last = append(last, job.LastAttempt())
		if job.Attempt() == 1 {
			failedAt = time.Now()
			return nil, retry.Transient(errors.New("controller moving"))
		}
		retriedAt = time.Now()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	e.publish("ev-transient")

	res := e.waitResult("ev-transient")
	if res.Status != events.StatusSucceeded || res.Attempt != 2 {
		t.Errorf("stored result = %+v; want succeeded on attempt 2", res)
	}
	mu.Lock()
	if gap := retriedAt.Sub(failedAt); gap < delay {
		t.Errorf("second attempt %v after the first failed; want at least the nak delay %v", gap, delay)
	}
	if fmt.Sprint(last) != "[false false]" {
		t.Errorf("LastAttempt of the attempts = %v", last)
	}
	mu.Unlock()
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 2 {
		t.Errorf("consumer delivered %d times; want 2", ci.Delivered.Consumer)
	}
	if got := metricstest.NonZero(t, reg, "kafkamender_retries_total"); got != `kafkamender_retries_total{cluster="`+cluster+`",type="replica-change-requested"} 1` {
		t.Errorf("retries counted: %q", got)
	}
}

func TestTransientOnLastAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 2
	terminated := e.watchTerminated()
	var mu sync.Mutex
	var last []bool
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		mu.Lock()
		last = append(last, job.LastAttempt())
		mu.Unlock()
		return nil, retry.Transient(errors.New("lock busy"))
	})
	seq := e.publish("ev-giveup")

	res := e.waitResult("ev-giveup")
	if res.Status != events.StatusFailed || res.Error != "gave up after 2 attempts: lock busy" || res.Attempt != 2 {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq)
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 2 {
		t.Errorf("consumer delivered %d times; want 2", ci.Delivered.Consumer)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(last) != "[false true]" {
		t.Errorf("LastAttempt of the attempts = %v", last)
	}
}

func TestPermanentFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	terminated := e.watchTerminated()
	var n calls
	e.start(e.nc, config(t), func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Strategy: "api", Note: "kept"}, errors.New("broker 7 does not exist")
	})
	seq := e.publish("ev-permanent")

	res := e.waitResult("ev-permanent")
	if res.Status != events.StatusFailed || res.Error != "broker 7 does not exist" || res.Note != "kept" || res.Strategy != "api" {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq)
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 1 || ci.NumRedelivered != 0 || n.get() != 1 {
		t.Errorf("delivered %d, redelivered %d, handled %d; want 1, 0, 1", ci.Delivered.Consumer, ci.NumRedelivered, n.get())
	}
}

func TestRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	terminated := e.watchTerminated()
	var n calls
	e.start(e.nc, config(t), func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	// Unreadable body: the result is named after the message id.
	seq1 := e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, evType), Data: []byte("{not json"),
		Header: nats.Header{jetstream.MsgIDHeader: []string{"ev-garbage"}}})
	// Neither an event id nor a message id: named after the stream sequence.
	seq2 := e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, evType), Data: []byte(`{"specversion":"1.0"}`)})

	res := e.waitResult("ev-garbage")
	if res.Status != events.StatusRejected || res.Error == "" || res.Cluster != cluster || res.Type != evType {
		t.Errorf("stored result = %+v", res)
	}
	res = e.waitResult(fmt.Sprintf("invalid-seq-%d", seq2))
	if res.Status != events.StatusRejected || !strings.Contains(res.Error, "id: required") {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq1)
	terminated(seq2)
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 2 || n.get() != 0 {
		t.Errorf("delivered %d, handled %d; want 2, 0", ci.Delivered.Consumer, n.get())
	}
}

func TestPublishFailureLeavesEventForRedelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 50
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})

	// The results stream refuses every new message: full, discarding new ones.
	ctx := t.Context()
	results, err := e.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	original := results.CachedInfo().Config
	full := original
	full.MaxMsgs, full.Discard = 1, jetstream.DiscardNew
	if _, err := e.js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(ctx, events.ResultSubject("filler"), []byte("{}")); err != nil {
		t.Fatal(err)
	}

	e.publish("ev-pubfail")
	e.eventually("event handled again after its result was refused", func() bool { return n.get() >= 3 })
	if c, _ := e.stored("ev-pubfail"); c != 0 {
		t.Fatalf("%d results stored while the stream refuses them", c)
	}
	if left := e.eventsLeft(); left != 1 {
		t.Fatalf("%d events in the stream; want the event kept for redelivery", left)
	}
	if ci := e.consumer(); ci.Delivered.Consumer < 3 {
		t.Fatalf("consumer delivered %d times; want redeliveries", ci.Delivered.Consumer)
	}

	// Publishing works again: the next delivery stores exactly one result.
	if err := results.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.UpdateStream(ctx, original); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult("ev-pubfail")
	if res.Status != events.StatusSucceeded || res.Attempt < 3 {
		t.Errorf("stored result = %+v", res)
	}
	e.waitSettled()
	if c, _ := e.stored("ev-pubfail"); c != 1 {
		t.Errorf("%d results stored; want 1", c)
	}
}

func TestAtomicPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup(config(t))
	ctx := t.Context()
	results, err := pipeline.NewResults(ctx, e.nc)
	if err != nil {
		t.Fatal(err)
	}

	first := &events.Result{ID: "ev-atomic", Type: evType, Cluster: cluster, Status: events.StatusSucceeded, Worker: "w1"}
	stored, published, err := results.Publish(ctx, first)
	if err != nil || !published || stored != first {
		t.Fatalf("first publish = %+v, %v, %v; want itself, published", stored, published, err)
	}
	if first.FinishedAt.IsZero() || first.Changes == nil || first.Skipped == nil {
		t.Errorf("publish did not complete the result: %+v", first)
	}
	second := &events.Result{ID: "ev-atomic", Type: evType, Cluster: cluster, Status: events.StatusFailed, Worker: "w2"}
	stored, published, err = results.Publish(ctx, second)
	if err != nil || published || stored.Worker != "w1" || stored.Status != events.StatusSucceeded {
		t.Fatalf("second publish = %+v, %v, %v; want the first, not published", stored, published, err)
	}
	// The same result again (its first publish's acknowledgement lost): it is the stored one.
	if _, published, err = results.Publish(ctx, first); err != nil || !published {
		t.Errorf("publish of the stored result again = %v, %v; want published", published, err)
	}
	if n, _ := e.stored("ev-atomic"); n != 1 {
		t.Errorf("%d results stored; want 1", n)
	}
	earlier, ok, err := results.Earlier(ctx, "ev-atomic")
	if err != nil || !ok || earlier.Worker != "w1" {
		t.Errorf("Earlier = %+v, %v, %v", earlier, ok, err)
	}
	if _, ok, err := results.Earlier(ctx, "ev-none"); ok || err != nil {
		t.Errorf("Earlier of an unknown id = %v, %v", ok, err)
	}

	// Racing workers: one wins, every one of them is told the winner's result.
	const racers = 8
	var wg sync.WaitGroup
	got := make([]*events.Result, racers)
	won := make([]bool, racers)
	for i := range racers {
		wg.Go(func() {
			res := &events.Result{ID: "ev-race", Status: events.StatusSucceeded, Worker: fmt.Sprintf("w%d", i)}
			var err error
			got[i], won[i], err = results.Publish(ctx, res)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range racers {
		if won[i] {
			winners++
		}
		if got[i] == nil || got[i].Worker != got[0].Worker {
			t.Errorf("racer %d was told %+v, racer 0 %+v", i, got[i], got[0])
		}
	}
	if winners != 1 {
		t.Errorf("%d racers published; want 1", winners)
	}
	if n, _ := e.stored("ev-race"); n != 1 {
		t.Errorf("%d results stored; want 1", n)
	}
}

func TestReplayOfStoredResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	e.setup(cfg)
	ctx := t.Context()
	results, err := pipeline.NewResults(ctx, e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := results.Publish(ctx, &events.Result{ID: "ev-again", Status: events.StatusSucceeded, Worker: "earlier"}); err != nil {
		t.Fatal(err)
	}
	sub, err := e.nc.SubscribeSync(events.ResultSubject("ev-again"))
	if err != nil {
		t.Fatal(err)
	}
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	e.publish("ev-again")

	m, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var replayed events.Result
	if err := json.Unmarshal(m.Data, &replayed); err != nil {
		t.Fatal(err)
	}
	if !replayed.Replayed || replayed.Worker != "earlier" {
		t.Errorf("replayed result = %+v", replayed)
	}
	e.waitSettled()
	if c, res := e.stored("ev-again"); c != 1 || res.Replayed || res.Worker != "earlier" {
		t.Errorf("%d results stored, last %+v; want the original only", c, res)
	}
	if n.get() != 0 {
		t.Errorf("handler ran %d times for an event with a result", n.get())
	}
}

// A handler finds, under its lock, that another worker stored the result meanwhile.
func TestReplayFromHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub, err := e.nc.SubscribeSync(events.ResultSubject("ev-meanwhile"))
	if err != nil {
		t.Fatal(err)
	}
	e.start(e.nc, config(t), func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		other := &events.Result{ID: job.Event().ID, Status: events.StatusNoop, Worker: "other"}
		results, err := pipeline.NewResults(ctx, e.nc)
		if err != nil {
			return nil, err
		}
		if _, _, err := results.Publish(ctx, other); err != nil {
			return nil, err
		}
		earlier, ok, err := job.Earlier(ctx)
		if err != nil || !ok {
			return nil, fmt.Errorf("earlier: %v, %v", ok, err)
		}
		earlier.Replayed = true
		return earlier, nil
	})
	e.publish("ev-meanwhile")

	// The result subject carries the stored result, then its replay.
	var heard []events.Result
	for len(heard) < 2 {
		m, err := sub.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r events.Result
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		heard = append(heard, r)
	}
	if heard[0].Replayed || !heard[1].Replayed || heard[1].Worker != "other" {
		t.Errorf("heard %+v", heard)
	}
	e.waitSettled()
	if c, res := e.stored("ev-meanwhile"); c != 1 || res.Worker != "other" || res.Replayed {
		t.Errorf("%d results stored, last %+v", c, res)
	}
}

// A handler that stores its result itself: the pipeline only acknowledges (or terminates,
// for a failed result), whatever Handle returns, and counts the result once.
func TestHandlerPublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	reg := withMetrics(t, &cfg)
	terminated := e.watchTerminated()
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		status := events.StatusSucceeded
		if job.Event().ID == "ev-own-failed" {
			status = events.StatusFailed
		}
		if _, published, err := job.Publish(ctx, &events.Result{Status: status, Strategy: "api"}); err != nil || !published {
			return nil, fmt.Errorf("publish: %v, %v", published, err)
		}
		// What the handler returns now no longer matters.
		return &events.Result{Status: events.StatusNoop}, retry.Transient(errors.New("journal delete failed"))
	})
	e.publish("ev-own")
	seq := e.publish("ev-own-failed")

	res := e.waitResult("ev-own")
	if res.Status != events.StatusSucceeded || res.Attempt != 1 || res.Worker != "w1" || res.Type != evType || res.Strategy != "api" {
		t.Errorf("stored result = %+v", res)
	}
	if res := e.waitResult("ev-own-failed"); res.Status != events.StatusFailed {
		t.Errorf("stored result = %+v", res)
	}
	terminated(seq)
	ci := e.waitSettled()
	if ci.Delivered.Consumer != 2 || n.get() != 2 {
		t.Errorf("delivered %d, handled %d; want 2, 2", ci.Delivered.Consumer, n.get())
	}
	checkEventsTotal(t, reg, `
kafkamender_events_total{status="failed",type="replica-change-requested"} 1
kafkamender_events_total{status="succeeded",type="replica-change-requested"} 1
`)
}

// A job hands its handler the message as received, and encodes it so that it decodes
// again (a journal keeps it for whoever finishes the operation); a progress report for
// another event (one whose operation the handler finishes) goes to that event's subject.
func TestJobRequestAndProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	progress, err := e.nc.SubscribeSync(events.ProgressSubject("ev-b"))
	if err != nil {
		t.Fatal(err)
	}
	var checks []string
	var mu sync.Mutex
	check := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		checks = append(checks, fmt.Sprintf(format, args...))
	}
	e.start(e.nc, config(t), func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		raw := job.Raw()
		if raw.Subject != events.Subject(cluster, evType) || raw.Seq == 0 ||
			raw.Header.Get(jetstream.MsgIDHeader) != "ev-a" || string(raw.Data) != string(body("ev-a")) {
			check("job.Raw = %+v", raw)
		}
		req, err := job.Request()
		if err != nil {
			return nil, err
		}
		var again pipeline.RawEvent
		if err := json.Unmarshal(req, &again); err != nil {
			return nil, err
		}
		ev, err := again.Decode(events.DecodeOptions{Clusters: []string{cluster}})
		if err != nil || ev.ID != "ev-a" || again.Seq != raw.Seq {
			check("the request decodes to %+v (seq %d), %v", ev, again.Seq, err)
		}
		if job.Attempt() != 1 || job.LastAttempt() || job.Worker() != "w1" || job.Event().ID != "ev-a" {
			check("job: attempt %d, last %v, worker %q, event %q", job.Attempt(), job.LastAttempt(), job.Worker(), job.Event().ID)
		}
		job.Progress(events.Progress{ID: "ev-b", Batch: 1, Batches: 2})
		return &events.Result{Status: events.StatusNoop}, nil
	})
	e.publish("ev-a")

	m, err := progress.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var p events.Progress
	if err := json.Unmarshal(m.Data, &p); err != nil || p.ID != "ev-b" || p.Batch != 1 || p.Batches != 2 {
		t.Errorf("progress of ev-b = %s (%v)", m.Data, err)
	}
	if a := e.waitResult("ev-a"); a.Status != events.StatusNoop || a.Attempt != 1 {
		t.Errorf("result of ev-a = %+v", a)
	}
	e.waitSettled()
	mu.Lock()
	defer mu.Unlock()
	for _, c := range checks {
		t.Error(c)
	}
}

// A handler that stops because the worker stops: the event goes to another worker soon
// (the nak delay is short, not RetryDelay), and never gets a result for that, not even on
// its last attempt.
func TestShutdownHandsEventOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.MaxAttempts = 2
	cfg.RetryDelay = func(int) time.Duration { return time.Hour } // the test would time out
	type start struct {
		attempt int
		last    bool
	}
	blocker := func(started chan<- start) handlerFunc {
		return func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
			started <- start{job.Attempt(), job.LastAttempt()}
			<-ctx.Done()
			return nil, fmt.Errorf("wait for the cluster lock: %w", ctx.Err())
		}
	}
	e.setup(cfg)
	e.publish("ev-stop")
	for attempt := 1; attempt <= cfg.MaxAttempts; attempt++ {
		started := make(chan start, 1)
		stop := e.start(e.connect(), cfg, blocker(started))
		select {
		case s := <-started:
			if s.attempt != attempt || s.last != (attempt == cfg.MaxAttempts) {
				t.Fatalf("handler started as %+v; want attempt %d", s, attempt)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("attempt %d never started", attempt)
		}
		stop()
		if n, res := e.stored("ev-stop"); n != 0 {
			t.Fatalf("a result was stored after the worker stopped on attempt %d: %+v", attempt, res)
		}
		if left := e.eventsLeft(); left != 1 {
			t.Fatalf("%d events in the stream after the worker stopped; want 1", left)
		}
	}
	// Every delivery ended with its worker stopping: the next one gives up.
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return nil, nil
	})
	res := e.waitResult("ev-stop")
	if res.Status != events.StatusFailed || res.Error != "delivered 3 times without a result: the worker handling it stopped each time" {
		t.Errorf("stored result = %+v", res)
	}
	e.waitSettled()
	if n.get() != 0 {
		t.Errorf("handler ran %d times past the delivery limit", n.get())
	}
}

// A worker that cannot serve (CanServe says why) takes no event: it is not delivered, so
// none of its deliveries is used up, and another worker that can takes it; once it can
// serve again, it takes events again.
func TestCannotServeLeavesEventsToOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var serving atomic.Bool
	var asked atomic.Int64
	cfg := config(t)
	cfg.CanServe = func(string) error {
		asked.Add(1)
		if !serving.Load() {
			return errors.New("no zookeeper session")
		}
		return nil
	}
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	e.publish("ev-gated")
	// The pipeline asked several times since the event was published, and fetched nothing.
	seen := asked.Load()
	e.eventually("CanServe asked again", func() bool { return asked.Load() >= seen+8 })
	if ci := e.consumer(); ci.Delivered.Consumer != 0 || n.get() != 0 {
		t.Fatalf("while it cannot serve: delivered %d, handled %d; want 0, 0", ci.Delivered.Consumer, n.get())
	}

	// Another worker that can serve takes it, on its first delivery.
	other := config(t)
	other.Worker = "w2"
	stopOther := e.start(e.connect(), other, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	if res := e.waitResult("ev-gated"); res.Worker != "w2" || res.Attempt != 1 {
		t.Fatalf("result by %s on attempt %d; want w2 on attempt 1", res.Worker, res.Attempt)
	}
	stopOther()

	// Back in service, the first worker takes events again.
	serving.Store(true)
	e.publish("ev-back")
	if res := e.waitResult("ev-back"); res.Worker != "w1" || n.get() != 1 {
		t.Fatalf("result by %s, first worker handled %d; want w1, 1", res.Worker, n.get())
	}
}

// Values that reach a NATS subject are bounded before they do: an event whose id, or
// whose subject's cluster, is thousands of characters long (a subject still under
// nats-server's 4 KiB control line, a result subject over it) gets a rejected result under
// a valid id and leaves the stream, and the worker's connection stays up (nats.go closes a
// connection for good when the server refuses an over-long control line).
func TestOverLongValuesNeverReachASubject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wnc := e.connect()
	cfg := config(t)
	cfg.StrayGrace = 100 * time.Millisecond
	e.start(wnc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		t.Errorf("handled %s", job.Event().ID)
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	long := strings.Repeat("i", 4000) // its result subject would pass the 4 KiB control line
	body := func(id string) []byte {
		return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"t","type":%q,"data":{"broker":1}}`, id, evType)
	}
	// An id of a served cluster's event; the cluster of a subject nobody serves (the sweep).
	seq1 := e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, evType), Data: body(long)})
	seq2 := e.publishRaw(&nats.Msg{Subject: events.Subject(strings.Repeat("c", 3000), evType), Data: body("ev-far")})
	for _, tc := range []struct {
		seq  uint64
		want string
	}{
		{seq1, "id: \"" + strings.Repeat("i", 128) + "\"…: 4000 characters, over the limit of 128"},
		{seq2, "subject: 3044 bytes, over the limit of 256"},
	} {
		res := e.waitResult(fmt.Sprintf("invalid-seq-%d", tc.seq))
		if res.Status != events.StatusRejected || !strings.Contains(res.Error, tc.want) {
			t.Errorf("event %d: result %s %q, want rejected naming the limit (%q)", tc.seq, res.Status, res.Error, tc.want)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := testenv.StreamMsgs(t, e.js, events.EventsStream); n != 0 {
			return fmt.Errorf("%d events left in the stream", n)
		}
		return nil
	})
	if !wnc.IsConnected() {
		t.Fatalf("the worker's connection: %s (%v)", wnc.Status(), wnc.LastError())
	}
}
