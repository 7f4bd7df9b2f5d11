package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

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
	return backendWith(t, env, cluster, strategy, func(*kafka.Capabilities) {})
}

// backendWith is backend with the probed capabilities changed by edit (to take the path
// an older cluster would).
func backendWith(t *testing.T, env *testenv.Env, cluster string, strategy kafka.Strategy, edit func(*kafka.Capabilities)) kafka.Reorderer {
	t.Helper()
	cl := env.Kafka(t, cluster)
	caps, err := kafka.Probe(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	edit(&caps)
	if strategy == kafka.StrategyAPI {
		return kafka.NewAPIBackend(cl)
	}
	sess, held := lockFor(t)
	b, err := kafka.NewZKBackend(strategy, kafka.ZKConfig{Conn: sess.Conn(), Chroot: env.Cluster(t, cluster).Chroot, Writer: held, Client: cl, Caps: caps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type strategyCase struct {
	cluster  string
	strategy kafka.Strategy
	// noElectLeaders takes the path of a cluster before Kafka 2.2: elections through
	// /admin/preferred_replica_election.
	noElectLeaders bool
}

func (c strategyCase) String() string {
	s := fmt.Sprintf("%s/%s", c.cluster, c.strategy)
	if c.noElectLeaders {
		s += "/election-znode"
	}
	return s
}

func TestReorderAndElect(t *testing.T) {
	testReorderAndElect(t, testenv.Get(t), []strategyCase{
		{"local", kafka.StrategyAPI, false},
		{"local", kafka.StrategyZKReassign, false},
		{"local", kafka.StrategyZKReassign, true},
		{"kraft", kafka.StrategyAPI, false},
		// Kafka 2.3: reorders through /admin/reassign_partitions, elections through
		// ElectLeaders (2.2+) or, as before 2.2, the election znode.
		{"legacy", kafka.StrategyZKReassign, false},
		{"legacy", kafka.StrategyZKReassign, true},
	})
}

// zk-nudge fails the controller over: a cluster-wide disturbance, so it runs alone.
func TestReorderAndElectZKNudge(t *testing.T) {
	testReorderAndElect(t, testenv.GetExclusive(t), []strategyCase{{"local", kafka.StrategyZKNudge, false}})
}

func testReorderAndElect(t *testing.T, env *testenv.Env, cases []strategyCase) {
	for _, tc := range cases {
		t.Run(tc.String(), func(t *testing.T) {
			if tc.cluster == "legacy" {
				env.LockLegacyReassignments(t)
			}
			cl := env.Kafka(t, tc.cluster)
			c := env.Cluster(t, tc.cluster)
			topic := testenv.Name(t, "reorder")
			testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
			var topicID any
			if c.Mode == stack.ModeZooKeeper {
				z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), c.Chroot, topic)
				if err != nil {
					t.Fatal(err)
				}
				topicID = z.Field("topic_id")
				if (topicID == nil) != (c.Version == stack.Kafka23Version) {
					t.Fatalf("topic_id %v in a %s topic znode", topicID, c.Version) // topic ids came with 2.8
				}
			}
			b := backendWith(t, env, tc.cluster, tc.strategy, func(caps *kafka.Capabilities) {
				caps.ElectLeaders = caps.ElectLeaders && !tc.noElectLeaders
			})
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
			if c.Mode != stack.ModeZooKeeper {
				return
			}
			z, err := kafka.ReadTopicZnode(env.ZooKeeper(t), c.Chroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			for p, w := range want {
				if got, _ := z.Replicas(int32(p)); !slices.Equal(got, w) {
					t.Errorf("topic znode partition %d = %v, want %v", p, got, w)
				}
			}
			if got := z.Field("topic_id"); got != topicID {
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

// A cluster in a ZooKeeper migration (Kafka 3.4+) whose /controller names a KRaft
// controller ignores ZooKeeper writes: both ZooKeeper strategies (reorders, elections,
// replica-set changes) and the config znodes refuse to write, and write nothing. The
// cluster is a ZooKeeper tree of the test's own, with the /controller such a controller
// writes.
func TestZKWritesRefusedUnderKRaftController(t *testing.T) {
	env := testenv.Get(t)
	conn := env.ZooKeeper(t)
	root := "/" + testenv.Name(t, "migrating")
	tree := map[string]string{
		root:                                       "",
		root + "/controller":                       `{"version":2,"brokerid":3000,"timestamp":"1796191420922","kraftControllerEpoch":7}`,
		root + "/admin":                            "",
		root + "/brokers":                          "",
		root + "/brokers/topics":                   "",
		root + "/brokers/topics/orders":            `{"version":3,"topic_id":"x","partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{}}`,
		root + "/config":                           "",
		root + "/config/changes":                   "",
		root + "/config/topics":                    "",
		root + "/config/topics/orders":             `{"version":1,"config":{}}`,
		root + "/config/brokers":                   "",
		root + "/brokers/topics/orders/partitions": "",
	}
	paths := slices.Sorted(maps.Keys(tree))
	for _, p := range paths {
		if _, err := conn.Create(p, []byte(tree[p]), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	t.Cleanup(func() {
		for _, p := range slices.Backward(paths) {
			_ = conn.Delete(p, -1)
		}
	})
	sess, held := lockFor(t)
	cl := env.Kafka(t, "local")
	tp := kafka.TopicPartition{Topic: "orders", Partition: 0}
	for _, s := range []kafka.Strategy{kafka.StrategyZKReassign, kafka.StrategyZKNudge} {
		b, err := kafka.NewZKBackend(s, kafka.ZKConfig{Conn: sess.Conn(), Chroot: root, Writer: held, Client: cl})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Reorder(t.Context(), map[kafka.TopicPartition][]int32{tp: {3, 2, 1}}); !errors.Is(err, kafka.ErrKRaftController) {
			t.Errorf("%s reorder = %v, want ErrKRaftController", s, err)
		}
		if _, err := b.ElectPreferred(t.Context(), []kafka.TopicPartition{tp}); !errors.Is(err, kafka.ErrKRaftController) {
			t.Errorf("%s election (without ElectLeaders) = %v, want ErrKRaftController", s, err)
		}
	}
	err := kafka.SubmitZKReassignment(t.Context(), sess.Conn(), root, held, map[kafka.TopicPartition][]int32{tp: {1, 2, 3, 4}})
	if !errors.Is(err, kafka.ErrKRaftController) || !strings.Contains(err.Error(), "KRaft controller 3000") {
		t.Errorf("replica-set change = %v, want ErrKRaftController naming controller 3000", err)
	}
	th := kafka.Throttler{Client: cl, Mechanism: kafka.ConfigZnodes, ZK: sess.Conn(), Chroot: root, Writer: held}
	_, err = th.ApplyThrottles(t.Context(), []kafka.ThrottleKey{{Entity: kafka.EntityTopic, Name: "orders", Key: kafka.FollowerThrottledReplicas, Ours: "0:4"}})
	if !errors.Is(err, kafka.ErrKRaftController) {
		t.Errorf("config znode write = %v, want ErrKRaftController", err)
	}
	// Nothing was written: no admin znode, no notification, topic and config as they were.
	for _, p := range []string{root + "/admin/reassign_partitions", root + "/admin/preferred_replica_election"} {
		if ok, _, err := conn.Exists(p); err != nil || ok {
			t.Errorf("%s exists (%v)", p, err)
		}
	}
	if kids, _, err := conn.Children(root + "/config/changes"); err != nil || len(kids) > 0 {
		t.Errorf("change notifications %v (%v)", kids, err)
	}
	for _, p := range []string{root + "/brokers/topics/orders", root + "/config/topics/orders"} {
		if data, _, err := conn.Get(p); err != nil || string(data) != tree[p] {
			t.Errorf("%s = %s (%v), want %s", p, data, err, tree[p])
		}
	}
}
