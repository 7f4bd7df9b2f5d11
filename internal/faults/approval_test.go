package faults_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A plan waits for approval; every worker is stopped (SIGTERM) and new ones start; the
// approval runs the plan on worker b, which is killed (kill -9) in the middle of the
// throttled copy; worker c, the next to take the lock, finishes it from the journal. The
// planned event gets exactly one result (succeeded, by c), the approval exactly one, the
// cluster shows the plan, and nothing of ours is left.
func TestKillTheApprovedPlanDuringTheCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	r := newRig(t, env, "kraft")
	r.extra = "approval:\n  approvers: [\"*\"]\n  rules:\n    - {types: [replica-change-requested], require: always}\n"
	topic := r.topic("approved", [][]int32{{1, 2}, {2, 3}}, 2_000_000, nil)
	before := r.partitions(topic)

	a := r.start("a")
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
		"throttle_bytes_per_sec": throttleRate})
	waiting := r.result(ch, 2*time.Minute)
	if waiting.Status != events.StatusAwaitingApproval || waiting.PlanID == "" || len(waiting.Changes) != 2 {
		t.Fatalf("want awaiting_approval with 2 changes, got %s (%q)", waiting.Status, waiting.Error)
	}
	a.term(30 * time.Second)

	b := r.start("b", operation.StepCopying)
	approvalID, ach := r.publish(events.TypePlanApproved, map[string]any{"plan_id": waiting.PlanID, "reason": "faults: go"})
	b.waitPaused(operation.StepCopying, 90*time.Second)
	b.kill()
	r.start("c")
	var final *events.Result
	for final == nil || final.Status.Interim() {
		final = r.result(ch, 3*time.Minute)
	}
	stored := r.oneStored(id)
	if stored.Status != events.StatusSucceeded || final.Status != stored.Status || stored.Worker != "c" || stored.PlanID != waiting.PlanID {
		t.Fatalf("planned event: received %s, stored %s by %s (%q)", final.Status, stored.Status, stored.Worker, stored.Error)
	}
	own := r.result(ach, 3*time.Minute)
	if s := r.oneStored(approvalID); s.Status != events.StatusSucceeded || own.Status != s.Status ||
		!strings.Contains(s.Note, "approved plan "+waiting.PlanID) {
		t.Errorf("approval: received %s, stored %s (%q) %q", own.Status, s.Status, s.Error, s.Note)
	}
	r.outcome(stored, topic, before, grew(before), false)
	r.noLeftovers([]string{topic}, nil)
}
