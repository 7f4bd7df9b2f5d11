package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

type rcData = map[string]any

// state reads every partition's replicas and leader, and its reassignment (before Kafka
// 2.4: from /admin/reassign_partitions).
func state(t *testing.T, f *fleet, topic string) []model.Partition {
	t.Helper()
	return f.env.Partitions(t, f.real, f.env.Kafka(t, f.real), topic)
}

func sameState(a, b []model.Partition) bool {
	return slices.EqualFunc(a, b, func(x, y model.Partition) bool {
		return slices.Equal(x.Replicas, y.Replicas) && x.Leader == y.Leader
	})
}

type strategyCase struct {
	cluster  string
	strategy kafka.Strategy
}

func TestPreferredLeaderEachStrategy(t *testing.T) {
	testPreferredLeaderStrategies(t, testenv.Get(t), []strategyCase{
		{"local", kafka.StrategyAPI},
		{"local", kafka.StrategyZKReassign},
		{"kraft", kafka.StrategyAPI},
	})
}

// zk-nudge fails the controller over: a cluster-wide disturbance, so it runs alone.
func TestPreferredLeaderZKNudge(t *testing.T) {
	testPreferredLeaderStrategies(t, testenv.GetExclusive(t), []strategyCase{{"local", kafka.StrategyZKNudge}})
}

func testPreferredLeaderStrategies(t *testing.T, env *testenv.Env, cases []strategyCase) {
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s", tc.cluster, tc.strategy), func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			f.start("worker-1")
			topic := testenv.Name(t, "pl")
			testenv.CreateTopic(t, env.Kafka(t, tc.cluster), topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
			var topicID any
			if tc.cluster == "local" {
				z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), stack.KafkaChroot, topic)
				if err != nil {
					t.Fatal(err)
				}
				topicID = z.Field("topic_id")
			}
			elections, retried := f.requests.get(keyElectLeaders), f.retries("elect preferred leaders")

			res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{
				"topic": topic, "partitions": []int{0, 1}, "preferred_leader": 3, "strategy": string(tc.strategy), "reason": "test"}))
			if res.Status != events.StatusSucceeded || res.Error != "" {
				t.Fatalf("result %s: %s (%+v)", res.Status, res.Error, res)
			}
			if res.Strategy != string(tc.strategy) || res.ControllerFailover != (tc.strategy == kafka.StrategyZKNudge) || res.Worker != "worker-1" || res.Attempt != 1 || res.Reason != "test" {
				t.Errorf("result header %+v", res)
			}
			want := []plan.Change{
				{TopicPartition: model.TopicPartition{Topic: topic, Partition: 0}, ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{3, 2, 1}, LeaderBefore: 1, LeaderAfter: 3},
				{TopicPartition: model.TopicPartition{Topic: topic, Partition: 1}, ReplicasBefore: []int32{2, 3, 1}, ReplicasAfter: []int32{3, 2, 1}, LeaderBefore: 2, LeaderAfter: 3},
			}
			if d := testenv.DiffChanges(res.Changes, want); d != "" {
				t.Errorf("changes differ:\n%s", d)
			}
			// Brokers learn the new state from the controller a moment apart: every broker
			// this test asks must come to say so.
			testenv.Eventually(t, 10*time.Second, func() error {
				got := state(t, f, topic)
				for p, w := range [][]int32{{3, 2, 1}, {3, 2, 1}, {3, 1, 2}} {
					if !slices.Equal(got[p].Replicas, w) || got[p].Leader != w[0] {
						return fmt.Errorf("partition %d: replicas %v leader %d, want %v led by %d", p, got[p].Replicas, got[p].Leader, w, w[0])
					}
				}
				return nil
			})
			// Two partitions, one batched election request per attempt: every strategy
			// elects through ElectLeaders where the brokers have it (2.2+). An attempt is
			// retried when its request gets no answer (zk-nudge: a controller that resigned
			// in the failover may never answer it).
			attempts := 1 + f.retries("elect preferred leaders") - retried
			if n := f.requests.get(keyElectLeaders) - elections; n != attempts {
				t.Errorf("%d ElectLeaders requests, want %d (one per attempt)", n, attempts)
			}
			if tc.cluster != "local" {
				return
			}
			z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), stack.KafkaChroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			for p, w := range [][]int32{{3, 2, 1}, {3, 2, 1}, {3, 1, 2}} {
				if r, _ := z.Replicas(int32(p)); !slices.Equal(r, w) {
					t.Errorf("topic znode partition %d = %v, want %v", p, r, w)
				}
			}
			if z.Field("topic_id") != topicID {
				t.Errorf("topic_id changed from %v to %v", topicID, z.Field("topic_id"))
			}
		})
	}
}

func TestPreferredLeaderNoopAndAllPartitions(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{4, 1}, {1, 2}, {2, 4}}, nil)

	// partitions omitted: every partition with broker 4; partition 1 is listed as skipped.
	res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 4}))
	if res.Status != events.StatusPartial {
		t.Fatalf("status %s (%s), want partial", res.Status, res.Error)
	}
	if len(res.Noop) != 1 || res.Noop[0].Partition != 0 || len(res.Changes) != 1 || res.Changes[0].Partition != 2 ||
		len(res.Skipped) != 1 || res.Skipped[0].Partition != 1 || !strings.Contains(res.Skipped[0].Reason, "not a replica") {
		t.Fatalf("result %+v", res)
	}
	res = f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "partitions": []int{0, 2}, "preferred_leader": 4}))
	if res.Status != events.StatusNoop || len(res.Changes) != 0 {
		t.Fatalf("second run: %s %+v, want noop", res.Status, res)
	}
}

func TestPreferredLeaderRejections(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2}, {2, 3}}, nil)
	before := state(t, f, topic)
	good := func() *events.Envelope {
		return f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "partitions": []int{0}, "preferred_leader": 2})
	}
	for _, tc := range []struct {
		name    string
		subject string
		body    func(e *events.Envelope) []byte
		status  events.Status
		want    string
	}{
		{"broker not a replica", "", func(e *events.Envelope) []byte {
			return mustJSON(t, withData(t, e, rcData{"topic": topic, "partitions": []int{1}, "preferred_leader": 1}))
		}, events.StatusRejected, "broker 1 is not a replica of " + topic + "-1"},
		{"unknown topic", "", func(e *events.Envelope) []byte {
			return mustJSON(t, withData(t, e, rcData{"topic": topic + "-nope", "preferred_leader": 1}))
		}, events.StatusRejected, "does not exist"},
		{"partition out of range", "", func(e *events.Envelope) []byte {
			return mustJSON(t, withData(t, e, rcData{"topic": topic, "partitions": []int{7}, "preferred_leader": 1}))
		}, events.StatusRejected, "partition 7 of topic"},
		{"unknown cluster", events.Subject("unknown"+f.alias, events.TypeReplicaChangeRequested), func(e *events.Envelope) []byte {
			return mustJSON(t, e)
		}, events.StatusRejected, `unknown cluster "unknown` + f.alias},
		{"malformed JSON", "", func(e *events.Envelope) []byte {
			return []byte(`{"specversion":"1.0","id":"` + e.ID + `",`)
		}, events.StatusRejected, "not valid JSON"},
		{"unknown field", "", func(e *events.Envelope) []byte {
			return mustJSON(t, withData(t, e, rcData{"topic": topic, "preferred_leader": 2, "leader": 2}))
		}, events.StatusRejected, `data: unknown field "leader"`},
		{"subject/type mismatch", events.Subject(f.alias, events.TypeBrokerOverloaded), func(e *events.Envelope) []byte {
			return mustJSON(t, e)
		}, events.StatusRejected, "does not match the subject's type"},
		{"expired", "", func(e *events.Envelope) []byte {
			e.ExpiresAt = time.Now().Add(-time.Minute)
			return mustJSON(t, e)
		}, events.StatusExpired, "expired at"},
		{"negative throttle", "", func(e *events.Envelope) []byte {
			return mustJSON(t, withData(t, e, rcData{"topic": topic, "preferred_leader": 2, "throttle_bytes_per_sec": -1}))
		}, events.StatusRejected, "data.throttle_bytes_per_sec: -1: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := good()
			subject := tc.subject
			if subject == "" {
				subject = events.Subject(f.alias, e.Type)
			}
			// The message id lets the worker name even an unreadable event.
			res := wait(t, f.publishRaw(subject, e.ID, tc.body(e), jetstream.WithMsgID(e.ID)), time.Minute)
			if res.Status != tc.status || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("result %s %q, want %s containing %q", res.Status, res.Error, tc.status, tc.want)
			}
			if len(res.Changes) != 0 {
				t.Fatalf("a rejected event lists changes: %+v", res.Changes)
			}
		})
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: before %+v, after %+v", before, after)
	}
}

func TestPreferredLeaderDryRun(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "kraft"), topic, [][]int32{{1, 2, 3}}, nil)
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 3, "dry_run": true}))
	if res.Status != events.StatusPlanned || len(res.Changes) != 1 || !slices.Equal(res.Changes[0].ReplicasAfter, []int32{3, 2, 1}) {
		t.Fatalf("dry run result %+v", res)
	}
	// A strategy this cluster cannot do (no ZooKeeper in KRaft) is rejected.
	res = f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 3, "strategy": "zk-nudge"}))
	if res.Status != events.StatusRejected || !strings.Contains(res.Error, "needs the cluster's zookeeper") {
		t.Fatalf("zk-nudge on KRaft: %s %q", res.Status, res.Error)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: %+v -> %+v", before, after)
	}
}

func TestSameEventIDRunsOnce(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2, 3}}, nil)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 2, "strategy": "api"})
	first := f.run(e)
	if first.Status != events.StatusSucceeded {
		t.Fatalf("first run %s: %s", first.Status, first.Error)
	}
	reorders, elections := f.requests.get(keyAlterPartitionReassignment), f.requests.get(keyElectLeaders)
	// Published again without a JetStream message id, so the stream stores it and the
	// worker must recognise the id itself.
	second := f.run(e)
	if !second.Replayed || second.Status != first.Status || second.StartedAt != first.StartedAt {
		t.Fatalf("second delivery: %+v, want a replay of %+v", second, first)
	}
	if d := testenv.DiffChanges(second.Changes, first.Changes); d != "" {
		t.Fatalf("the replay's changes are not the first result's:\n%s", d)
	}
	if f.requests.get(keyAlterPartitionReassignment) != reorders || f.requests.get(keyElectLeaders) != elections {
		t.Fatal("the second delivery sent admin requests: it ran twice")
	}
}

func TestTwoWorkersNeverOverlap(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-a")
	f.start("worker-b")
	var chans []<-chan *events.Result
	for i := range 6 {
		topic := testenv.Name(t, fmt.Sprintf("pl%d", i))
		testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
		chans = append(chans, f.publish(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 3})))
	}
	var results []*events.Result
	workers := map[string]int{}
	for _, ch := range chans {
		r := wait(t, ch, 3*time.Minute)
		if r.Status != events.StatusSucceeded {
			t.Fatalf("result %s: %s", r.Status, r.Error)
		}
		results = append(results, r)
		workers[r.Worker]++
	}
	slices.SortFunc(results, func(a, b *events.Result) int { return a.StartedAt.Compare(b.StartedAt) })
	for i := 1; i < len(results); i++ {
		if prev, cur := results[i-1], results[i]; cur.StartedAt.Before(prev.FinishedAt) {
			t.Errorf("%s (%s, %s–%s) overlaps %s (%s, %s–%s)", cur.ID, cur.Worker, cur.StartedAt.Format(time.StampMicro), cur.FinishedAt.Format(time.StampMicro),
				prev.ID, prev.Worker, prev.StartedAt.Format(time.StampMicro), prev.FinishedAt.Format(time.StampMicro))
		}
	}
	if len(workers) != 2 {
		t.Logf("every event went to one worker (%v): the lock was not contended", workers)
	}
}

func TestPreferredLeaderOutOfISR(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 4}, {2, 4}, {1, 3}}, nil)
	env.StopBroker(t, "local", 4)
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, p := range state(t, f, topic)[:2] {
			if p.InSync(4) {
				return fmt.Errorf("broker 4 still in the ISR of %s", p.TopicPartition)
			}
		}
		return nil
	})
	res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "partitions": []int{0, 1}, "preferred_leader": 4}))
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "not in the ISR") || len(res.Skipped) != 2 {
		t.Fatalf("result %s %q %+v, want failed: not in the ISR", res.Status, res.Error, res.Skipped)
	}
	// A mix: partition 2 can move to 3, partitions 0 cannot move to 4 — but a request
	// names one broker, so mix in-ISR and out-of-ISR through "all partitions".
	res = f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": 4}))
	if res.Status != events.StatusFailed || len(res.Skipped) != 3 {
		t.Fatalf("all partitions: %s %+v", res.Status, res)
	}
}

func withData(t *testing.T, e *events.Envelope, data any) *events.Envelope {
	e.Data = mustJSON(t, data)
	return e
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := jsonMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
