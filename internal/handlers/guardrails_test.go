package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/operation/operationtest"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// These tests need no Kafka: they run an in-process nats-server (testenv.InProcessNATS),
// also under -short. The integration tests with a real cluster are in
// guardrails_stack_test.go.

func natsJS(t *testing.T) jetstream.JetStream { return testenv.InProcessJetStream(t) }

// clock is a fake clock the test moves.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

var base = time.Date(2026, 11, 29, 9, 42, 0, 0, time.UTC)

func alive() error { return nil }

// record reads the cluster's record as stored, as "event@minutes after base" items, and
// its revision (0: none).
func record(t *testing.T, js jetstream.JetStream, cluster string) ([]string, uint64) {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), events.GuardrailsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), cluster)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var ops []guardrails.Op
	if err := json.Unmarshal(e.Value(), &ops); err != nil {
		t.Fatalf("the record is not a JSON list of {event, at}: %v: %s", err, e.Value())
	}
	var out []string
	for _, o := range ops {
		out = append(out, fmt.Sprintf("%s@%g", o.Event, o.At.Sub(base).Minutes()))
	}
	return out, e.Revision()
}

// The hourly record of one cluster, step by step with a fake clock: operations count until
// the cap, the next is refused with when a place frees, entries older than an hour are
// pruned on the next write, an event counted already is neither counted nor refused again
// (and not even written), and clusters are counted apart.
func TestOpLogHourlyWindow(t *testing.T) {
	js := natsJS(t)
	c := &clock{now: base}
	o := newOpLog(js, 3, c.Now)
	steps := []struct {
		at      int // minutes after base
		cluster string
		event   string
		err     string // a substring of the refusal; "" none
		record  []string
		written bool // the step writes the record (its revision moves)
	}{
		{at: 0, cluster: "local", event: "a", record: []string{"a@0"}, written: true},
		{at: 10, cluster: "local", event: "b", record: []string{"a@0", "b@10"}, written: true},
		{at: 15, cluster: "local", event: "a", record: []string{"a@0", "b@10"}}, // resumed: counted once
		{at: 20, cluster: "local", event: "c", record: []string{"a@0", "b@10", "c@20"}, written: true},
		{at: 30, cluster: "local", event: "d", record: []string{"a@0", "b@10", "c@20"},
			err: "guardrails.max_operations_per_hour: cluster local ran 3 operations in the last hour (the cap is 3); the oldest counts until 10:42:00Z"},
		{at: 30, cluster: "kraft", event: "d", record: []string{"d@30"}, written: true}, // another cluster
		{at: 30, cluster: "local", event: "c", record: []string{"a@0", "b@10", "c@20"}}, // resumed at the cap: not refused
		{at: 59, cluster: "local", event: "e", record: []string{"a@0", "b@10", "c@20"}, err: "the oldest counts until 10:42:00Z"},
		{at: 60, cluster: "local", event: "e", record: []string{"b@10", "c@20", "e@60"}, written: true}, // a pruned
		{at: 200, cluster: "local", event: "f", record: []string{"f@200"}, written: true},               // all pruned
	}
	for i, s := range steps {
		c.now = base.Add(time.Duration(s.at) * time.Minute)
		_, before := record(t, js, s.cluster)
		err := o.count(t.Context(), alive, s.cluster, s.event)
		switch {
		case s.err == "" && err != nil:
			t.Fatalf("step %d (%s at %d): %v", i, s.event, s.at, err)
		case s.err != "":
			v, ok := errors.AsType[*guardrails.Violation](err)
			if !ok || v.Rule != guardrails.RuleMaxOperations || !strings.Contains(err.Error(), s.err) || !operation.IsRejection(err) {
				t.Fatalf("step %d (%s at %d): err = %v, want a rejection containing %q", i, s.event, s.at, err, s.err)
			}
		}
		got, rev := record(t, js, s.cluster)
		if !slices.Equal(got, s.record) {
			t.Errorf("step %d (%s at %d): record %v, want %v", i, s.event, s.at, got, s.record)
		}
		if (rev != before) != s.written {
			t.Errorf("step %d (%s at %d): revision %d → %d, want written %v", i, s.event, s.at, before, rev, s.written)
		}
	}
}

// The bucket is the workers' own: created on first use, keys expiring an hour after their
// last write (when all they list is older than the window).
func TestOpLogBucket(t *testing.T) {
	js := natsJS(t)
	o := newOpLog(js, 1, time.Now)
	if err := o.count(t.Context(), alive, "local", "a"); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), events.GuardrailsBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != time.Hour || st.History() != 1 {
		t.Errorf("bucket TTL %s, history %d; want 1h, 1", st.TTL(), st.History())
	}
}

// Without a cap nothing is recorded: no bucket, no NATS traffic to fail on.
func TestOpLogWithoutCapRecordsNothing(t *testing.T) {
	js := natsJS(t)
	o := newOpLog(js, 0, time.Now)
	for _, ev := range []string{"a", "b", "c"} {
		if err := o.count(t.Context(), alive, "local", ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.KeyValue(t.Context(), events.GuardrailsBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("bucket lookup: %v, want no bucket", err)
	}
}

// racingKV runs race before each Create and Update: another writer of the same record,
// between our read and our write.
type racingKV struct {
	jetstream.KeyValue
	race func()
}

func (k *racingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	k.race()
	return k.KeyValue.Create(ctx, key, value, opts...)
}

func (k *racingKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	k.race()
	return k.KeyValue.Update(ctx, key, value, rev)
}

// Writes are revision-checked: a record written by someone else between our read and our
// write is read again and decided again, never overwritten.
func TestOpLogRevisionConflicts(t *testing.T) {
	put := func(t *testing.T, kv jetstream.KeyValue, ops ...string) {
		t.Helper()
		var list []guardrails.Op
		for i, ev := range ops {
			list = append(list, guardrails.Op{Event: ev, At: base.Add(time.Duration(i) * time.Minute)})
		}
		data, _ := json.Marshal(list)
		if _, err := kv.Put(t.Context(), "local", data); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		before  []string // the record before; nil: none
		racer   []string // what the other writer stores, once, at our first write
		limit   int
		err     string
		record  []string
		timesUp bool // the racer writes before every write of ours
	}{
		{name: "the key is created meanwhile: ours joins it", racer: []string{"x"}, limit: 3, record: []string{"x@0", "e@10"}},
		{name: "the key is updated meanwhile: ours joins it", before: []string{"a"}, racer: []string{"a", "x"}, limit: 3, record: []string{"a@0", "x@1", "e@10"}},
		{name: "the other write fills the cap: refused", before: []string{"a"}, racer: []string{"a", "x"}, limit: 2, record: []string{"a@0", "x@1"},
			err: "cluster local ran 2 operations in the last hour (the cap is 2)"},
		{name: "the other write counted this event: not again", racer: []string{"e"}, limit: 1, record: []string{"e@0"}},
		{name: "a record that keeps changing: a transient failure", racer: []string{"x"}, limit: 5, timesUp: true, err: "the record changed under each of 5 writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := natsJS(t)
			o := newOpLog(js, tc.limit, func() time.Time { return base.Add(10 * time.Minute) })
			real, err := o.bucket.KeyValue(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				put(t, real, tc.before...)
			}
			raced := 0
			o.bucket = kvbucket.Bound(&racingKV{KeyValue: real, race: func() {
				if raced == 0 || tc.timesUp {
					put(t, real, tc.racer...)
				}
				raced++
			}})
			err = o.count(t.Context(), alive, "local", "e")
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want %q", err, tc.err)
			case tc.timesUp && !retry.IsTransient(err):
				t.Errorf("err = %v, want a transient failure (the event is tried again)", err)
			}
			if tc.timesUp {
				if raced != conflictRetries {
					t.Errorf("%d writes tried, want %d", raced, conflictRetries)
				}
				return
			}
			if got, _ := record(t, js, "local"); !slices.Equal(got, tc.record) {
				t.Errorf("record %v, want %v", got, tc.record)
			}
		})
	}
}

// A worker that no longer holds the cluster's lock writes nothing.
func TestOpLogWritesOnlyUnderTheLock(t *testing.T) {
	js := natsJS(t)
	o := newOpLog(js, 2, time.Now)
	lost := errors.New("lock lost")
	err := o.count(t.Context(), func() error { return lost }, "local", "a")
	if !errors.Is(err, lost) {
		t.Fatalf("err = %v, want the lease's error", err)
	}
	if got, rev := record(t, js, "local"); rev != 0 {
		t.Errorf("record %v written without the lock", got)
	}
}

// A record that does not decode is not taken for an empty one (the cap would be lost).
func TestOpLogUndecodableRecord(t *testing.T) {
	js := natsJS(t)
	o := newOpLog(js, 2, time.Now)
	kv, err := o.bucket.KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "local", []byte("{not a list")); err != nil {
		t.Fatal(err)
	}
	err = o.count(t.Context(), alive, "local", "a")
	if err == nil || !retry.IsTransient(err) || operation.IsRejection(err) {
		t.Errorf("err = %v, want a transient failure", err)
	}
}

// The cap is the fleet's: two workers (two connections, two opLogs) share one record.
func TestOpLogFleetWide(t *testing.T) {
	srv, _ := testenv.InProcessNATS(t)
	worker := func() *opLog {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return newOpLog(js, 2, time.Now)
	}
	w1, w2 := worker(), worker()
	for i, step := range []struct {
		w       *opLog
		event   string
		refused bool
	}{{w1, "a", false}, {w2, "b", false}, {w1, "c", true}, {w2, "c", true}, {w2, "a", false}} {
		err := step.w.count(t.Context(), alive, "local", step.event)
		if refused := operation.IsRejection(err); refused != step.refused || err != nil && !refused {
			t.Errorf("step %d (%s): err = %v, want refused %v", i, step.event, err, step.refused)
		}
	}
}

// guarded is a Handlers with guardrails on an in-process nats-server and one cluster,
// "local", without a Kafka client: enough for everything before the cluster is read.
func guarded(t *testing.T, g guardrails.Limits) (*Handlers, jetstream.JetStream) {
	t.Helper()
	js := natsJS(t)
	h, err := New(Config{Clusters: map[string]*Cluster{"local": {Name: "local"}}, JS: js, Guardrails: g})
	if err != nil {
		t.Fatal(err)
	}
	return h, js
}

var testGuardrails = guardrails.Limits{
	ProtectedTopics:       []string{"^protected-", "^__consumer_offsets$"},
	MaxPartitionsPerEvent: 2,
	MaxOperationsPerHour:  1,
	AllowedSources: map[string][]string{
		events.TypeBrokerOverloaded:       {"alertmanager"},
		events.TypeReplicaChangeRequested: {"ops-pipeline", "kafkamender-emitter"},
	},
}

var eventSeq atomic.Int64

// decoded is an event of cluster local, decoded as the pipeline decodes it.
func decoded(t *testing.T, typ, source string, data map[string]any) *events.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	env := events.Envelope{SpecVersion: events.SpecVersion, ID: fmt.Sprintf("ev-%d", eventSeq.Add(1)), Source: source, Type: typ,
		Time: time.Now().UTC(), DataContentType: events.ContentTypeJSON, Data: raw}
	body, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Decode(events.Subject("local", typ), nats.Header{}, body, events.DecodeOptions{Clusters: []string{"local"}})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Events outside a guardrail that needs no plan are rejected by the engine before anything
// else (the cool-down, the lock, Kafka: these handlers have no Kafka client and no lock),
// with the rule; dry runs too.
func TestHandleRejectsOutsideTheGuardrails(t *testing.T) {
	h, js := guarded(t, testGuardrails)
	store, _ := journal.NewMemory()
	results := operationtest.NewResults()
	eng, err := h.Engine(operation.Config{Journal: store, Results: results})
	if err != nil {
		t.Fatal(err)
	}
	// Broker 3 was shed within the cool-down: an allowed source would get a noop.
	kv, err := h.cool.bucket.KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(shedRecord{Event: "earlier", At: time.Now().UTC(), Worker: "w"})
	if _, err := kv.Put(t.Context(), coolKey("local", 3), rec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, typ, source string
		data              map[string]any
		err               string
	}{
		{"source not allowed", events.TypeBrokerOverloaded, "x", map[string]any{"broker": 1},
			`guardrails.allowed_sources: source "x" may not send broker-overloaded events (allowed: alertmanager)`},
		{"source not allowed, within the cool-down", events.TypeBrokerOverloaded, "x", map[string]any{"broker": 3},
			`guardrails.allowed_sources: source "x" may not send broker-overloaded events (allowed: alertmanager)`},
		{"source not allowed, dry run", events.TypeReplicaChangeRequested, "alertmanager", map[string]any{"topic": "orders", "preferred_leader": 1, "dry_run": true},
			`guardrails.allowed_sources: source "alertmanager" may not send replica-change-requested events (allowed: ops-pipeline, kafkamender-emitter)`},
		{"preferred leader of a protected topic", events.TypeReplicaChangeRequested, "ops-pipeline", map[string]any{"topic": "protected-a", "preferred_leader": 1},
			`guardrails.protected_topics: topic "protected-a" matches "^protected-"`},
		{"replication factor of a protected topic, dry run", events.TypeReplicaChangeRequested, "ops-pipeline",
			map[string]any{"topic": "__consumer_offsets", "replication_factor": 3, "dry_run": true},
			`guardrails.protected_topics: topic "__consumer_offsets" matches "^__consumer_offsets$"`},
		{"log-dir move of a protected topic, any source", events.TypeLogDirMoveRequested, "anyone",
			map[string]any{"broker": 1, "topic": "protected-b", "partition": 0, "to_dir": "/data2"},
			`guardrails.protected_topics: topic "protected-b" matches "^protected-"`},
		{"broker-overloaded naming a protected topic", events.TypeBrokerOverloaded, "alertmanager",
			map[string]any{"broker": 1, "topics": []string{"orders", "protected-a", "protected-c"}},
			`guardrails.protected_topics: topic "protected-a" matches "^protected-"; topic "protected-c" matches "^protected-"`},
		{"the source comes first", events.TypeBrokerOverloaded, "x", map[string]any{"broker": 1, "topics": []string{"protected-a"}},
			`guardrails.allowed_sources: source "x" may not send broker-overloaded events (allowed: alertmanager)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := decoded(t, tc.typ, tc.source, tc.data)
			res, err := eng.Handle(t.Context(), pipeline.NewTestJob(ev, results))
			if err != nil {
				t.Fatalf("Handle: %v (a rejection is a result, never retried)", err)
			}
			if res.Status != events.StatusRejected || res.Error != tc.err {
				t.Errorf("result %s %q\nwant rejected %q", res.Status, res.Error, tc.err)
			}
			if len(res.Changes)+len(res.Skipped)+len(res.Noop) > 0 || res.PreviousEvent != "" {
				t.Errorf("a rejected result lists partitions or a previous event: %+v", res)
			}
		})
	}
	if _, err := js.KeyValue(t.Context(), events.GuardrailsBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("a rejected event touched the hourly record: %v", err)
	}
}

// Alerts absorbed by an earlier shed's result (the alert storm) must pass the guardrails
// too: one refused is left to run, and gets its rejection.
func TestAbsorberLeavesRefusedEventsToRun(t *testing.T) {
	h, _ := guarded(t, testGuardrails)
	done := decoded(t, events.TypeBrokerOverloaded, "alertmanager", map[string]any{"broker": 3})
	kv, err := h.cool.bucket.KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(shedRecord{Event: done.ID, At: time.Now().UTC(), Worker: "w"})
	if _, err := kv.Put(t.Context(), coolKey("local", 3), rec); err != nil {
		t.Fatal(err)
	}
	answer, err := h.Absorber(t.Context(), done, &events.Result{Status: events.StatusSucceeded})
	if err != nil || answer == nil {
		t.Fatalf("Absorber: no answer (%v)", err)
	}
	for _, tc := range []struct {
		name     string
		ev       *events.Event
		absorbed bool
	}{
		{"allowed", decoded(t, events.TypeBrokerOverloaded, "alertmanager", map[string]any{"broker": 3}), true},
		{"source not allowed", decoded(t, events.TypeBrokerOverloaded, "x", map[string]any{"broker": 3}), false},
		{"names a protected topic", decoded(t, events.TypeBrokerOverloaded, "alertmanager", map[string]any{"broker": 3, "topics": []string{"protected-a"}}), false},
	} {
		if got := answer(tc.ev, time.Now()) != nil; got != tc.absorbed {
			t.Errorf("%s: absorbed %v, want %v", tc.name, got, tc.absorbed)
		}
	}
}

// The handlers keep their own copy of the guardrails, and refuse bad ones.
func TestNewGuardrails(t *testing.T) {
	js := natsJS(t)
	g := guardrails.Limits{ProtectedTopics: []string{"^p-"}, AllowedSources: map[string][]string{events.TypeBrokerOverloaded: {"alertmanager"}}}
	h, err := New(Config{JS: js, Guardrails: g})
	if err != nil {
		t.Fatal(err)
	}
	g.ProtectedTopics[0] = "^q-"
	g.AllowedSources[events.TypeBrokerOverloaded][0] = "x"
	if _, ok := h.guard.Protected("p-1"); !ok || h.guard.Source(events.TypeBrokerOverloaded, "x") == nil {
		t.Error("changing the caller's options changed the handlers' guardrails")
	}
	if h.cfg.Guardrails.ProtectedTopics[0] != "^p-" || h.cfg.Guardrails.AllowedSources[events.TypeBrokerOverloaded][0] != "alertmanager" {
		t.Error("the handlers' configuration shares the caller's lists")
	}
	_, err = New(Config{JS: js, Guardrails: guardrails.Limits{ProtectedTopics: []string{"a("}}})
	if err == nil || !strings.Contains(err.Error(), `guardrails.protected_topics[0]: "a(": error parsing regexp`) {
		t.Errorf("New with a bad pattern: %v", err)
	}
}

// The note of a log-dir balance says when protected replicas stay, and does not blame the
// replicas' sizes when protection is why nothing moves.
func TestLogDirSummaryWithProtectedReplicas(t *testing.T) {
	one := int32(1)
	move := plan.Change{TopicPartition: model.TopicPartition{Topic: "orders", Partition: 1}, Broker: &one, DirBefore: "/a", DirAfter: "/b", Bytes: 50}
	skip := plan.Skip{TopicPartition: model.TopicPartition{Topic: "protected-a", Partition: 0}, Code: plan.SkipProtected, Reason: "x"}
	for _, tc := range []struct {
		name string
		lp   plan.LogDirPlan
		want string
	}{
		{"nothing else to move", plan.LogDirPlan{Plan: plan.Plan{Skipped: []plan.Skip{skip}}, From: "/a", To: "/b", FromBytes: 200, ToBytes: 0, Allowed: 20},
			"Broker 1: /a holds 200 B and /b holds 0 B, more apart than the tolerance allows (20 B); the 1 replicas that would balance them are of protected topics (guardrails.protected_topics), and no other replica there brings them closer."},
		{"others moved instead", plan.LogDirPlan{Plan: plan.Plan{Changes: []plan.Change{move}, Skipped: []plan.Skip{skip}}, From: "/a", To: "/b",
			FromBytes: 200, ToBytes: 100, FromBytesAfter: 150, ToBytesAfter: 150, Allowed: 30, Reached: true},
			"Broker 1: /a holds 200 B and /b holds 100 B; moving 1 replicas (50 B) leaves 150 B and 150 B, within the tolerance (30 B). 1 replicas of protected topics (guardrails.protected_topics) that the balance would have moved stay."},
		{"no protection", plan.LogDirPlan{From: "/a", To: "/b", FromBytes: 200, ToBytes: 0, Allowed: 20},
			"Broker 1: /a holds 200 B and /b holds 0 B, more apart than the tolerance allows (20 B), but every replica there is larger than the imbalance: moving any would make it worse."},
	} {
		if got := summarize(1, tc.lp, false); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// The cool-down holds back what the shed that started it answers: after a whole-broker
// shed, any request for the broker (a demotion only after a demotion); after a narrower
// one, the same request only. A shed of one topic does not silence the next alert for the
// whole broker.
func TestCoolDownHoldsBackWhatTheShedCovers(t *testing.T) {
	h, _ := guarded(t, guardrails.Limits{})
	kv, err := h.cool.bucket.KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	whole := map[string]any{"broker": 3}
	demote := map[string]any{"broker": 3, "demote_to_end": true}
	orders := map[string]any{"broker": 3, "topics": []string{"orders", "payments"}}
	ordersAgain := map[string]any{"broker": 3, "topics": []string{"payments", "orders", "orders"}}
	other := map[string]any{"broker": 3, "topics": []string{"orders"}}
	capped := map[string]any{"broker": 3, "max_partitions": 10}
	for _, tc := range []struct {
		name     string
		shed     map[string]any
		next     map[string]any
		heldBack bool
	}{
		{"whole broker, then whole broker", whole, whole, true},
		{"whole broker, then some topics", whole, orders, true},
		{"whole broker, then capped", whole, capped, true},
		{"whole broker, then a demotion", whole, demote, false},
		{"a demotion, then whole broker", demote, whole, true},
		{"some topics, then whole broker", orders, whole, false},
		{"capped, then whole broker", capped, whole, false},
		{"some topics, then the same topics", orders, ordersAgain, true},
		{"some topics, then other topics", orders, other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := decoded(t, events.TypeBrokerOverloaded, "alertmanager", tc.shed)
			rec, _ := json.Marshal(shedRecord{Event: done.ID, At: time.Now().UTC(), Worker: "w", Scope: scopeOf(done.Payload.(*events.BrokerOverloaded))})
			if _, err := kv.Put(t.Context(), coolKey("local", 3), rec); err != nil {
				t.Fatal(err)
			}
			next := decoded(t, events.TypeBrokerOverloaded, "alertmanager", tc.next)
			res, err := h.Answer(t.Context(), pipeline.NewTestJob(next, nil))
			if err != nil {
				t.Fatal(err)
			}
			if noop := res != nil; noop != tc.heldBack || (noop && (res.Status != events.StatusNoop || res.PreviousEvent != done.ID)) {
				t.Errorf("Answer: %+v, want held back %v", res, tc.heldBack)
			}
			answer, err := h.Absorber(t.Context(), done, &events.Result{Status: events.StatusSucceeded})
			if err != nil || answer == nil {
				t.Fatalf("Absorber: no answer (%v)", err)
			}
			if got := answer(next, time.Now()) != nil; got != tc.heldBack {
				t.Errorf("Absorber: absorbed %v, want %v", got, tc.heldBack)
			}
		})
	}
	// A record of an earlier version, without a scope, is a whole-broker shed.
	var old shedRecord
	if err := json.Unmarshal([]byte(`{"event":"e","at":"2026-12-01T00:00:00Z","worker":"w"}`), &old); err != nil || !old.Scope.whole() || old.Scope.DemoteToEnd {
		t.Errorf("an old record reads as %+v (%v)", old, err)
	}
}
