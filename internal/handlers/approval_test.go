package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// approvalPartitions is the size of the topic whose replication-factor raise waits for
// approval (over the policy's 100).
const approvalPartitions = 500

// propose publishes ev and returns its result channel and its interim result, which must
// be awaiting_approval with the plan; nothing of it is stored.
func (f *fleet) propose(ev *events.Envelope) (<-chan *events.Result, *events.Result) {
	t := f.t
	t.Helper()
	ch := f.publish(ev)
	res := wait(t, ch, 2*time.Minute)
	if res.Status != events.StatusAwaitingApproval || res.PlanID == "" || res.ExpiresAt.IsZero() || len(res.Changes) == 0 {
		t.Fatalf("want awaiting_approval with a plan, got %s (%q) plan %q, %d changes", res.Status, res.Error, res.PlanID, len(res.Changes))
	}
	if _, ok, err := pipeline.ResultsOn(f.js).Earlier(t.Context(), ev.ID); err != nil || ok {
		t.Fatalf("a result is stored for the waiting event %s (%v, %v)", ev.ID, ok, err)
	}
	return ch, res
}

// answer publishes a plan-approved or plan-denied event from source and returns its result.
func (f *fleet) answer(typ, planID, source, reason string) (*events.Envelope, *events.Result) {
	f.t.Helper()
	ev := f.event(typ, map[string]any{"plan_id": planID, "reason": reason})
	ev.Source = source
	return ev, f.run(ev)
}

// firstWriteAfter is the time of the first write request sent after t (zero: none).
func (w *writeLog) firstWriteAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.times {
		if at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// A replication-factor raise of 500 partitions, over the policy's 100, waits for approval
// with its plan, writing nothing; every worker restarts; the approval runs exactly the
// stored plan (the cluster's assignment equals the plan's, partition by partition), under
// the event's id: awaiting_approval, approved, then succeeded. The log says how long the
// approval took to the first cluster write (go test -count=20 -run
// TestApprovalRunsTheStoredPlan -v ./internal/handlers | grep 'approve →').
func TestApprovalRunsTheStoredPlan(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.approval = &approval.Policy{Approvers: []string{"*"}, Rules: []approval.Rule{
		{Types: []string{events.TypeReplicaChangeRequested}, Require: approval.Above, Partitions: 100}}}
	f.configure = func(cfg *handlers.Config) {
		cfg.RF.MaxMovesPerBroker = approvalPartitions // empty partitions: one batch
		cfg.RF.ThrottleSettle = -1
	}
	w1 := f.startWith("worker-1", workerOpts{})
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "approve")
	assignment := make([][]int32, approvalPartitions)
	for p := range assignment {
		assignment[p] = []int32{int32(1 + p%3)}
	}
	testenv.CreateTopic(t, cl, topic, assignment, nil)
	before := state(t, f, topic)

	ev := f.event(events.TypeReplicaChangeRequested, rfData(topic, 2, nil))
	ch, waiting := f.propose(ev)
	if len(waiting.Changes) != approvalPartitions || !strings.Contains(waiting.Note, "500 partitions touched, over 100") {
		t.Fatalf("plan of %d changes, note %q", len(waiting.Changes), waiting.Note)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatal("the cluster changed while the plan waits for approval")
	}
	// The fleet restarts: the plan is in JetStream, not in a worker's memory.
	w1.stop()
	w2 := f.startWith("worker-2", workerOpts{})

	approveAt := time.Now()
	approvalEv := f.event(events.TypePlanApproved, map[string]any{"plan_id": waiting.PlanID, "reason": "INC-7: raise it"})
	approvalEv.Source = "oncall/alice"
	ach := f.publish(approvalEv)
	if got := wait(t, ch, time.Minute); got.Status != events.StatusApproved || got.PlanID != waiting.PlanID {
		t.Fatalf("want the interim result approved, got %s (%q)", got.Status, got.Error)
	}
	final := wait(t, ch, 3*time.Minute)
	if final.Status != events.StatusSucceeded || final.PlanID != waiting.PlanID {
		t.Fatalf("planned event: %s (%q)", final.Status, final.Error)
	}
	if first := w2.writes.firstWriteAfter(approveAt); first.IsZero() {
		t.Error("no cluster write after the approval")
	} else {
		t.Logf("approve → first cluster write: %s", first.Sub(approveAt).Round(time.Millisecond))
	}
	own := wait(t, ach, time.Minute)
	if own.Status != events.StatusSucceeded || !strings.Contains(own.Note, "approved plan "+waiting.PlanID+" of event "+ev.ID) {
		t.Errorf("approval's own result: %s (%q) %q", own.Status, own.Error, own.Note)
	}
	if stored := f.stored(ev.ID); stored.Status != events.StatusSucceeded || len(stored.Changes) != approvalPartitions {
		t.Fatalf("stored result of the planned event: %s, %d changes", stored.Status, len(stored.Changes))
	}
	// What ran is the plan, partition by partition.
	planned := map[model.TopicPartition][]int32{}
	for _, c := range waiting.Changes {
		planned[c.TopicPartition] = c.ReplicasAfter
	}
	differences := 0
	testenv.Eventually(t, time.Minute, func() error {
		differences = 0
		var first string
		for _, p := range state(t, f, topic) {
			if !slices.Equal(p.Replicas, planned[p.TopicPartition]) {
				if differences++; first == "" {
					first = fmt.Sprintf("%s: %v, the plan %v", p.TopicPartition, p.Replicas, planned[p.TopicPartition])
				}
			}
		}
		if differences > 0 {
			return fmt.Errorf("%d partitions differ from the plan (%s)", differences, first)
		}
		return nil
	})
	t.Logf("executed assignment vs the stored plan: %d of %d partitions differ", differences, approvalPartitions)
	if !sameChanges(final.Changes, waiting.Changes) {
		t.Error("the result's changes are not the approved plan's")
	}
	// A second approval changes nothing.
	_, again := f.answer(events.TypePlanApproved, waiting.PlanID, "oncall/bob", "")
	if again.Status != events.StatusRejected || !strings.Contains(again.Error, "was approved by oncall/alice") {
		t.Errorf("double approval: %s (%q)", again.Status, again.Error)
	}
	f.noLeftovers([]string{topic}, nil, "")
}

func sameChanges(a, b []events.Change) bool {
	return slices.EqualFunc(a, b, func(x, y events.Change) bool {
		return x.TopicPartition == y.TopicPartition && slices.Equal(x.ReplicasBefore, y.ReplicasBefore) &&
			slices.Equal(x.ReplicasAfter, y.ReplicasAfter) && x.LeaderBefore == y.LeaderBefore && x.LeaderAfter == y.LeaderAfter
	})
}

// A leader the plan depends on moves between plan and approval (by hand, on a ZooKeeper
// cluster): the approval is refused naming the difference, the planned event ends
// rejected, and the cluster is otherwise as it was.
func TestApprovalRefusedWhenALeaderMoved(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.approval = &approval.Policy{Approvers: []string{"*"}, Rules: []approval.Rule{{Require: approval.Always}}}
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "moved")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 3}, {3, 1}}, nil)

	ev := f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil))
	ch, waiting := f.propose(ev)

	// Someone moves the leader of partition 1 from 2 to 3 (reorder, preferred election).
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 1, []int32{3, 2})
	if _, err := adm.AlterPartitionAssignments(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		set := kadm.TopicsSet{}
		set.Add(topic, 1)
		if _, err := adm.ElectLeaders(t.Context(), kadm.ElectPreferredReplica, set); err != nil {
			return err
		}
		if p := state(t, f, topic)[1]; p.Leader != 3 {
			return fmt.Errorf("partition 1 led by %d", p.Leader)
		}
		return nil
	})
	moved := state(t, f, topic)

	_, own := f.answer(events.TypePlanApproved, waiting.PlanID, "oncall/alice", "")
	want := fmt.Sprintf("%s-1: leader 2 → 3", topic)
	if own.Status != events.StatusRejected || !strings.Contains(own.Error, want) {
		t.Fatalf("approval: %s (%q), want rejected naming %q", own.Status, own.Error, want)
	}
	final := wait(t, ch, time.Minute)
	for final.Status == events.StatusApproved {
		final = wait(t, ch, time.Minute)
	}
	if final.Status != events.StatusRejected || !strings.Contains(final.Error, want) || !strings.Contains(final.Error, "nothing changed") {
		t.Fatalf("planned event: %s (%q)", final.Status, final.Error)
	}
	if stored := f.stored(ev.ID); stored.Status != events.StatusRejected {
		t.Errorf("stored: %s", stored.Status)
	}
	if after := state(t, f, topic); !sameState(moved, after) {
		t.Errorf("the cluster changed after the refused approval: %v, was %v", after, moved)
	}
	f.noLeftovers([]string{topic}, nil, "")
}

// Deny, an approver not allowed, an unknown plan, an approval after a deny, and a plan
// nobody answers (expired): each ends with its own result, and nothing is changed.
func TestApprovalAnswers(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.approval = &approval.Policy{Approvers: []string{"oncall/alice"}, Rules: []approval.Rule{{Require: approval.Always}}}
	f.start("worker-1")
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "answers")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 3}}, nil)
	before := state(t, f, topic)

	ev := f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil))
	ch, waiting := f.propose(ev)
	if _, r := f.answer(events.TypePlanApproved, waiting.PlanID, "oncall/mallory", ""); r.Status != events.StatusRejected ||
		!strings.Contains(r.Error, `source "oncall/mallory" may not approve or deny plans`) {
		t.Errorf("approver not allowed: %s (%q)", r.Status, r.Error)
	}
	if _, r := f.answer(events.TypePlanApproved, "plan-0000", "oncall/alice", ""); r.Status != events.StatusRejected ||
		!strings.Contains(r.Error, "unknown plan plan-0000") {
		t.Errorf("unknown plan: %s (%q)", r.Status, r.Error)
	}
	if _, r := f.answer(events.TypePlanDenied, waiting.PlanID, "oncall/alice", "not during the sale"); r.Status != events.StatusSucceeded {
		t.Errorf("deny: %s (%q)", r.Status, r.Error)
	}
	if final := wait(t, ch, time.Minute); final.Status != events.StatusDenied || !strings.Contains(final.Error, "not during the sale") {
		t.Errorf("denied event: %s (%q)", final.Status, final.Error)
	}
	if _, r := f.answer(events.TypePlanApproved, waiting.PlanID, "oncall/alice", ""); r.Status != events.StatusRejected ||
		!strings.Contains(r.Error, "was denied by oncall/alice") {
		t.Errorf("approval after the deny: %s (%q)", r.Status, r.Error)
	}
	if stored := f.stored(ev.ID); stored.Status != events.StatusDenied {
		t.Errorf("stored: %s", stored.Status)
	}

	// An event cancelled while its plan waits ends cancelled; its plan can no longer run.
	ev3 := f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil))
	ch3, waiting3 := f.propose(ev3)
	f.run(f.event(events.TypeOperationCancel, map[string]any{"id": ev3.ID, "reason": "changed my mind"}))
	if final := wait(t, ch3, time.Minute); final.Status != events.StatusCancelled || !strings.Contains(final.Error, "changed my mind") {
		t.Errorf("event cancelled while its plan waits: %s (%q)", final.Status, final.Error)
	}
	if _, r := f.answer(events.TypePlanApproved, waiting3.PlanID, "oncall/alice", ""); r.Status != events.StatusRejected ||
		!strings.Contains(r.Error, "was cancelled") {
		t.Errorf("approval after the cancel: %s (%q)", r.Status, r.Error)
	}

	// A plan nobody answers expires; an approval after that is rejected.
	g := newFleet(t, env, "kraft")
	g.approval = &approval.Policy{Approvers: []string{"*"}, Expiry: 2 * time.Second, Rules: []approval.Rule{{Require: approval.Always}}}
	g.start("worker-1")
	ev2 := g.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil))
	ch2, waiting2 := g.propose(ev2)
	if final := wait(t, ch2, time.Minute); final.Status != events.StatusExpired || !strings.Contains(final.Error, "was not approved before") {
		t.Errorf("unanswered plan: %s (%q)", final.Status, final.Error)
	}
	if _, r := g.answer(events.TypePlanApproved, waiting2.PlanID, "oncall/alice", ""); r.Status != events.StatusRejected ||
		!strings.Contains(r.Error, "was expired") {
		t.Errorf("approval after expiry: %s (%q)", r.Status, r.Error)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Errorf("the cluster changed: %v, was %v", after, before)
	}
	f.noLeftovers([]string{topic}, nil, "")
	g.noLeftovers([]string{topic}, nil, "")
}
