package cancel_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/cancel"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// rig is a JetStream server with the results stream, the requests' store and a handler.
type rig struct {
	t       *testing.T
	results pipeline.Results
	store   *cancel.Store
	h       *cancel.Handler
}

func newRig(t *testing.T) *rig {
	srv := testenv.StartNATSServer(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true}, nil)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The results stream, as the pipeline sets it up.
	p, err := pipeline.New(nc, nil, pipeline.Config{Worker: "w", Clusters: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, results: pipeline.ResultsOn(js), store: cancel.New(js)}
	r.h = &cancel.Handler{Store: r.store, Results: r.results, Wait: 300 * time.Millisecond}
	return r
}

// cancel handles an operation-cancel of target, with id and source.
func (r *rig) cancel(id, source, target string) *events.Result {
	r.t.Helper()
	data, _ := json.Marshal(map[string]string{"id": target, "reason": "INC-42"})
	ev := &events.Event{Envelope: events.Envelope{SpecVersion: "1.0", ID: id, Source: source, Type: events.TypeOperationCancel, Data: data},
		Cluster: "c1", Payload: &events.OperationCancel{ID: target, Reason: "INC-42"}}
	res, err := r.h.Handle(r.t.Context(), pipeline.NewTestJob(ev, r.results))
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *rig) publish(id string, status events.Status) {
	r.t.Helper()
	if _, _, err := r.results.Publish(r.t.Context(), &events.Result{ID: id, Type: events.TypeReplicaChangeRequested, Cluster: "c1", Status: status}); err != nil {
		r.t.Fatal(err)
	}
}

func TestCancelRequests(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()

	// Not begun, no result within the wait: recorded, said so; the engine reads it.
	res := r.cancel("c-1", "oncall/alice", "ev-1")
	if res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "cancel of event ev-1 recorded") {
		t.Fatalf("first cancel: %s %q", res.Status, res.Note)
	}
	why, err := r.store.Cancelled(ctx, "c1", "ev-1")
	if err != nil || !strings.Contains(why, "by oncall/alice") || !strings.Contains(why, "(event c-1): INC-42") {
		t.Fatalf("Cancelled: %q %v", why, err)
	}
	if why, _ := r.store.Cancelled(ctx, "c2", "ev-1"); why != "" {
		t.Errorf("another cluster's event of the same id is cancelled: %q", why)
	}
	// A second cancel keeps the first request, and says so; the event's cancelled result
	// arrives meanwhile.
	go func() {
		time.Sleep(100 * time.Millisecond)
		r.publish("ev-1", events.StatusCancelled)
	}()
	res = r.cancel("c-2", "oncall/bob", "ev-1")
	if res.Status != events.StatusSucceeded || !strings.Contains(res.Note, "was cancelled already by oncall/alice") ||
		!strings.Contains(res.Note, "event ev-1 cancelled") {
		t.Errorf("second cancel: %s %q", res.Status, res.Note)
	}
	if why, _ := r.store.Cancelled(ctx, "c1", "ev-1"); !strings.Contains(why, "oncall/alice") {
		t.Errorf("the first request was replaced: %q", why)
	}
	// Ended already: a noop naming its status.
	r.publish("ev-2", events.StatusSucceeded)
	if res := r.cancel("c-3", "oncall/alice", "ev-2"); res.Status != events.StatusNoop || !strings.Contains(res.Note, "ended already (succeeded)") {
		t.Errorf("cancel of an ended event: %s %q", res.Status, res.Note)
	}
	// Ended before the cancel took effect.
	go func() {
		time.Sleep(100 * time.Millisecond)
		r.publish("ev-3", events.StatusSucceeded)
	}()
	if res := r.cancel("c-4", "oncall/alice", "ev-3"); res.Status != events.StatusNoop || !strings.Contains(res.Note, "ended before the cancel took effect (succeeded)") {
		t.Errorf("cancel overtaken: %s %q", res.Status, res.Note)
	}
	// Itself.
	if res := r.cancel("c-5", "oncall/alice", "c-5"); res.Status != events.StatusRejected || !strings.Contains(res.Error, "own id") {
		t.Errorf("cancel of itself: %s %q", res.Status, res.Error)
	}
}
