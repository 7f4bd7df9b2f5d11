package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

func TestClusterFilters(t *testing.T) {
	for _, tc := range []struct {
		filters []string
		want    []string
	}{
		{[]string{"kafkamender.events.>"}, []string{"kafkamender.events.c.>"}},
		{[]string{"kafkamender.events.c.>"}, []string{"kafkamender.events.c.>"}},
		{[]string{"kafkamender.events.d.>"}, nil},
		{[]string{"kafkamender.events.*.broker-overloaded"}, []string{"kafkamender.events.c.broker-overloaded"}},
		{[]string{"kafkamender.events.c.broker-overloaded", "kafkamender.events.*.broker-overloaded"}, []string{"kafkamender.events.c.broker-overloaded"}},
		{[]string{"kafkamender.events.*"}, nil}, // three tokens: no event subject
		{[]string{"kafkamender.events.d.>", "kafkamender.events.>"}, []string{"kafkamender.events.c.>"}},
		{[]string{"kafkamender.other.>"}, nil},
	} {
		if got := pipeline.ClusterFilters(tc.filters, "c"); !slices.Equal(got, tc.want) {
			t.Errorf("ClusterFilters(%v, c) = %v, want %v", tc.filters, got, tc.want)
		}
	}
}

// span is when a handler ran an event.
type span struct {
	id         string
	start, end time.Time
}

// spans records handler runs.
type spans struct {
	mu   sync.Mutex
	list []span
}

func (s *spans) add(id string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, span{id, start, time.Now()})
}

func (s *spans) get() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// Events of one cluster run one at a time, fleet-wide, in the order the stream stored
// them, while another cluster's go on in parallel.
func TestClusterEventsRunInStreamOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const other = "other"
	var ran spans
	blockOther := make(chan struct{})
	h := func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		start := time.Now()
		if job.Event().Cluster == other {
			<-blockOther
		} else {
			time.Sleep(5 * time.Millisecond)
		}
		ran.add(job.Event().ID, start)
		return &events.Result{Status: events.StatusSucceeded}, nil
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		cfg := config(t)
		cfg.Worker, cfg.Clusters = w, []string{cluster, other}
		e.start(e.connect(), cfg, h)
	}
	// The other cluster's event blocks its handler: the first cluster goes on regardless.
	e.publishRaw(&nats.Msg{Subject: events.Subject(other, evType), Data: body("ev-other")})
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("ev-%02d", i))
		e.publish(ids[i])
	}
	var workers = map[string]bool{}
	for _, id := range ids {
		workers[e.waitResult(id).Worker] = true
	}
	close(blockOther)
	e.waitResult("ev-other")
	got := ran.get()
	var order []string
	for i, s := range got {
		if s.id == "ev-other" {
			continue
		}
		order = append(order, s.id)
		if i > 0 && got[i-1].id != "ev-other" && s.start.Before(got[i-1].end) {
			t.Errorf("%s started at %s, before %s ended at %s", s.id, s.start.Format(time.StampMicro), got[i-1].id, got[i-1].end.Format(time.StampMicro))
		}
	}
	if !slices.Equal(order, ids) {
		t.Errorf("handled in order %v, want %v", order, ids)
	}
	if len(workers) < 2 {
		t.Logf("all events went to %v (the fleet shares them, but need not)", workers)
	}
}

// A worker that dies in the middle of an event does not let a later event of the same
// cluster through: the event it held is delivered again (after the ack wait) before any
// later one.
func TestDeadWorkerKeepsClusterOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ran spans
	entered := make(chan struct{}, 1)
	crash := e.connect()
	e.start(crash, config(t), func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		entered <- struct{}{}
		<-ctx.Done() // hangs until its connection is gone; never stores a result
		return nil, ctx.Err()
	})
	e.publish("ev-first")
	<-entered
	e.publish("ev-second")
	crash.Close() // the worker dies holding ev-first

	cfg := config(t)
	cfg.Worker = "w2"
	e.start(e.connect(), cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		start := time.Now()
		ran.add(job.Event().ID, start)
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	first, second := e.waitResult("ev-first"), e.waitResult("ev-second")
	if first.Attempt != 2 || second.Attempt != 1 {
		t.Errorf("attempts %d, %d; want 2 (redelivered), 1", first.Attempt, second.Attempt)
	}
	if got := ran.get(); len(got) != 2 || got[0].id != "ev-first" || !second.StartedAt.After(first.FinishedAt) {
		t.Errorf("runs %+v; first finished %s, second started %s: want ev-first, then ev-second after its result",
			got, first.FinishedAt, second.StartedAt)
	}
}

// An event no consumer takes (its cluster is unknown to every fleet) is rejected after the
// grace period, with the reason, and removed from the work-queue stream.
func TestStrayEventRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	cfg.StrayGrace = 500 * time.Millisecond
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		t.Errorf("handler ran for %s", job.Event().ID)
		return nil, nil
	})
	raw, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "ev-stray", "source": "test", "type": evType,
		"datacontenttype": "application/json", "data": map[string]any{"topic": "orders", "preferred_leader": 2}})
	e.publishRaw(&nats.Msg{Subject: events.Subject("nosuchcluster", evType), Data: raw})
	e.publishRaw(&nats.Msg{Subject: "kafkamender.events.malformed", Data: raw,
		Header: nats.Header{jetstream.MsgIDHeader: []string{"ev-malformed"}}})
	// A type no version knows, on a served cluster's subject: the cluster's consumers take
	// only the known types (its control events have a consumer of their own).
	unknown, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "ev-unknown", "source": "test", "type": "broker-explodes",
		"datacontenttype": "application/json", "data": map[string]any{}})
	e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, "broker-explodes"), Data: unknown,
		Header: nats.Header{jetstream.MsgIDHeader: []string{"ev-unknown"}}})
	res := e.waitResult("ev-stray")
	if res.Status != events.StatusRejected || res.Cluster != "nosuchcluster" || res.Error == "" {
		t.Errorf("result %+v; want rejected, naming the cluster", res)
	}
	t.Logf("stray: %s", res.Error)
	if res := e.waitResult("ev-malformed"); res.Status != events.StatusRejected {
		t.Errorf("malformed subject: result %+v; want rejected", res)
	} else {
		t.Logf("malformed: %s", res.Error)
	}
	if res := e.waitResult("ev-unknown"); res.Status != events.StatusRejected || !strings.Contains(res.Error, `unknown event type "broker-explodes"`) {
		t.Errorf("unknown type: result %+v; want rejected, naming the type", res)
	}
	e.eventually("strays removed from the stream", func() bool { return e.eventsLeft() == 0 })
}

// absorbing is a handler whose result answers every later event of the cluster.
type absorbing struct{ ran calls }

func (a *absorbing) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	a.ran.inc()
	return &events.Result{Status: events.StatusSucceeded}, nil
}

func (a *absorbing) Absorber(ctx context.Context, done *events.Event, res *events.Result) (func(*events.Event, time.Time) *events.Result, error) {
	return func(next *events.Event, now time.Time) *events.Result {
		return &events.Result{Status: events.StatusNoop, PreviousEvent: done.ID}
	}, nil
}

// A worker killed while answering a storm in bulk leaves results stored for some events
// whose messages are still in the stream, and the acting event unacknowledged. The next
// worker replays what is stored and answers the rest: every event has exactly one result,
// the stored ones unchanged, and nothing is left in the stream.
func TestKilledMidAbsorbLeavesOneResultEach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	e.setup(cfg)
	var ids []string
	for i := range 60 {
		ids = append(ids, fmt.Sprintf("ev-storm-%02d", i))
		e.publish(ids[i])
	}
	// What the killed worker stored: the acting event's result and the first 20 answers.
	results, err := pipeline.NewResults(t.Context(), e.nc)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for i, id := range ids[:21] {
		res := &events.Result{ID: id, Type: evType, Cluster: cluster, Status: events.StatusNoop, PreviousEvent: ids[0], Worker: "killed", Attempt: 1}
		if i == 0 {
			res.Status, res.PreviousEvent = events.StatusSucceeded, ""
		}
		if _, _, err := results.Publish(t.Context(), res); err != nil {
			t.Fatal(err)
		}
		before[id] = string(res.Status)
	}

	h := &absorbing{}
	p, err := pipeline.New(e.connect(), map[string]pipeline.Handler{evType: h}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	for _, id := range ids {
		res := e.waitResult(id) // exactly one stored
		if status, ok := before[id]; ok && (res.Worker != "killed" || string(res.Status) != status) {
			t.Errorf("%s: the stored result changed: %+v", id, res)
		}
	}
	if n := h.ran.get(); n != 1 {
		t.Errorf("handler ran %d times; want once (the first event without a result), the rest answered by it", n)
	}
	e.waitSettled()
}
