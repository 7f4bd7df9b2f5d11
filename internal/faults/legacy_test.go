package faults_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// legacyCopying checks that, with no worker running, the copy of topic-0 to broker 3 goes
// on: /admin/reassign_partitions lists it, and our follower rate holds on broker 3 (read
// from its config znode: a 2.3 broker does not show the value).
func legacyCopying(t *testing.T, r *rig, topic string) {
	t.Helper()
	targets, err := kafka.ReadZKReassignments(r.env.ZooKeeper(t), stack.LegacyChroot)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := targets[model.TopicPartition{Topic: topic, Partition: 0}]; !ok {
		t.Fatalf("/admin/reassign_partitions lists %v, not the copy of %s-0: it ended too soon for the test", targets, topic)
	}
	if got := r.env.BrokerThrottles(t, r.real, r.cl)["3/"+kafka.FollowerThrottledRate]; got != strconv.Itoa(throttleRate) {
		t.Fatalf("broker 3's follower rate = %q during the copy, want ours (%d)", got, throttleRate)
	}
}

// kill -9 in the middle of a throttled copy on the legacy cluster (Kafka 2.3, no
// reassignment API): the copy goes on in /admin/reassign_partitions without a worker; the
// next worker finds it there, adopts it as its own (the journal lists it and the znode
// holds its target), waits until the znode no longer lists it, then restores the
// throttles the first worker set.
func TestKillDuringTheLegacyCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	r := newRig(t, env, "legacy")
	topic := r.topic("rf", [][]int32{{1, 2}}, 6_000_000, nil)
	before := r.partitions(topic)
	a := r.start("a", operation.StepCopying)
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": throttleRate})
	a.waitPaused(operation.StepCopying, 90*time.Second)
	a.kill()
	legacyCopying(t, r, topic)
	b := r.start("b")
	b.waitFor("adopting reassignments of an earlier attempt", 90*time.Second)
	res := r.result(ch, 3*time.Minute)
	stored := r.oneStored(id)
	if stored.Status != events.StatusSucceeded || stored.Worker != "b" || stored.Attempt < 2 || res.Status != stored.Status || stored.Strategy != string(kafka.StrategyZKReassign) {
		t.Fatalf("result %s by %s on attempt %d via %q (%s): want succeeded by b, zk-reassign", stored.Status, stored.Worker, stored.Attempt, stored.Strategy, stored.Error)
	}
	r.outcome(stored, topic, before, grew(before), false)
	r.noLeftovers([]string{topic}, nil)
}

// A throttled raise times out on the legacy cluster: the copy cannot be cancelled, so the
// result says failed at once, and the worker waits for the copy to restore the throttles.
// It is killed (kill -9) during that wait: its event was not acknowledged, so it is
// delivered again; the next worker replays the stored result, and first waits for the copy
// and puts the throttles back, from the journal. Nothing is left; the partition ends as
// asked (the copy finished by itself); the event has its one result.
func TestKillWhileAwaitingTheLegacyCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	r := newRig(t, env, "legacy")
	topic := r.topic("rf", [][]int32{{1, 2}}, 6_000_000, nil)
	before := r.partitions(topic)
	a := r.start("a", operation.StepAwaitingReassignments)
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
		"throttle_bytes_per_sec": throttleRate, "timeout": "3s"})
	res := r.result(ch, 2*time.Minute)
	if res.Status != events.StatusFailed || res.Worker != "a" || !strings.Contains(res.Error, "which Kafka before 2.4 cannot cancel ("+topic+"-0)") {
		t.Fatalf("result %s by %s (%s): want failed by a, the copy not cancelled", res.Status, res.Worker, res.Error)
	}
	a.waitPaused(operation.StepAwaitingReassignments, 30*time.Second)
	a.kill()
	rec, err := journal.New(r.js).Get(t.Context(), r.alias)
	if err != nil || rec == nil || rec.Event != id || rec.Step != journal.StepAwaiting || len(rec.Throttles) == 0 {
		t.Fatalf("journal after the kill: %+v (%v), want the event's entry awaiting the copy, with its throttles", rec, err)
	}
	legacyCopying(t, r, topic)
	b := r.start("b")
	b.waitFor(`"action": "await"`, 90*time.Second) // carrying on the journaled operation: its wait
	testenv.Eventually(t, 3*time.Minute, func() error {
		rec, err := journal.New(r.js).Get(t.Context(), r.alias)
		if err != nil {
			return err
		}
		if rec != nil && rec.Open() {
			return fmt.Errorf("journal entry still open, step %s", rec.Step)
		}
		return nil
	})
	if stored := r.oneStored(id); stored.Status != events.StatusFailed || stored.Worker != "a" {
		t.Fatalf("stored result %s by %s, want a's failed one", stored.Status, stored.Worker)
	}
	testenv.Eventually(t, time.Minute, func() error {
		p := r.partitions(topic)[0]
		if !grew(before)(p) || len(p.ISR) != 3 || p.Reassigning() {
			return fmt.Errorf("replicas %v isr %v reassigning %v, want %v and one more, in sync", p.Replicas, p.ISR, p.Reassigning(), before[0].Replicas)
		}
		return nil
	})
	r.noLeftovers([]string{topic}, nil)
}
