package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// lockFor takes a real cluster lock in the stack's ZooKeeper; the backend's ZooKeeper
// writes are fenced by it and share its connection (one ensemble).
func lockFor(t *testing.T) (*locks.Session, *locks.Held) {
	t.Helper()
	sess, err := locks.Connect(locks.SessionConfig{Servers: []string{stack.ZooKeeperAddr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	lk, err := locks.New(sess, locks.Config{Root: "/" + testenv.Name(t, "locks"), Worker: "test"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := lk.Acquire(t.Context(), "local", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	return sess, held
}

func backend(t *testing.T, env *testenv.Env, cluster string, strategy kafka.Strategy) kafka.Reorderer {
	t.Helper()
	cl := env.Kafka(t, cluster)
	caps, err := kafka.Probe(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if strategy == kafka.StrategyAPI {
		return kafka.NewAPIBackend(cl)
	}
	sess, held := lockFor(t)
	b, err := kafka.NewZKBackend(strategy, kafka.ZKConfig{Conn: sess.Conn(), Chroot: stack.KafkaChroot, Writer: held, Client: cl, Caps: caps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type strategyCase struct {
	cluster  string
	strategy kafka.Strategy
}

func TestReorderAndElect(t *testing.T) {
	testReorderAndElect(t, testenv.Get(t), []strategyCase{
		{"local", kafka.StrategyAPI},
		{"local", kafka.StrategyZKReassign},
		{"kraft", kafka.StrategyAPI},
	})
}

// zk-nudge fails the controller over: a cluster-wide disturbance, so it runs alone.
func TestReorderAndElectZKNudge(t *testing.T) {
	testReorderAndElect(t, testenv.GetExclusive(t), []strategyCase{{"local", kafka.StrategyZKNudge}})
}

func testReorderAndElect(t *testing.T, env *testenv.Env, cases []strategyCase) {
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s", tc.cluster, tc.strategy), func(t *testing.T) {
			cl := env.Kafka(t, tc.cluster)
			topic := testenv.Name(t, "reorder")
			testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
			var topicID any
			if tc.cluster == "local" {
				z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), stack.KafkaChroot, topic)
				if err != nil {
					t.Fatal(err)
				}
				topicID = z.Field("topic_id")
			}
			b := backend(t, env, tc.cluster, tc.strategy)
			// Swap broker 3 to the head of partition 0 ([1,2,3] -> [3,2,1]) and broker 1 to
			// the head of partition 1 ([2,3,1] -> [1,3,2]); leave partition 2 alone.
			orders := map[kafka.TopicPartition][]int32{
				{Topic: topic, Partition: 0}: {3, 2, 1},
				{Topic: topic, Partition: 1}: {1, 3, 2},
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			if err := b.Reorder(ctx, orders); err != nil {
				t.Fatalf("reorder: %v", err)
			}
			t.Logf("reorder took %s", time.Since(start))
			start = time.Now()
			res, err := b.ElectPreferred(ctx, []kafka.TopicPartition{{Topic: topic, Partition: 0}, {Topic: topic, Partition: 1}})
			t.Logf("election took %s", time.Since(start))
			if err != nil {
				t.Fatalf("elect: %v", err)
			}
			for tp, err := range res {
				if err != nil {
					t.Errorf("elect %s: %v", tp, err)
				}
			}
			want := [][]int32{{3, 2, 1}, {1, 3, 2}, {3, 1, 2}}
			testenv.Eventually(t, 30*time.Second, func() error {
				snap, err := kafka.ReadSnapshot(t.Context(), cl, topic)
				if err != nil {
					return err
				}
				for p, w := range want {
					got := snap.Topics[topic][p]
					if !slices.Equal(got.Replicas, w) || got.Leader != w[0] {
						return fmt.Errorf("partition %d: replicas %v leader %d, want %v led by %d", p, got.Replicas, got.Leader, w, w[0])
					}
				}
				return nil
			})
			if tc.cluster != "local" {
				return
			}
			z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), stack.KafkaChroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			for p, w := range want {
				if got, _ := z.Replicas(int32(p)); !slices.Equal(got, w) {
					t.Errorf("topic znode partition %d = %v, want %v", p, got, w)
				}
			}
			if got := z.Field("topic_id"); got == nil || got != topicID {
				t.Errorf("topic_id %v after %s, was %v", got, tc.strategy, topicID)
			}
			if fo := b.ControllerFailover(); fo != (tc.strategy == kafka.StrategyZKNudge) {
				t.Errorf("ControllerFailover() = %v for %s", fo, tc.strategy)
			}
		})
	}
}

func TestElectPreferredRefusesEmptyList(t *testing.T) {
	env := testenv.Get(t)
	for _, s := range []kafka.Strategy{kafka.StrategyAPI, kafka.StrategyZKReassign} {
		b := backend(t, env, "local", s)
		if _, err := b.ElectPreferred(t.Context(), nil); !errors.Is(err, kafka.ErrEmptyElection) {
			t.Errorf("%s: ElectPreferred(nil) = %v, want ErrEmptyElection", s, err)
		}
	}
}

func TestReorderRejectsChangeOfReplicaSet(t *testing.T) {
	env := testenv.Get(t)
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "reorder")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}}, nil)
	for _, s := range []kafka.Strategy{kafka.StrategyAPI, kafka.StrategyZKReassign, kafka.StrategyZKNudge} {
		b := backend(t, env, "local", s)
		err := b.Reorder(t.Context(), map[kafka.TopicPartition][]int32{{Topic: topic, Partition: 0}: {4, 2, 1}})
		if !errors.Is(err, kafka.ErrNotReorder) {
			t.Errorf("%s: reorder to another set = %v, want ErrNotReorder", s, err)
		}
	}
	if got := testenv.Assignment(t, env.Admin(t, "local"), topic); !slices.Equal(got[0], []int32{1, 2, 3}) {
		t.Fatalf("assignment changed to %v", got[0])
	}
}
