package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// holdLock takes the fleet's cluster lock as another worker would and returns its release.
func holdLock(t *testing.T, f *fleet) func() {
	t.Helper()
	sess, err := locks.Connect(locks.SessionConfig{Servers: []string{stack.ZooKeeperAddr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	lk, err := locks.New(sess, locks.Config{Root: "/kafkamender-test/locks", Worker: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := lk.Acquire(t.Context(), f.alias, "other-event")
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = held.Release(context.Background()) }
}

// A lock held elsewhere is a transient failure: the event is negatively acknowledged with
// a delay and runs once the lock is free, as a later attempt.
func TestLockBusyIsRetriedLater(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.lockWait = time.Second
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2}}, nil)
	before := state(t, f, topic)
	release := holdLock(t, f)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 2})
	ch := f.publish(e)
	// The worker tried, found the lock busy, and the event came again: twice delivered.
	testenv.Eventually(t, time.Minute, func() error {
		if n := f.consumerState().Delivered.Consumer; n < 2 {
			return fmt.Errorf("delivered %d times", n)
		}
		return nil
	})
	select {
	case r := <-ch:
		t.Fatalf("a result while the lock is held elsewhere: %+v", r)
	default:
	}
	release()
	res := wait(t, ch, time.Minute)
	if res.Status != events.StatusSucceeded || res.Attempt < 2 {
		t.Fatalf("result %s attempt %d (%s), want succeeded on a later attempt", res.Status, res.Attempt, res.Error)
	}
	checkPreferred(t, f, e.ID, topic, before, 2)
}

// checkPreferred checks the end of a preferred-leader event that was asked to make broker
// the preferred leader of every partition of topic: one stored result, every partition as
// asked or as before with the result's changes saying which, nothing of ours left.
func checkPreferred(t *testing.T, f *fleet, id, topic string, before []model.Partition, broker int32) {
	t.Helper()
	stored := f.stored(id)
	testenv.CheckOutcome(t, f.env.Kafka(t, f.real), stored, topic, before, func(p model.Partition) bool {
		return p.Leader == broker && p.Replicas[0] == broker
	}, true)
	f.noLeftovers([]string{topic}, nil, "")
}

// A worker that dies while it has an event in hand (here: waiting for the lock) loses
// nothing: JetStream redelivers the event after AckWait to a worker that is alive.
func TestKilledWorkerLosesNoEvent(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	kill := f.startKillable("worker-a")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2, 3}}, nil)
	before := state(t, f, topic)
	release := holdLock(t, f)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 3})
	ch := f.publish(e)
	// worker-a takes the event and waits for the lock.
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := f.consumerState().NumAckPending; n != 1 {
			return fmt.Errorf("%d events in a worker's hands", n)
		}
		return nil
	})
	kill()
	f.start("worker-b")
	release()
	res := wait(t, ch, time.Minute)
	if res.Status != events.StatusSucceeded || res.Worker != "worker-b" || res.Attempt != 2 {
		t.Fatalf("result %s by %s, attempt %d (%s): want succeeded by worker-b on attempt 2", res.Status, res.Worker, res.Attempt, res.Error)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := state(t, f, topic); got[0].Leader != 3 || got[0].Replicas[0] != 3 {
			return fmt.Errorf("partition after: %+v", got[0])
		}
		return nil
	})
	checkPreferred(t, f, e.ID, topic, before, 3)
}

// NATS restarts while an event waits: it is kept (file storage), the worker reconnects and
// the result is published once the event can run.
func TestNATSRestartLosesNoEvent(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "kraft")
	f.lockWait = time.Second
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "kraft"), topic, [][]int32{{1, 2, 3}}, nil)
	before := state(t, f, topic)
	release := holdLock(t, f)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 2})
	ch := f.publish(e)
	// The worker took the event (and waits for the lock, or was told it is busy).
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := f.consumerState().Delivered.Consumer; n < 1 {
			return fmt.Errorf("not delivered yet")
		}
		return nil
	})
	env.RestartNATS(t)
	release()
	res := wait(t, ch, 2*time.Minute)
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result after a NATS restart: %s (%s)", res.Status, res.Error)
	}
	checkPreferred(t, f, e.ID, topic, before, 2)
}

// A partition under reassignment is waited for, then skipped with the reason; nothing is
// changed. The reassignment is real: a replica added to a throttled partition with data.
func TestPreferredLeaderWaitsForReassignment(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	topic := slowReassignment(t, env)
	before := state(t, f, topic)
	if !before[0].Reassigning() {
		t.Fatalf("partition is not being reassigned: %+v", before[0])
	}
	// The partition keeps moving under the foreign reassignment, so "unchanged" is
	// checked where it is decided: the worker sent no change to the cluster.
	writes := f.requests.get(keyAlterPartitionReassignment) + f.requests.get(keyElectLeaders)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 2}))
	if res.Status != events.StatusFailed || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "under reassignment (adding [3]") {
		t.Fatalf("result %s %q %+v, want failed: under reassignment", res.Status, res.Error, res.Skipped)
	}
	if n := f.requests.get(keyAlterPartitionReassignment) + f.requests.get(keyElectLeaders) - writes; n != 0 {
		t.Fatalf("the worker sent %d reassignment or election requests for a partition it skipped", n)
	}
}

// slowReassignment starts, on the kraft cluster, a reassignment that stays in progress
// for the rest of the test: a replica added to a partition with data, throttled to a
// crawl on both sides. Everything is undone when the test ends.
func slowReassignment(t *testing.T, env *testenv.Env) string {
	t.Helper()
	env.LockBrokerThrottles(t)
	cl := env.Kafka(t, "kraft", kgo.ProducerBatchMaxBytes(1<<20))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "slow")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, map[string]string{
		// Only this topic's copy to broker 3 is throttled, to a crawl, on both sides.
		"follower.replication.throttled.replicas": "0:3",
		"leader.replication.throttled.replicas":   "0:1,0:2",
	})
	value := make([]byte, 100<<10)
	for range 20 {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The rate applies only to replicas listed as throttled, so other tests are unaffected.
	set := func(v *string) {
		op := kadm.SetConfig
		if v == nil {
			op = kadm.DeleteConfig
		}
		resp, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{
			{Op: op, Name: "follower.replication.throttled.rate", Value: v},
			{Op: op, Name: "leader.replication.throttled.rate", Value: v},
		}, 1, 2, 3)
		if err == nil {
			for _, r := range resp {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("broker 3 throttle: %v", err)
		}
	}
	set(kadm.StringPtr("1024"))
	t.Cleanup(func() { set(nil) })
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, []int32{1, 2, 3})
	if _, err := adm.AlterPartitionAssignments(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel := kadm.AlterPartitionAssignmentsReq{}
		cancel.CancelAssign(topic, 0)
		_, _ = adm.AlterPartitionAssignments(context.Background(), cancel)
	})
	return topic
}
