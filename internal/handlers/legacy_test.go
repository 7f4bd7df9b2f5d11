package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The tests of this file run on the legacy cluster of the stack: Kafka 2.3.1 in ZooKeeper
// mode, whose brokers have no AlterPartitionReassignments or ListPartitionReassignments
// (2.4), hide their throttle rates from DescribeConfigs (KAFKA-9625), and have ElectLeaders
// (2.2) and IncrementalAlterConfigs (2.3). Every change goes through the ZooKeeper paths.

// A preferred-leader change with auto (zk-reassign on the legacy cluster, api on the
// others) and with zk-nudge on the legacy cluster: the result names the strategy that ran,
// lists exactly what a fresh read shows changed, and nothing is left.
func TestLegacyPreferredLeader(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	for _, tc := range []struct {
		cluster string
		asked   kafka.Strategy
		want    kafka.Strategy
	}{
		{"legacy", kafka.StrategyAuto, kafka.StrategyZKReassign},
		{"legacy", kafka.StrategyZKNudge, kafka.StrategyZKNudge},
		{"local", kafka.StrategyAuto, kafka.StrategyAPI},
		{"kraft", kafka.StrategyAuto, kafka.StrategyAPI},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.cluster, tc.asked), func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			f.start("worker-1")
			cl := env.Kafka(t, tc.cluster)
			topic := testenv.Name(t, "pl")
			testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
			before := state(t, f, topic)
			res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{
				"topic": topic, "partitions": []int{0, 1}, "preferred_leader": 3, "strategy": string(tc.asked)}))
			if res.Status != events.StatusSucceeded || res.Strategy != string(tc.want) || len(res.Changes) != 2 {
				t.Fatalf("result %s via %q (%s), %d changes: want succeeded via %s with 2 changes", res.Status, res.Strategy, res.Error, len(res.Changes), tc.want)
			}
			if res.ControllerFailover != (tc.want == kafka.StrategyZKNudge) {
				t.Errorf("controller_failover %v via %s", res.ControllerFailover, res.Strategy)
			}
			env.CheckOutcome(t, tc.cluster, cl, res, topic, before, func(p model.Partition) bool {
				return p.Partition < 2 && p.Replicas[0] == 3 && p.Leader == 3
			}, true)
			f.noLeftovers([]string{topic}, nil, "")
		})
	}
}

// A broker-overloaded shed on the legacy cluster: every leadership of the broker moves to
// an in-sync replica, through /admin/reassign_partitions and ElectLeaders.
func TestLegacyBrokerOverloaded(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	f := newFleet(t, env, "legacy")
	f.start("worker-1")
	cl := env.Kafka(t, "legacy")
	topic := testenv.Name(t, "shed")
	testenv.CreateTopic(t, cl, topic, [][]int32{{2, 1, 3}, {2, 3, 1}, {2, 1, 3}, {2, 3, 1}}, nil)
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeBrokerOverloaded, rcData{"broker": 2, "topics": []string{topic}, "reason": "test"}))
	if res.Status != events.StatusSucceeded || res.Strategy != string(kafka.StrategyZKReassign) || len(res.Changes) != 4 {
		t.Fatalf("result %s via %q (%s), %d changes: want succeeded via zk-reassign with 4", res.Status, res.Strategy, res.Error, len(res.Changes))
	}
	env.CheckOutcome(t, "legacy", cl, res, topic, before, func(p model.Partition) bool {
		return p.Leader != 2 && p.Replicas[0] == p.Leader
	}, true)
	f.noLeftovers([]string{topic}, nil, "")
}

// copySample is what a sampler saw at one moment of a legacy copy.
type copySample struct {
	at        time.Time
	listed    bool // /admin/reassign_partitions lists a partition of the topic
	throttled bool // every throttle the copy needs holds our value
}

// sampleCopy reads, every 50ms until stop is called, whether /admin/reassign_partitions
// lists a partition of topic and whether the throttles of a copy to broker into holds
// rate: its follower rate and the topic's follower list naming it for each partition.
// Both are read from ZooKeeper, where they live (the brokers of 2.3 hide the rates).
func sampleCopy(t *testing.T, env *testenv.Env, topic string, partitions int, into int32, rate string) (stop func() []copySample) {
	t.Helper()
	conn := env.ZooKeeper(t)
	chroot := stack.LegacyChroot
	get := func(p string) *kafka.ConfigZnode {
		data, _, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return kafka.NewConfigZnode()
		}
		if err != nil {
			t.Error(err)
			return kafka.NewConfigZnode()
		}
		z, err := kafka.DecodeConfigZnode(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return kafka.NewConfigZnode()
		}
		return z
	}
	var (
		mu      sync.Mutex
		samples []copySample
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s := copySample{at: time.Now()}
			targets, err := kafka.ReadZKReassignments(conn, chroot)
			if err != nil {
				t.Error(err)
				return
			}
			for tp := range targets {
				s.listed = s.listed || tp.Topic == topic
			}
			follower := get(fmt.Sprintf("%s/config/brokers/%d", chroot, into)).Get(kafka.FollowerThrottledRate)
			list := get(chroot + "/config/topics/" + topic).Get(kafka.FollowerThrottledReplicas)
			s.throttled = follower != nil && *follower == rate && list != nil
			for p := range partitions {
				s.throttled = s.throttled && slices.Contains(strings.Split(*list, ","), fmt.Sprintf("%d:%d", p, into))
			}
			mu.Lock()
			samples = append(samples, s)
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() []copySample {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(samples)
	}
}

// Replication factor 2 -> 3 -> 2 of a topic with data on the legacy cluster, the raise
// throttled. The raise is finished when /admin/reassign_partitions no longer lists its
// partitions, not when the metadata shows the new replicas (it does from the start): the
// throttles, read from ZooKeeper while it copies, hold whenever the znode lists them, and
// come off only after. Someone else's throttle on another key of a broker we throttle stays.
// Every record is readable after each step, and each result is what a fresh read shows.
func TestLegacyReplicationFactorThrottled(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "legacy")
	f.start("worker-1")
	cl := env.Kafka(t, "legacy", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 1}}, nil)
	testenv.Produce(t, cl, topic, 2, 60, 50_000) // 3 MB a partition
	// Broker 3 receives the new replicas: we set its follower rate. Its leader rate is
	// someone else's, set before.
	theirs := "7777777"
	setBrokerConfig(t, adm, 3, kafka.LeaderThrottledRate, &theirs)
	t.Cleanup(func() { setBrokerConfig(t, adm, 3, kafka.LeaderThrottledRate, nil) })
	rate := strconv.Itoa(ourRate)
	before := state(t, f, topic)

	stop := sampleCopy(t, env, topic, 2, 3, rate)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, map[string]any{"throttle_bytes_per_sec": ourRate})))
	samples := stop()
	if res.Status != events.StatusSucceeded || res.Strategy != string(kafka.StrategyZKReassign) || len(res.Changes) != 2 {
		t.Fatalf("raise: %s via %q (%s), %d changes: want succeeded via zk-reassign with 2", res.Status, res.Strategy, res.Error, len(res.Changes))
	}
	var first, last time.Time
	for _, s := range samples {
		if !s.listed {
			continue
		}
		if !s.throttled {
			t.Fatalf("at %s /admin/reassign_partitions listed the copy, but our throttles were not all set", s.at.Format(time.StampMilli))
		}
		if first.IsZero() {
			first = s.at
		}
		last = s.at
	}
	// Unthrottled, 3 MB copy on loopback in well under a second.
	if copied := last.Sub(first); first.IsZero() || copied < 2*time.Second {
		t.Fatalf("the copy was listed for %s (%d samples): the throttle did not hold it", copied, len(samples))
	}
	if s := samples[len(samples)-1]; s.listed || s.throttled {
		t.Fatalf("after the result: listed %v, throttled %v", s.listed, s.throttled)
	}
	env.CheckOutcome(t, "legacy", cl, res, topic, before, grew(before), false)
	waitFactor(t, f, topic, 3)
	if got := env.BrokerThrottles(t, "legacy", cl)["3/"+kafka.LeaderThrottledRate]; got != theirs {
		t.Errorf("broker 3's leader rate (someone else's) = %q, want %q kept", got, theirs)
	}
	if len(res.ThrottlesKept) != 0 {
		t.Errorf("throttles kept %+v: nobody changed ours", res.ThrottlesKept)
	}
	countRecords(t, env, "legacy", topic, 2, 60)
	f.noLeftovers([]string{topic}, nil, rate)

	before = state(t, f, topic)
	res = f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 2, nil)))
	if res.Status != events.StatusSucceeded || res.Strategy != string(kafka.StrategyZKReassign) || len(res.Changes) != 2 {
		t.Fatalf("lower: %s via %q (%s), %d changes", res.Status, res.Strategy, res.Error, len(res.Changes))
	}
	env.CheckOutcome(t, "legacy", cl, res, topic, before, func(p model.Partition) bool {
		return len(p.Replicas) == 2 && slices.Contains(p.Replicas, before[p.Partition].Leader)
	}, false)
	waitFactor(t, f, topic, 2)
	countRecords(t, env, "legacy", topic, 2, 60)
	f.noLeftovers([]string{topic}, nil, rate)
}

// waitFactor waits until every partition of topic has rf replicas, all in sync.
func waitFactor(t *testing.T, f *fleet, topic string, rf int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, p := range state(t, f, topic) {
			if len(p.Replicas) != rf || len(p.ISR) != rf || p.Reassigning() {
				return fmt.Errorf("%s: replicas %v, isr %v, reassigning %v; want %d in sync", p.TopicPartition, p.Replicas, p.ISR, p.Reassigning(), rf)
			}
		}
		return nil
	})
}

// legacySlowReassignment starts, by hand as an operator would, a reassignment on the legacy
// cluster that crawls (its copy throttled to 1 kB/s): it writes /admin/reassign_partitions.
// It returns the topic whose partition 0 is being reassigned to [1 2 3]. At the end the
// throttle is lifted and the test waits until the controller has finished it (before 2.4
// nobody can cancel it).
func legacySlowReassignment(t *testing.T, env *testenv.Env) string {
	t.Helper()
	cl := env.Kafka(t, "legacy", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "slow")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	testenv.Produce(t, cl, topic, 1, 80, 50_000)
	// Only this topic's copy to broker 3 is throttled (the rates apply to listed
	// replicas). Set after the creation: a 2.3 broker applies a topic's throttled lists
	// when it is told of a change, not from the configs a topic is created with.
	resp, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{
		{Name: kafka.FollowerThrottledReplicas, Value: kadm.StringPtr("0:3")},
		{Name: kafka.LeaderThrottledReplicas, Value: kadm.StringPtr("0:1,0:2")},
	}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	crawl := "1024"
	rates := func(v *string) {
		for _, b := range []int32{1, 2} {
			setBrokerConfig(t, adm, b, kafka.LeaderThrottledRate, v)
		}
		setBrokerConfig(t, adm, 3, kafka.FollowerThrottledRate, v)
	}
	t.Cleanup(func() { rates(nil) })
	rates(&crawl)
	// The brokers apply the rates a moment after the write (they show only that one is
	// set: KAFKA-9625): a copy started before would run unthrottled.
	testenv.Eventually(t, 30*time.Second, func() error {
		rcs, err := adm.DescribeBrokerConfigs(t.Context(), 1, 2, 3)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			key := kafka.LeaderThrottledRate
			if rc.Name == "3" {
				key = kafka.FollowerThrottledRate
			}
			if !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == key && c.Source == kmsg.ConfigSourceDynamicBrokerConfig }) {
				return fmt.Errorf("broker %s does not show its %s yet", rc.Name, key)
			}
		}
		return nil
	})
	conn := env.ZooKeeper(t)
	p := kafka.ReassignPath(stack.LegacyChroot)
	data, err := kafka.EncodeReassignZnode(map[model.TopicPartition][]int32{{Topic: topic, Partition: 0}: {1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v (another reassignment runs on the legacy cluster?)", p, err)
	}
	t.Cleanup(func() {
		// Lift the crawl and let the controller finish it before the topic is deleted (a
		// 2.3 controller deleting a topic under reassignment can leave it in the znode for
		// good, blocking every later reassignment until a controller failover).
		rates(nil)
		// The test's context is over: wait on the clock.
		for end := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			ok, _, err := conn.Exists(p)
			if err == nil && !ok {
				return
			}
			if time.Now().After(end) {
				t.Errorf("%s still exists (%v): the hand-made reassignment did not finish", p, err)
				return
			}
		}
	})
	// The controller has taken it up: the metadata shows the target.
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := testenv.Partitions(t, cl, topic)[0].Replicas; !slices.Equal(got, []int32{1, 2, 3}) {
			return fmt.Errorf("replicas %v, the controller has not started the reassignment", got)
		}
		return nil
	})
	return topic
}

// A reassignment started by hand in /admin/reassign_partitions: a replication-factor
// change waits for it (the harness's foreign_wait, 5s), then refuses, naming it, and
// changes nothing. Without ListPartitionReassignments (2.4) the worker reads the znode.
func TestLegacyReplicationFactorWaitsForForeignReassignment(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "legacy")
	f.start("worker-1")
	slow := legacySlowReassignment(t, env)
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, env.Kafka(t, "legacy"), topic, [][]int32{{1, 2}}, nil)
	before := state(t, f, topic)
	start := time.Now()
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil)))
	waited := time.Since(start)
	want := fmt.Sprintf("refusing to start: 1 reassignments started by someone else are running: %s-0 (to [1 2 3] (/admin/reassign_partitions))", slow)
	if res.Status != events.StatusFailed || res.Error != want || res.Strategy != string(kafka.StrategyZKReassign) {
		t.Fatalf("result %s via %q: %q\nwant failed via zk-reassign: %q", res.Status, res.Strategy, res.Error, want)
	}
	if waited < 5*time.Second {
		t.Errorf("refused after %s, before the foreign_wait of 5s", waited)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: %+v -> %+v", before, after)
	}
	if p := state(t, f, slow)[0]; !p.Reassigning() {
		t.Fatalf("the hand-made reassignment is gone: %+v", p)
	}
	f.noLeftovers([]string{topic}, nil, "")
}

// A throttled raise that outlives its timeout on the legacy cluster: Kafka before 2.4
// cannot cancel it. The result is failed at the timeout, naming the reassignment still
// running, with no change listed; the worker, still holding the lock, keeps the journal
// entry (step awaiting-reassignments) and the throttles while the znode lists the copy,
// and puts the throttles back, and deletes the entry, once it has ended. The partition
// ends as asked: the copy finished by itself.
func TestLegacyReplicationFactorTimeoutLeavesTheCopyRunning(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "legacy")
	f.start("worker-1")
	topic := filled(t, env, "legacy", [][]int32{{1, 2}}, 3_000_000, nil)
	before := state(t, f, topic)
	rate := strconv.Itoa(ourRate)
	stop := sampleCopy(t, env, topic, 1, 3, rate)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, map[string]any{"throttle_bytes_per_sec": ourRate, "timeout": "3s"})))
	want := fmt.Sprintf("timeout after 3s; 1 reassignments still running, which Kafka before 2.4 cannot cancel (%s-0)", topic)
	if res.Status != events.StatusFailed || !strings.HasPrefix(res.Error, want) || !strings.HasSuffix(res.Error, "0 of 1 partitions finished") || len(res.Changes) != 0 {
		t.Fatalf("result %s %q, changes %v\nwant failed: %q…; 0 of 1 partitions finished, no change", res.Status, res.Error, res.Changes, want)
	}
	// Right after the result: the copy runs, the entry and the throttles stay.
	rec, err := journal.New(f.js).Get(t.Context(), f.alias)
	if err != nil || rec == nil || rec.Step != journal.StepAwaiting || len(rec.Throttles) == 0 {
		t.Fatalf("journal after the result: %+v (%v), want the entry awaiting the copy, with its throttles", rec, err)
	}
	// Then it ends by itself, and the worker restores the throttles and closes the entry.
	testenv.Eventually(t, 2*time.Minute, func() error {
		if rec, err := journal.New(f.js).Get(t.Context(), f.alias); err != nil {
			return err
		} else if rec != nil && rec.Open() {
			return fmt.Errorf("journal entry still there: step %s", rec.Step)
		}
		return nil
	})
	samples := stop()
	listed := 0
	for _, s := range samples {
		if s.listed {
			listed++
			if !s.throttled {
				t.Fatalf("at %s the znode listed the copy but our throttles were not all set", s.at.Format(time.StampMilli))
			}
		}
	}
	if listed == 0 || samples[len(samples)-1].listed || samples[len(samples)-1].throttled {
		t.Fatalf("%d samples listed the copy; the last: %+v", listed, samples[len(samples)-1])
	}
	// As asked, by the copy that ran to its end after the result.
	waitFactor(t, f, topic, 3)
	if p := state(t, f, topic)[0]; !grew(before)(p) {
		t.Fatalf("after the copy: %v, want %v and one more", p.Replicas, before[0].Replicas)
	}
	f.noLeftovers([]string{topic}, nil, rate)
}

// The worker awaiting a copy that Kafka 2.3 cannot cancel is stopped (SIGTERM, a rolling
// deploy) before the copy ends. Its event's result is stored, but the event is not
// acknowledged: it is delivered again, and the worker that takes it waits for the copy, the
// lock held, then restores the throttles and closes the journal entry, with no other event
// of the cluster needed. (The stopping worker acknowledged the event before: the throttles
// stayed until some later event of the cluster came, days later on a quiet cluster.)
func TestLegacyStopWhileAwaitingTheCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "legacy")
	awaiting := onStep(t, operation.StepAwaitingReassignments)
	f.hook = awaiting.hook
	w1 := f.startWith("worker-1", workerOpts{})
	topic := filled(t, env, "legacy", [][]int32{{1, 2}}, 3_000_000, nil)
	before := state(t, f, topic)
	rate := strconv.Itoa(ourRate)
	stop := sampleCopy(t, env, topic, 1, 3, rate)
	ev := f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, map[string]any{"throttle_bytes_per_sec": ourRate, "timeout": "3s"}))
	result := f.publish(ev)
	res := wait(t, result, 3*time.Minute)
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "which Kafka before 2.4 cannot cancel") {
		t.Fatalf("result %s %q, want failed, the copy left running", res.Status, res.Error)
	}
	awaiting.wait(t, time.Minute)
	awaiting.release()
	w1.stop()
	if rec, err := journal.New(f.js).Get(t.Context(), f.alias); err != nil || rec == nil || rec.Step != journal.StepAwaiting {
		t.Fatalf("journal after the stop: %+v (%v), want the entry awaiting the copy", rec, err)
	}

	f.start("worker-2")
	testenv.Eventually(t, 3*time.Minute, func() error {
		if rec, err := journal.New(f.js).Get(t.Context(), f.alias); err != nil {
			return err
		} else if rec != nil && rec.Open() {
			return fmt.Errorf("journal entry still open: step %s", rec.Step)
		}
		return nil
	})
	samples := stop()
	for _, s := range samples {
		if s.listed && !s.throttled {
			t.Fatalf("at %s the znode listed the copy but our throttles were not all set", s.at.Format(time.StampMilli))
		}
	}
	if last := samples[len(samples)-1]; last.listed || last.throttled {
		t.Fatalf("the last sample: %+v", last)
	}
	waitFactor(t, f, topic, 3)
	if p := state(t, f, topic)[0]; !grew(before)(p) {
		t.Fatalf("after the copy: %v, want %v and one more", p.Replicas, before[0].Replicas)
	}
	if stored := f.stored(ev.ID); stored.Status != events.StatusFailed || stored.Worker != "worker-1" {
		t.Errorf("stored result %s by %s, want worker-1's failed one, once", stored.Status, stored.Worker)
	}
	f.noLeftovers([]string{topic}, nil, rate)
}
