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
	"github.com/kafkamender/kafkamender/internal/pause"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// startPausable runs a pipeline like start, with the pauses of the fleet (package pause:
// its store and its handler) and h for evType.
func (e *env) startPausable(nc *nats.Conn, cfg pipeline.Config, h handlerFunc) (stop func()) {
	e.t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	store := pause.New(js)
	ph := &pause.Handler{Store: store}
	cfg.Pauses, cfg.HoldScan = store, 300*time.Millisecond
	if cfg.Cancels == nil {
		cfg.Cancels = cancels{}
	}
	return e.startHandlers(nc, cfg, map[string]pipeline.Handler{evType: h, events.TypeClusterPause: ph, events.TypeClusterResume: ph})
}

// publishControl publishes a control event of type typ with data.
func (e *env) publishControl(id, typ, data string) {
	e.t.Helper()
	b, err := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "oncall", Type: typ,
		DataContentType: events.ContentTypeJSON, Data: json.RawMessage(data)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, typ), Data: b, Header: nats.Header{jetstream.MsgIDHeader: []string{id}}})
}

// publishDryRun publishes a dry run of evType with id.
func (e *env) publishDryRun(id string) {
	e.t.Helper()
	b, err := json.Marshal(events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: "test", Type: evType,
		DataContentType: events.ContentTypeJSON, Data: json.RawMessage(`{"topic":"orders","preferred_leader":2,"dry_run":true}`)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.publishRaw(&nats.Msg{Subject: events.Subject(cluster, evType), Data: b, Header: nats.Header{jetstream.MsgIDHeader: []string{id}}})
}

// recorder is a handler for evType that records the events it ran (not the dry runs, which
// it answers "planned").
type recorder struct {
	mu  sync.Mutex
	ran []string
}

func (r *recorder) handle(_ context.Context, job *pipeline.Job) (*events.Result, error) {
	if job.Event().DryRun() {
		return &events.Result{Status: events.StatusPlanned}, nil
	}
	r.mu.Lock()
	r.ran = append(r.ran, job.Event().ID)
	r.mu.Unlock()
	return &events.Result{Status: events.StatusSucceeded}, nil
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

// progressOf collects the "paused" of the progress reports of every event.
type progressOf struct {
	mu     sync.Mutex
	paused map[string]string
}

func (e *env) watchProgress() *progressOf {
	e.t.Helper()
	p := &progressOf{paused: map[string]string{}}
	sub, err := e.nc.Subscribe(events.ProgressSubjectPrefix+".>", func(m *nats.Msg) {
		var pr events.Progress
		if json.Unmarshal(m.Data, &pr) == nil && pr.Paused != "" {
			p.mu.Lock()
			p.paused[pr.ID] = pr.Paused
			p.mu.Unlock()
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return p
}

func (p *progressOf) get(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id]
}

// A paused cluster's events wait in publish order, through a restart of every worker, none
// run and none lost, each one's progress saying why it waits, while a dry run is answered;
// resume runs them in publish order. The pause and the resume are not queued behind them.
func TestPauseHoldsEventsInOrderAcrossRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	prog := e.watchProgress()
	var stops []func()
	for _, w := range []string{"w1", "w2"} {
		cfg := config(t)
		cfg.Worker = w
		stops = append(stops, e.startPausable(e.connect(), cfg, rec.handle))
	}
	e.publishControl("pause-1", events.TypeClusterPause, `{"reason":"incident INC-42: hands off"}`)
	if res := e.waitResult("pause-1"); res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "incident INC-42") {
		t.Fatalf("pause: %s %q %q", res.Status, res.Error, res.Note)
	}
	ids := []string{"held-1", "held-2", "held-3"}
	for _, id := range ids {
		e.publish(id)
	}
	e.publishDryRun("dry-1")
	if res := e.waitResult("dry-1"); res.Status != events.StatusPlanned {
		t.Fatalf("dry run while paused: %s %q", res.Status, res.Error)
	}
	for _, id := range ids {
		e.eventually("progress of "+id+" says why it waits", func() bool {
			return strings.Contains(prog.get(id), "incident INC-42") && strings.Contains(prog.get(id), "paused by oncall")
		})
	}
	// Every worker restarts, more often than the events' attempts (config: 3): the pause
	// holds, and the deliveries that were held are not attempts.
	for round := range 4 {
		delivered := e.consumer().Delivered.Consumer
		for _, stop := range stops {
			stop()
		}
		stops = nil
		for _, w := range []string{"w3", "w4"} {
			cfg := config(t)
			cfg.Worker = fmt.Sprintf("%s-%d", w, round)
			stops = append(stops, e.startPausable(e.connect(), cfg, rec.handle))
		}
		e.eventually("the head delivered again, and held", func() bool {
			ci := e.consumer()
			return ci.Delivered.Consumer > delivered && ci.NumAckPending == 1
		})
	}
	e.publishControl("pause-2", events.TypeClusterPause, `{"reason":"still paused after the restart"}`)
	if res := e.waitResult("pause-2"); res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "replaces the pause by oncall") {
		t.Fatalf("second pause: %s %q %q", res.Status, res.Error, res.Note)
	}
	e.eventually("progress says the new reason", func() bool {
		return strings.Contains(prog.get("held-1"), "still paused after the restart")
	})
	if ran := rec.get(); len(ran) > 0 {
		t.Fatalf("ran while paused: %v", ran)
	}
	for _, id := range ids {
		if n, res := e.stored(id); n != 0 {
			t.Fatalf("%s has a result while paused: %+v", id, res)
		}
	}
	if left := e.eventsLeft(); left != 3 {
		t.Fatalf("%d events in the stream while paused, want the 3 held", left)
	}

	e.publishControl("resume-1", events.TypeClusterResume, `{}`)
	if res := e.waitResult("resume-1"); res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "still paused after the restart") {
		t.Fatalf("resume: %s %q %q", res.Status, res.Error, res.Note)
	}
	for _, id := range ids {
		if res := e.waitResult(id); res.Status != events.StatusSucceeded || res.Attempt != 1 {
			t.Fatalf("%s: %s %q on attempt %d; want succeeded on attempt 1", id, res.Status, res.Error, res.Attempt)
		}
	}
	if ran := rec.get(); !slices.Equal(ran, ids) {
		t.Fatalf("ran %v, want %v in publish order", ran, ids)
	}
	e.publishControl("resume-2", events.TypeClusterResume, `{}`)
	if res := e.waitResult("resume-2"); res.Status != events.StatusNoop {
		t.Fatalf("resume of a cluster not paused: %s %q %q", res.Status, res.Error, res.Note)
	}
	e.waitSettled()
}

// A pause with an end resumes by itself; one whose end has passed, or is too far, is
// rejected and pauses nothing.
func TestPauseUntilEndsByItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	e.startPausable(e.connect(), config(t), rec.handle)

	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	e.publishControl("pause-past", events.TypeClusterPause, `{"reason":"r","until":"`+past+`"}`)
	if res := e.waitResult("pause-past"); res.Status != events.StatusRejected || !strings.Contains(res.Error, "not in the future") {
		t.Fatalf("pause until the past: %s %q", res.Status, res.Error)
	}
	far := time.Now().Add(events.MaxPause + time.Hour).UTC().Format(time.RFC3339)
	e.publishControl("pause-far", events.TypeClusterPause, `{"reason":"r","until":"`+far+`"}`)
	if res := e.waitResult("pause-far"); res.Status != events.StatusRejected || !strings.Contains(res.Error, "ahead") {
		t.Fatalf("pause too far: %s %q", res.Status, res.Error)
	}
	e.publish("before")
	e.waitResult("before") // not paused by the rejected pauses

	until := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	e.publishControl("pause-short", events.TypeClusterPause, `{"reason":"maintenance window","until":"`+until.UTC().Format(time.RFC3339)+`"}`)
	if res := e.waitResult("pause-short"); res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "until") {
		t.Fatalf("pause: %s %q %q", res.Status, res.Error, res.Note)
	}
	e.publish("during")
	res := e.waitResult("during")
	if res.Status != events.StatusSucceeded {
		t.Fatalf("during: %s %q", res.Status, res.Error)
	}
	if res.StartedAt.Before(until) {
		// StartedAt is when the delivery was received: a held one was received after
		// the pause ended, or held in hand; FinishedAt is when it ran.
		if res.FinishedAt.Before(until) {
			t.Fatalf("ran at %s, before the pause ended at %s", res.FinishedAt, until)
		}
	}
	if ran := rec.get(); !slices.Equal(ran, []string{"before", "during"}) {
		t.Fatalf("ran %v", ran)
	}
}

// cancels is a Cancels of the ids in a map; cancels{} cancels nothing.
type cancels struct {
	mu  *sync.Mutex
	ids map[string]bool
}

func (c cancels) Cancelled(_ context.Context, _, id string) (string, error) {
	if c.mu == nil {
		return "", nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids[id] {
		return "by oncall", nil
	}
	return "", nil
}

// A held event that is cancelled goes to its handler at once, while the cluster stays
// paused (the engine answers it cancelled without running it); the events behind it wait.
func TestHeldEventCancelledGoesToItsHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	prog := e.watchProgress()
	c := cancels{mu: &sync.Mutex{}, ids: map[string]bool{}}
	cfg := config(t)
	cfg.Cancels = c
	e.startPausable(e.connect(), cfg, rec.handle)
	e.publishControl("pause-1", events.TypeClusterPause, `{"reason":"window"}`)
	e.waitResult("pause-1")
	e.publish("held-x")
	e.publish("held-y")
	e.eventually("held-x held", func() bool { return prog.get("held-x") != "" })
	c.mu.Lock()
	c.ids["held-x"] = true
	c.mu.Unlock()
	e.waitResult("held-x")
	if ran := rec.get(); !slices.Equal(ran, []string{"held-x"}) {
		t.Fatalf("handled %v, want the cancelled held-x only", ran)
	}
	e.eventually("held-y held in turn", func() bool { return prog.get("held-y") != "" })
	if n, _ := e.stored("held-y"); n != 0 {
		t.Fatal("held-y ran while paused")
	}
}
