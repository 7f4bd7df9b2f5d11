package operation_test

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

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
)

// memPlans is the plans bucket in memory, revision-checked as the real one.
type memPlans struct {
	mu    sync.Mutex
	plans map[string][]byte
	revs  map[string]uint64
}

func newMemPlans() *memPlans { return &memPlans{plans: map[string][]byte{}, revs: map[string]uint64{}} }

func (m *memPlans) Get(_ context.Context, c, id string) (*approval.Plan, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.plans[c+"."+id]
	if !ok {
		return nil, 0, approval.ErrNotFound
	}
	var p approval.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, 0, err
	}
	return &p, m.revs[c+"."+id], nil
}

func (m *memPlans) Create(ctx context.Context, p *approval.Plan) (*approval.Plan, bool, error) {
	raw, err := approval.Encode(p)
	if err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	k := p.Cluster + "." + p.ID
	if _, ok := m.plans[k]; ok {
		m.mu.Unlock()
		old, _, err := m.Get(ctx, p.Cluster, p.ID)
		return old, false, err
	}
	m.plans[k], m.revs[k] = raw, 1
	m.mu.Unlock()
	return p, true, nil
}

func (m *memPlans) Update(_ context.Context, p *approval.Plan, rev uint64) (uint64, error) {
	raw, err := approval.Encode(p)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := p.Cluster + "." + p.ID
	if m.revs[k] != rev {
		return 0, approval.ErrConflict
	}
	m.plans[k] = raw
	m.revs[k]++
	return m.revs[k], nil
}

func (m *memPlans) List(ctx context.Context, clusters ...string) ([]*approval.Plan, error) {
	m.mu.Lock()
	var keys []string
	for k := range m.plans {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	var out []*approval.Plan
	for _, k := range keys {
		c, id, _ := strings.Cut(k, ".")
		p, _, err := m.Get(ctx, c, id)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// surveyed is the fake tasks with a fingerprint: each partition's replicas and leader 1;
// leaderOf overrides leaders (a leader moved by hand).
type surveyed struct {
	*fakeTasks
	mu       sync.Mutex
	leaderOf map[int32]int32
}

func (s *surveyed) Survey(_ context.Context, _ string, changes []events.Change, _ []model.Seen, _ bool) (approval.Fingerprint, int64, error) {
	replicas, _, _ := s.c.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	var fp approval.Fingerprint
	for _, ch := range changes {
		l := int32(1)
		if v, ok := s.leaderOf[ch.Partition]; ok {
			l = v
		}
		fp.Partitions = append(fp.Partitions, approval.PartitionState{TopicPartition: ch.TopicPartition, Replicas: replicas[ch.TopicPartition],
			ISR: replicas[ch.TopicPartition], Leader: l})
	}
	fp.Brokers = []approval.Broker{{ID: 1}, {ID: 2}, {ID: 3}}
	return fp, int64(len(changes)) << 20, nil
}

// approvalRig is a rig whose policy makes plans of more than 2 partitions wait; approvers
// "ops" only.
func approvalRig(t *testing.T, partitions int) (*rig, *memPlans, *surveyed) {
	plans := newMemPlans()
	var sv *surveyed
	r := newRig(t, partitions, func(c *operation.Config) {
		sv = &surveyed{fakeTasks: c.Tasks.(*fakeTasks)}
		c.Tasks = sv
		c.Plans = plans
		c.Approval = approval.Policy{Approvers: []string{"ops"}, Expiry: time.Hour,
			Rules: []approval.Rule{{Require: approval.Above, Partitions: 2}}}
	})
	return r, plans, sv
}

func (r *rig) decision(typ, planID, source, reason string) *events.Event {
	seq++
	data, _ := json.Marshal(map[string]any{"plan_id": planID, "reason": reason})
	env := events.Envelope{SpecVersion: events.SpecVersion, ID: fmt.Sprintf("dec-%d", seq), Source: source, Type: typ,
		Time: time.Now().UTC(), DataContentType: events.ContentTypeJSON, Data: data}
	body, _ := json.Marshal(env)
	ev, err := events.Decode(events.Subject(cluster, typ), nats.Header{}, body, events.DecodeOptions{Clusters: []string{cluster}})
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// propose delivers ev, which must wait for approval, and returns its interim result.
func (r *rig) propose(ev *events.Event) *events.Result {
	r.t.Helper()
	res, err, _ := r.handle(r.delivery(ev))
	if err != nil || res == nil || res.Status != events.StatusAwaitingApproval {
		r.t.Fatalf("want awaiting_approval, got %+v, %v", res, err)
	}
	if res.PlanID != approval.PlanID(cluster, ev.ID) || res.ExpiresAt.IsZero() || len(res.Changes) == 0 {
		r.t.Fatalf("interim result %+v", res)
	}
	if r.results.Stored(ev.ID) != nil {
		r.t.Fatal("an interim result was stored as final")
	}
	return res
}

// A plan over the threshold waits, nothing written; a redelivery answers with the same
// plan; approval runs exactly it, as the planned event (its result under its id), and
// the approval's result mirrors it; a second approval is rejected.
func TestApprovalRunsTheStoredPlan(t *testing.T) {
	r, plans, _ := approvalRig(t, 4)
	ev := r.event(0, 1, 2)
	waiting := r.propose(ev)
	if rec := r.entry(); rec != nil {
		t.Fatalf("journaled before approval: %+v", rec)
	}
	if again := r.propose(ev); again.PlanID != waiting.PlanID {
		t.Fatalf("redelivery made another plan %s", again.PlanID)
	}
	r.settled()
	// A small event runs at once meanwhile (under the threshold).
	small := r.deliver(r.delivery(r.event(3)))
	r.want(small, events.StatusSucceeded)

	d := r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "ops", "INC-7: go"))
	o := r.deliver(d)
	r.want(o, events.StatusSucceeded)
	final := r.results.Stored(ev.ID)
	if final == nil || final.Status != events.StatusSucceeded || final.PlanID != waiting.PlanID {
		t.Fatalf("planned event's result %+v", final)
	}
	if !changesEqual(final.Changes, waiting.Changes) {
		t.Errorf("ran %+v, the plan was %+v", final.Changes, waiting.Changes)
	}
	r.truthful(final, 0, 1, 2)
	if an := d.Announced(); len(an) != 1 || an[0].Status != events.StatusApproved || an[0].ID != ev.ID {
		t.Errorf("announced %+v, want the planned event's approved", an)
	}
	p, _, _ := plans.Get(t.Context(), cluster, waiting.PlanID)
	if p.State != approval.Approved || p.DecidedBy != "ops" || p.DecidedWhy != "INC-7: go" {
		t.Errorf("plan %+v", p)
	}
	twice := r.deliver(r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "ops", "")))
	r.want(twice, events.StatusRejected)
	if !strings.Contains(twice.res.Error, "was approved by ops") {
		t.Errorf("second approval: %q", twice.res.Error)
	}
	r.settled()
}

// A leader moved between plan and approval: the approval is refused naming the
// difference, the planned event ends rejected, nothing changed.
func TestApprovalRefusedWhenTheClusterChanged(t *testing.T) {
	r, _, sv := approvalRig(t, 3)
	ev := r.event(0, 1, 2)
	waiting := r.propose(ev)
	sv.mu.Lock()
	sv.leaderOf = map[int32]int32{1: 2}
	sv.mu.Unlock()
	d := r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "ops", ""))
	o := r.deliver(d)
	r.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, "orders-1: leader 1 → 2") {
		t.Errorf("error %q lacks the difference", o.res.Error)
	}
	// Its redelivery (the ack was lost) gives the same answer, and stores nothing more.
	res, err, _ := r.handle(d.Again(false))
	if err != nil || res.Status != events.StatusRejected || !strings.Contains(res.Error, "orders-1: leader 1 → 2") {
		t.Errorf("redelivered approval: %+v, %v", res, err)
	}
	final := r.results.Stored(ev.ID)
	if final == nil || final.Status != events.StatusRejected || !strings.Contains(final.Error, "orders-1: leader 1 → 2") {
		t.Fatalf("planned event's result %+v", final)
	}
	replicas, _, _ := r.c.read()
	for i := range 3 {
		if !slices.Equal(replicas[tp(i)], []int32{1, 2}) {
			t.Errorf("partition %d changed: %v", i, replicas[tp(i)])
		}
	}
	r.settled()
}

// Deny, an approver not allowed, an unknown plan, an approval after a deny, expiry.
func TestApprovalAnswers(t *testing.T) {
	r, plans, _ := approvalRig(t, 3)
	ev := r.event(0, 1, 2)
	waiting := r.propose(ev)

	o := r.deliver(r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "mallory", "")))
	r.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, `source "mallory" may not approve`) {
		t.Errorf("not allowed: %q", o.res.Error)
	}
	o = r.deliver(r.delivery(r.decision(events.TypePlanApproved, "plan-nope", "ops", "")))
	r.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, "unknown plan plan-nope") {
		t.Errorf("unknown: %q", o.res.Error)
	}
	o = r.deliver(r.delivery(r.decision(events.TypePlanDenied, waiting.PlanID, "ops", "not during the sale")))
	r.want(o, events.StatusSucceeded)
	final := r.results.Stored(ev.ID)
	if final == nil || final.Status != events.StatusDenied || !strings.Contains(final.Error, "not during the sale") {
		t.Fatalf("denied event's result %+v", final)
	}
	o = r.deliver(r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "ops", "")))
	r.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, "was denied by ops") {
		t.Errorf("approve after deny: %q", o.res.Error)
	}

	// Expiry: the sweep ends an unanswered plan, its event expired.
	ev2 := r.event(0, 1, 2)
	w2 := r.propose(ev2)
	p, rev, _ := plans.Get(t.Context(), cluster, w2.PlanID)
	p.ExpiresAt = time.Now().Add(-time.Second)
	if _, err := plans.Update(t.Context(), p, rev); err != nil {
		t.Fatal(err)
	}
	waitingNow, err := r.engine.Sweep(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if waitingNow[cluster] != 0 {
		t.Errorf("still waiting: %v", waitingNow)
	}
	if final := r.results.Stored(ev2.ID); final == nil || final.Status != events.StatusExpired {
		t.Fatalf("expired event's result %+v", final)
	}
	o = r.deliver(r.delivery(r.decision(events.TypePlanApproved, w2.PlanID, "ops", "")))
	r.want(o, events.StatusRejected)
	replicas, _, _ := r.c.read()
	for i := range 3 {
		if !slices.Equal(replicas[tp(i)], []int32{1, 2}) {
			t.Errorf("partition %d changed: %v", i, replicas[tp(i)])
		}
	}
	r.settled()
}

// The approval's worker dies once the approved plan is journaled: its redelivery (or
// anyone holding the lock next) finishes the plan as the planned event, once.
func TestApprovalCrashAfterJournal(t *testing.T) {
	r, _, _ := approvalRig(t, 3)
	ev := r.event(0, 1, 2)
	waiting := r.propose(ev)
	d := r.delivery(r.decision(events.TypePlanApproved, waiting.PlanID, "ops", ""))
	r.crashAt(operation.StepJournalWritten)
	if o := r.deliver(d); !o.crashed {
		t.Fatalf("no crash: %+v", o)
	}
	r.releaseAll()
	o := r.deliver(d.Again(false))
	r.want(o, events.StatusSucceeded)
	final := r.results.Stored(ev.ID)
	if final == nil || final.Status != events.StatusSucceeded {
		t.Fatalf("planned event's result %+v", final)
	}
	r.truthful(final, 0, 1, 2)
	r.settled()
}

// An event that asks for approval itself waits whatever its size; one the worker could
// never get approved is rejected.
func TestApprovalAskedByTheEvent(t *testing.T) {
	r, _, _ := approvalRig(t, 3)
	data, _ := json.Marshal(map[string]any{"topic": topic, "partitions": []int32{0}, "replication_factor": 3, "approval": "required"})
	env := events.Envelope{SpecVersion: events.SpecVersion, ID: "asks-1", Source: "test", Type: events.TypeReplicaChangeRequested,
		DataContentType: events.ContentTypeJSON, Data: data}
	body, _ := json.Marshal(env)
	ev, err := events.Decode(events.Subject(cluster, env.Type), nats.Header{}, body, events.DecodeOptions{Clusters: []string{cluster}})
	if err != nil {
		t.Fatal(err)
	}
	res := r.propose(ev)
	if !strings.Contains(res.Note, "the event asks for approval") {
		t.Errorf("note %q", res.Note)
	}

	plain := newRig(t, 1)
	o := plain.deliver(plain.delivery(ev))
	plain.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, "no approvers configured") {
		t.Errorf("error %q", o.res.Error)
	}
}

// An approval given up (its failed result stored) after it marked the plan approved but
// before it journaled it: the sweep gives the planned event its failed result, saying
// nothing changed; while the approval has no result, the sweep leaves the plan alone.
func TestApprovalGivenUpBeforeItRan(t *testing.T) {
	r, plans, _ := approvalRig(t, 3)
	ev := r.event(0, 1, 2)
	waiting := r.propose(ev)
	p, rev, _ := plans.Get(t.Context(), cluster, waiting.PlanID)
	p.State, p.DecidedBy, p.DecidedEvent, p.DecidedAt = approval.Approved, "ops", "dec-given-up", time.Now().UTC()
	if _, err := plans.Update(t.Context(), p, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := r.engine.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r.results.Stored(ev.ID) != nil {
		t.Fatal("the sweep ended the plan while its approval may still run it")
	}
	if _, _, err := r.results.Publish(t.Context(), &events.Result{ID: "dec-given-up", Type: events.TypePlanApproved, Cluster: cluster,
		Status: events.StatusFailed, Error: "delivered more often than allowed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.engine.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	final := r.results.Stored(ev.ID)
	if final == nil || final.Status != events.StatusFailed || !strings.Contains(final.Error, "before the plan ran: nothing changed") {
		t.Fatalf("planned event's result %+v", final)
	}
	r.settled()
}
