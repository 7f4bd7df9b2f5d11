package faults_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// killAt runs one event through a worker killed with SIGKILL at step, then a second worker
// that takes over, and checks the one result the event gets.
func killAt(t *testing.T, r *rig, step, typ string, data map[string]any) (first, stored *events.Result) {
	t.Helper()
	a := r.start("a", step)
	id, ch := r.publish(typ, data)
	a.waitPaused(step, 90*time.Second)
	a.kill()
	r.start("b")
	first = r.result(ch, 3*time.Minute)
	stored = r.oneStored(id)
	if first.Status != stored.Status || first.ID != id {
		t.Fatalf("received %s, stored %s", first.Status, stored.Status)
	}
	wantWorker, wantAttempt := "b", 2
	if step == operation.StepResultPublished {
		wantWorker, wantAttempt = "a", 1 // a stored it before it was killed; b replays it
	}
	if stored.Worker != wantWorker || stored.Attempt < wantAttempt {
		t.Errorf("stored result by %s on attempt %d, want %s on attempt %d or later", stored.Worker, stored.Attempt, wantWorker, wantAttempt)
	}
	return first, stored
}

// kill -9 at each step of a preferred-leader change: the event ends succeeded, once, with
// both partitions as asked and the result listing both changes.
func TestKillPreferredLeaderAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	for _, step := range []string{operation.StepJournalWritten, operation.StepReordered, operation.StepBeforeResult, operation.StepResultPublished} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, env, "local")
			topic := r.topic("pl", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, 0, nil)
			before := r.partitions(topic)
			_, res := killAt(t, r, step, events.TypeReplicaChangeRequested,
				map[string]any{"topic": topic, "partitions": []int{0, 1}, "preferred_leader": 3})
			if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
				t.Fatalf("result %s %q, changes %v: want succeeded with 2 changes", res.Status, res.Error, res.Changes)
			}
			r.outcome(res, topic, before, func(p model.Partition) bool {
				return p.Partition < 2 && p.Replicas[0] == 3 && p.Leader == 3
			}, true)
			r.noLeftovers([]string{topic}, nil)
		})
	}
}

// kill -9 at each step of a broker-overloaded shed.
func TestKillBrokerOverloadedAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	for _, step := range []string{operation.StepJournalWritten, operation.StepReordered, operation.StepBeforeResult} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, env, "local")
			// Six partitions led by broker 2, each with two other replicas.
			assignment := [][]int32{{2, 1, 3}, {2, 3, 4}, {2, 4, 1}, {2, 1, 4}, {2, 3, 1}, {2, 4, 3}}
			topic := r.topic("shed", assignment, 0, nil)
			before := r.partitions(topic)
			_, res := killAt(t, r, step, events.TypeBrokerOverloaded,
				map[string]any{"broker": 2, "topics": []string{topic}, "reason": "fault test"})
			if res.Status != events.StatusSucceeded || len(res.Changes) != len(assignment) {
				t.Fatalf("result %s %q, %d changes: want succeeded with %d", res.Status, res.Error, len(res.Changes), len(assignment))
			}
			r.outcome(res, topic, before, func(p model.Partition) bool {
				return p.Leader != 2 && p.Replicas[0] == p.Leader
			}, true)
			r.noLeftovers([]string{topic}, nil)
		})
	}
}

// kill -9 at each step of a throttled replication-factor increase around the copy: the
// next worker finishes it, restores exactly the throttles it set, and leaves the one set by
// someone else on the topic. (Killed during the copy: TestKillDuringTheCopy.)
func TestKillReplicationFactorAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, step := range []string{operation.StepJournalWritten, operation.StepThrottled, operation.StepBeforeResult} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t, env, "kraft")
			theirs := map[string]string{kafka.LeaderThrottledReplicas: "0:9"}
			topic := r.topic("rf", [][]int32{{1, 2}, {2, 3}}, 1_000_000, theirs)
			before := r.partitions(topic)
			_, res := killAt(t, r, step, events.TypeReplicaChangeRequested,
				map[string]any{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": throttleRate})
			if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
				t.Fatalf("result %s %q, changes %v: want succeeded with 2 changes", res.Status, res.Error, res.Changes)
			}
			r.outcome(res, topic, before, grew(before), false)
			r.noLeftovers([]string{topic}, theirs)
		})
	}
}

func grew(before []model.Partition) func(model.Partition) bool {
	return func(p model.Partition) bool {
		b := before[p.Partition].Replicas
		return len(p.Replicas) == len(b)+1 && slices.Equal(p.Replicas[:len(b)], b)
	}
}

// crawlRate is a throttle at which a copy crawls: how the tests keep a copy running across
// a fault. Kafka's replication quota is measured over 11 one-second samples and checked
// before each fetch, so a throttled follower still takes one fetch (up to
// replica.fetch.max.bytes, 1 MiB) each time the window empties: at this rate a copy moves
// about 1 MiB per 11 s, and crawlBytes stay in progress for about a minute.
const (
	crawlRate  = 1_001
	crawlBytes = 6_000_000
)

// kill -9 during the copy: the next worker finds the copy still running and adopts it as
// its own (it neither waits for it as for someone else's reassignment nor refuses to
// start). The copy crawls, so the event's timeout ends it: the worker that did not start
// the copy cancels it and restores the throttles the first one set, from the journal, and
// the cluster is as before.
func TestKillDuringTheCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	r := newRig(t, env, "local")
	topic := r.topic("rf", [][]int32{{1, 2}}, crawlBytes, nil)
	before := r.partitions(topic)
	a := r.start("a", operation.StepCopying)
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
		"throttle_bytes_per_sec": crawlRate, "timeout": "25s"})
	a.waitPaused(operation.StepCopying, 90*time.Second)
	a.kill()
	b := r.start("b")
	b.waitFor("adopting reassignments of an earlier attempt", 90*time.Second)
	res := r.result(ch, 3*time.Minute)
	stored := r.oneStored(id)
	if stored.Status != events.StatusFailed || stored.Worker != "b" || res.Status != stored.Status ||
		!strings.Contains(stored.Error, "timeout after 25s") || !strings.Contains(stored.Error, "cancelled 1 unfinished reassignments") {
		t.Fatalf("result %s by %s (%q), want failed by b: timeout, cancelled", stored.Status, stored.Worker, stored.Error)
	}
	r.outcome(stored, topic, before, func(model.Partition) bool { return false }, false)
	r.noLeftoversAt([]string{topic}, nil, crawlRate)
}

// SIGTERM during a throttled copy: the worker exits promptly without cancelling the copy
// or restoring its throttles (a rolling deploy must not restart a multi-hour copy), and the
// next worker finishes the operation and restores them.
func TestSIGTERMKeepsTheCopyRunning(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	r := newRig(t, env, "local")
	topic := r.topic("rf", [][]int32{{1, 2}}, 2_000_000, nil)
	before := r.partitions(topic)
	a := r.start("a", operation.StepCopying)
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": throttleRate})
	a.waitPaused(operation.StepCopying, 90*time.Second)
	a.term(30 * time.Second)
	// Nothing undone: the journal still holds the operation, our throttles are set, and the
	// partition is being copied or has been (never put back).
	rec, err := journal.New(r.js).Get(t.Context(), r.alias)
	if err != nil || rec == nil || rec.Step != journal.StepCopying || len(rec.Reassignments) != 1 {
		t.Fatalf("journal after SIGTERM: %+v (%v), want the copy recorded", rec, err)
	}
	if !throttled(t, r, throttleRate) {
		t.Fatal("after SIGTERM: our throttle is gone")
	}
	if p := r.partitions(topic)[0]; len(p.Replicas) != 3 {
		t.Fatalf("after SIGTERM: replicas %v: the copy was cancelled", p.Replicas)
	}
	r.start("b")
	res := r.result(ch, 3*time.Minute)
	stored := r.oneStored(id)
	if stored.Status != events.StatusSucceeded || stored.Worker != "b" || stored.Attempt < 2 || res.Status != stored.Status {
		t.Fatalf("result %s by %s on attempt %d (%s): want succeeded by b on a later attempt", stored.Status, stored.Worker, stored.Attempt, stored.Error)
	}
	if len(stored.ThrottlesKept) != 0 {
		t.Errorf("throttles kept %v: nobody else touched them", stored.ThrottlesKept)
	}
	r.outcome(stored, topic, before, grew(before), false)
	r.noLeftovers([]string{topic}, nil)
}

// throttled reports whether a broker holds the throttle rate.
func throttled(t *testing.T, r *rig, rate int) bool {
	t.Helper()
	var ids []int32
	for _, b := range r.env.Cluster(t, r.real).Brokers {
		ids = append(ids, b.ID)
	}
	rcs, err := r.adm.DescribeBrokerConfigs(t.Context(), ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if (c.Key == kafka.LeaderThrottledRate || c.Key == kafka.FollowerThrottledRate) && c.MaybeValue() == strconv.Itoa(rate) {
				return true
			}
		}
	}
	return false
}

// A worker that dies on an event every time: after max_attempts deliveries the event gets
// one failed result and one dead letter, what the attempts left is undone, and the cluster
// is as before.
func TestCrashLoopEndsInADeadLetter(t *testing.T) {
	env := testenv.Get(t)
	r := newRig(t, env, "local")
	r.maxAttempts = 2
	topic := r.topic("pl", [][]int32{{1, 2, 3}}, 0, nil)
	before := r.partitions(topic)
	dead := make(chan *nats.Msg, 4)
	sub, err := r.nc.Subscribe(events.DeadSubject(r.alias), func(m *nats.Msg) { dead <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "preferred_leader": 2})
	for i := range 2 {
		w := r.start("crash"+string(rune('1'+i)), operation.StepReordered)
		w.waitPaused(operation.StepReordered, 90*time.Second)
		w.kill()
	}
	r.start("last", operation.StepReordered)
	res := r.result(ch, 3*time.Minute)
	stored := r.oneStored(id)
	if stored.Status != events.StatusFailed || !strings.Contains(stored.Error, "delivered 3 times") || res.Status != stored.Status {
		t.Fatalf("result %s %q: want failed, delivered 3 times", stored.Status, stored.Error)
	}
	select {
	case m := <-dead:
		var env events.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.ID != id {
			t.Fatalf("dead letter %s: %v", m.Data, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no dead letter")
	}
	r.outcome(stored, topic, before, func(model.Partition) bool { return false }, true)
	r.noLeftovers([]string{topic}, nil)
}

// kill -9 at each step of a throttled log-dir move on the KRaft node with two log
// directories: the next worker adopts the move (the future replica keeps copying without
// a worker), finishes it, restores the copy throttle it did not set, and the replica ends
// in the target directory with every record readable.
func TestKillLogDirMoveAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	dirs := env.TwoLogDirs(t, "kraft", 1)
	for _, step := range []string{operation.StepJournalWritten, operation.StepThrottled, operation.StepCopying, operation.StepBeforeResult} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t, env, "kraft")
			topic := r.topic("ld", [][]int32{{1, 2}}, 2_000_000, nil)
			from := r.logDirOf(1, topic, 0)
			to := testenv.OtherLogDir(dirs, from)
			_, res := killAt(t, r, step, events.TypeLogDirMoveRequested, map[string]any{"broker": 1, "topic": topic, "partition": 0,
				"to_dir": to, "throttle_bytes_per_sec": throttleRate})
			if res.Status != events.StatusSucceeded || len(res.Changes) != 1 || res.Changes[0].DirAfter != to || res.Changes[0].DirBefore != from {
				t.Fatalf("result %s %q, changes %+v: want succeeded, %s → %s", res.Status, res.Error, res.Changes, from, to)
			}
			if got := r.logDirOf(1, topic, 0); got != to {
				t.Errorf("%s-0 is in %s after the move, want %s", topic, got, to)
			}
			r.noLeftovers([]string{topic}, nil)
		})
	}
}
