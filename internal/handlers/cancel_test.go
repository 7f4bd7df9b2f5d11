package handlers_test

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// cancelScene is a replication-factor change 2 → 3 of 8 partitions at 1 MiB/s, cancelled
// once two partitions finished, with a reassignment of someone else's running on another
// topic and a throttle set by hand on broker 2.
type cancelScene struct {
	f       *fleet
	adm     *kadm.Client
	topic   string
	foreign string
	before  []model.Partition
	event   *events.Envelope
}

// cancelLarge is the size of each of the six partitions that copy slowly (the first two
// are empty, and finish at once): two of them copy to each broker, 8 MiB at 1 MiB/s, so
// that copies still run for seconds after the two empty ones finished. The records are
// random: the producer compresses its batches, and zeros would make a tiny log.
const cancelLarge = 4 << 20

func newCancelScene(t *testing.T, f *fleet) *cancelScene {
	t.Helper()
	env := f.env
	cl := env.Kafka(t, "kraft", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	s := &cancelScene{f: f, adm: kadm.NewClient(cl), topic: testenv.Name(t, "cancel"), foreign: testenv.Name(t, "foreign")}
	setBrokerConfig(t, s.adm, 2, kafka.LeaderThrottledRate, kadm.StringPtr("7777777"))
	t.Cleanup(func() { setBrokerConfig(t, s.adm, 2, kafka.LeaderThrottledRate, nil) })
	testenv.CreateTopic(t, cl, s.topic, [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}}, nil)
	value := make([]byte, 64<<10)
	_, _ = crand.Read(value) // incompressible: the producer compresses its batches
	for p := int32(2); p < 8; p++ {
		for range cancelLarge / len(value) {
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: s.topic, Partition: p, Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Someone else's topic, whose reassignment starts once ours copies (a foreign one
	// before would hold ours back): throttled by the brokers' rates, which ours sets.
	testenv.CreateTopic(t, cl, s.foreign, [][]int32{{1}}, map[string]string{
		"follower.replication.throttled.replicas": "0:3", "leader.replication.throttled.replicas": "0:1"})
	for range (2 << 20) / len(value) {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: s.foreign, Partition: 0, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s.before = state(t, f, s.topic)
	s.event = f.event(events.TypeReplicaChangeRequested, rfData(s.topic, 3, map[string]any{"throttle_bytes_per_sec": 1 << 20}))
	return s
}

// waitTwoFinished waits until two partitions have their third replica and others still copy.
func (s *cancelScene) waitTwoFinished(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		done, copying := 0, 0
		for _, p := range state(t, s.f, s.topic) {
			switch {
			case p.Reassigning():
				copying++
			case len(p.Replicas) == 3:
				done++
			}
		}
		if done < 2 || copying == 0 {
			return fmt.Errorf("%d partitions finished, %d copying", done, copying)
		}
		return nil
	})
}

// startForeign starts someone else's reassignment of the foreign topic.
func (s *cancelScene) startForeign(t *testing.T) {
	t.Helper()
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(s.foreign, 0, []int32{1, 3})
	if _, err := s.adm.AlterPartitionAssignments(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := kadm.AlterPartitionAssignmentsReq{}
		c.CancelAssign(s.foreign, 0)
		_, _ = s.adm.AlterPartitionAssignments(context.Background(), c)
	})
}

// cancel publishes the operation-cancel of the scene's event.
func (s *cancelScene) cancel(t *testing.T) <-chan *events.Result {
	t.Helper()
	return s.f.publish(s.f.event(events.TypeOperationCancel, map[string]any{"id": s.event.ID, "reason": "INC-42: stop the copy"}))
}

// check checks what the cancel left: the result cancelled, listing exactly the partitions
// that kept their third replica; the others as before, leader included; none of ours
// copying; the foreign reassignment untouched; no throttle of ours left, the hand-set one
// back.
func (s *cancelScene) check(t *testing.T, res *events.Result) {
	t.Helper()
	if res.Status != events.StatusCancelled || !strings.Contains(res.Error, "INC-42: stop the copy") {
		t.Fatalf("result %s %q, want cancelled, saying why", res.Status, res.Error)
	}
	after := state(t, s.f, s.topic)
	var kept []int32
	for i, p := range after {
		if p.Reassigning() {
			t.Errorf("%s still copying after the cancel: adding %v", p.TopicPartition, p.Adding)
		}
		b := s.before[i]
		switch {
		case len(p.Replicas) == 3:
			kept = append(kept, p.Partition)
			if !slices.Equal(p.Replicas[:2], b.Replicas) {
				t.Errorf("%s: %v, want %v and a third", p.TopicPartition, p.Replicas, b.Replicas)
			}
		case !slices.Equal(p.Replicas, b.Replicas) || p.Leader != b.Leader:
			t.Errorf("%s: replicas %v leader %d, want as before: %v leader %d", p.TopicPartition, p.Replicas, p.Leader, b.Replicas, b.Leader)
		}
	}
	var listed []int32
	for _, c := range res.Changes {
		listed = append(listed, c.Partition)
	}
	slices.Sort(listed)
	if len(kept) < 2 || !slices.Equal(listed, kept) {
		t.Errorf("the result lists %v changed; the cluster shows %v with a third replica (want at least the 2 finished)", listed, kept)
	}
	if len(kept) < len(after) && !strings.Contains(res.Note, "as before the event") {
		t.Errorf("note %q does not say which partitions are as before", res.Note)
	}
	for _, p := range state(t, s.f, s.foreign) {
		if !p.Reassigning() && !slices.Equal(p.Replicas, []int32{1, 3}) {
			t.Errorf("the foreign reassignment was touched: %s replicas %v, adding %v", p.TopicPartition, p.Replicas, p.Adding)
		}
	}
	cfgs, err := s.adm.DescribeTopicConfigs(t.Context(), s.topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfgs.On(s.topic, nil)
	for _, c := range rc.Configs {
		if (c.Key == kafka.LeaderThrottledReplicas || c.Key == kafka.FollowerThrottledReplicas) && c.MaybeValue() != "" {
			t.Errorf("%s = %q left behind after the cancel", c.Key, c.MaybeValue())
		}
	}
	assertNoBrokerThrottle(t, s.adm, map[string]string{"2/" + kafka.LeaderThrottledRate: "7777777"})
}

// quiescent waits until none of the topic's partitions copies; it returns when.
func (s *cancelScene) quiescent(t *testing.T) time.Time {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		for _, p := range state(t, s.f, s.topic) {
			if p.Reassigning() {
				return fmt.Errorf("%s still copying", p.TopicPartition)
			}
		}
		return nil
	})
	return time.Now()
}

// Cancel a running replication-factor change: the worker stops within seconds, cancels
// its copies in flight, leaves the finished partitions at RF 3 and the rest as before,
// puts every throttle back, and touches nobody else's reassignment or throttle.
func TestCancelReplicationFactorChange(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	s := newCancelScene(t, f)
	ch := f.publish(s.event)
	s.waitTwoFinished(t)
	s.startForeign(t)
	asked := time.Now()
	cch := s.cancel(t)
	res := wait(t, ch, time.Minute)
	still := s.quiescent(t)
	t.Logf("cancel → cancelled result %s, → nothing of ours copying %s", res.FinishedAt.Sub(asked).Round(time.Millisecond), still.Sub(asked).Round(time.Millisecond))
	s.check(t, res)
	if cres := wait(t, cch, time.Minute); cres.Status != events.StatusSucceeded || !strings.Contains(cres.Note, "cancelled") {
		t.Errorf("the cancel's own result: %s %q %q", cres.Status, cres.Error, cres.Note)
	}
}

// The worker running the change is killed (kill -9) before the cancel: the next worker
// takes the cancel, and the change left in the journal is rolled back, not carried on.
func TestCancelAfterTheWorkerDied(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "kraft")
	kill := f.startKillable("worker-1")
	s := newCancelScene(t, f)
	ch := f.publish(s.event)
	s.waitTwoFinished(t)
	kill()
	s.startForeign(t)
	cch := s.cancel(t)
	f.start("worker-2")
	res := wait(t, ch, 2*time.Minute)
	s.quiescent(t)
	s.check(t, res)
	if cres := wait(t, cch, time.Minute); cres.Status != events.StatusSucceeded {
		t.Errorf("the cancel's own result: %s %q %q", cres.Status, cres.Error, cres.Note)
	}
}

// An event cancelled before it runs never runs: cancelled, nothing changed; a cancel of
// an event that has a result is a noop; a cancel of itself is rejected.
func TestCancelBeforeItRunsAndAfterItEnded(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "cancel")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	before := state(t, f, topic)

	ev := f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil))
	cres := wait(t, publishCancel(f, ev.ID), time.Minute)
	if cres.Status != events.StatusSucceeded || !strings.Contains(cres.Note, "recorded") {
		t.Errorf("cancel ahead of the event: %s %q %q", cres.Status, cres.Error, cres.Note)
	}
	res := f.run(ev)
	if res.Status != events.StatusCancelled || !strings.Contains(res.Error, "cancelled before it ran, nothing changed") || len(res.Changes) != 0 {
		t.Fatalf("result %s %q %+v, want cancelled before it ran", res.Status, res.Error, res.Changes)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: %+v -> %+v", before, after)
	}
	if again := wait(t, publishCancel(f, ev.ID), time.Minute); again.Status != events.StatusNoop || !strings.Contains(again.Note, "ended already (cancelled)") {
		t.Errorf("cancel of an event that ended: %s %q", again.Status, again.Note)
	}
	self := f.event(events.TypeOperationCancel, map[string]any{})
	self.Data = []byte(`{"id":"` + self.ID + `"}`)
	if r := wait(t, f.publish(self), time.Minute); r.Status != events.StatusRejected || !strings.Contains(r.Error, "own id") {
		t.Errorf("cancel of itself: %s %q", r.Status, r.Error)
	}
}

// publishCancel publishes an operation-cancel of id and returns its result's channel.
func publishCancel(f *fleet, id string) <-chan *events.Result {
	f.t.Helper()
	return f.publish(f.event(events.TypeOperationCancel, map[string]any{"id": id}))
}

// A log-dir move cancelled mid-copy: the future replica is dropped (no -future directory
// left), the replica stays where it was, the copy throttle goes, the records are whole.
func TestCancelLogDirMove(t *testing.T) {
	f, adm, topic, cur, other := slowLogDirMove(t, "ldc")
	env := f.env
	tp := topic + "-0"
	ev := f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 0, "to_dir": other,
		"throttle_bytes_per_sec": 50_000}))
	ch := f.publish(ev)
	testenv.Eventually(t, time.Minute, func() error {
		if placement(t, adm, 1)[tp+" (future)"] == "" {
			return fmt.Errorf("%s has no future replica yet", tp)
		}
		return nil
	})
	publishCancel(f, ev.ID)
	res := wait(t, ch, time.Minute)
	if res.Status != events.StatusCancelled || !strings.Contains(res.Error, "cancelled 1 unfinished moves") || len(res.Changes) != 0 {
		t.Fatalf("result %s %q %+v, want cancelled, the move undone", res.Status, res.Error, res.Changes)
	}
	pl := placement(t, adm, 1)
	if pl[tp] != cur || pl[tp+" (future)"] != "" {
		t.Errorf("after the cancel %s is in %q (future %q), want %s and no future replica", tp, pl[tp], pl[tp+" (future)"], cur)
	}
	if got := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); got != nil {
		t.Errorf("copy throttle %q left behind", *got)
	}
	countRecords(t, env, "local", topic, 1, 100)
}

// A log-dir balance whose worker is killed (kill -9) mid-copy, then cancelled: the next
// worker rolls it back from the journal: no future replica left (no -future directory),
// the moves that finished kept and listed, the rest where they were, the copy throttle
// set by hand back, every record readable.
func TestCancelLogDirBalanceAfterTheWorkerDied(t *testing.T) {
	env := testenv.GetExclusive(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	kill := f.startKillable("worker-1")
	adm, dirs, topics := imbalance(t, env)
	before := placement(t, adm, 1)
	ev := f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"throttle_bytes_per_sec": 300_000}))
	ch := f.publish(ev)
	testenv.Eventually(t, time.Minute, func() error {
		for k := range placement(t, adm, 1) {
			if strings.HasSuffix(k, " (future)") {
				return nil
			}
		}
		return fmt.Errorf("no future replica on broker 1 yet")
	})
	kill()
	publishCancel(f, ev.ID)
	f.start("worker-2")
	res := wait(t, ch, 2*time.Minute)
	if res.Status != events.StatusCancelled || !strings.Contains(res.Error, "cancelled") {
		t.Fatalf("result %s %q, want cancelled", res.Status, res.Error)
	}
	after := placement(t, adm, 1)
	moved := map[string]bool{}
	for _, c := range res.Changes {
		moved[c.TopicPartition.String()] = true
		if after[c.TopicPartition.String()] != dirs[1] {
			t.Errorf("%s is listed as moved, and is in %q", c.TopicPartition, after[c.TopicPartition.String()])
		}
	}
	for k, dir := range after {
		if strings.HasSuffix(k, " (future)") {
			t.Errorf("%s left in %s after the cancel", k, dir)
			continue
		}
		if !moved[k] && before[k] != "" && dir != before[k] {
			t.Errorf("%s in %s after the cancel, was in %s and is not listed as moved", k, dir, before[k])
		}
	}
	if got := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); got == nil || *got != balanceTheirs {
		t.Errorf("the copy throttle set by hand is %v after the cancel, want %s", got, balanceTheirs)
	}
	for i, size := range []int{40, 25, 10} {
		countRecords(t, env, "local", topics[i], 2, size)
	}
}
