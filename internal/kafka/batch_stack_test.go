package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// requestCounter counts the requests a client writes, by API key (a kgo hook).
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[int16]int{}
	}
	c.counts[key]++
}

func (c *requestCounter) get(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[int16(key)]
}

// rotatedTopic creates a topic of n partitions over brokers 1-3, partition p led by broker
// p%3+1, and returns the orders that move each head one place on ([1,2,3] -> [2,3,1]).
func rotatedTopic(t *testing.T, cl *kgo.Client, topic string, n int) map[kafka.TopicPartition][]int32 {
	t.Helper()
	assignment := make([][]int32, n)
	orders := map[kafka.TopicPartition][]int32{}
	for p := range assignment {
		b := []int32{1, 2, 3}
		for range p % 3 {
			b = append(b[1:], b[0])
		}
		assignment[p] = b
		orders[kafka.TopicPartition{Topic: topic, Partition: int32(p)}] = append(slices.Clone(b[1:]), b[0])
	}
	testenv.CreateTopic(t, cl, topic, assignment, nil)
	return orders
}

// waitPlaced waits until metadata shows every partition with its order and led by its
// head.
func waitPlaced(t *testing.T, cl *kgo.Client, topic string, orders map[kafka.TopicPartition][]int32) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		snap, err := kafka.ReadSnapshot(t.Context(), cl, topic)
		if err != nil {
			return err
		}
		for tp, want := range orders {
			p, ok := snap.Partition(tp)
			if !ok || !slices.Equal(p.Replicas, want) || p.Leader != want[0] {
				return fmt.Errorf("%s: replicas %v led by %d, want %v led by %d", tp, p.Replicas, p.Leader, want, want[0])
			}
		}
		return nil
	})
}

// A reorder and election of 12 partitions with batches of 5 go out as 3
// AlterPartitionReassignments and 3 ElectLeaders, and land fully (api, on the ZooKeeper-mode
// and the KRaft cluster).
func TestAPIBatchesLand(t *testing.T) {
	env := testenv.Get(t)
	for _, cluster := range []string{"local", "kraft"} {
		t.Run(cluster, func(t *testing.T) {
			counter := &requestCounter{}
			cl := env.Kafka(t, cluster, kgo.WithHooks(counter))
			topic := testenv.Name(t, "batches")
			orders := rotatedTopic(t, cl, topic, 12)
			b := kafka.NewAPIBackendWithLimits(cl, kafka.Limits{Partitions: 5})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := b.ReorderForElection(ctx, orders); err != nil {
				t.Fatalf("reorder: %v", err)
			}
			res, err := b.ElectPreferred(ctx, slices.Collect(maps.Keys(orders)))
			if err != nil {
				t.Fatalf("elect: %v", err)
			}
			if len(res) != 12 {
				t.Errorf("%d election results, want 12", len(res))
			}
			for tp := range orders {
				if err, ok := res[tp]; !ok || err != nil {
					t.Errorf("elect %s: %v (in result: %v)", tp, err, ok)
				}
			}
			if n := counter.get(kmsg.AlterPartitionAssignments); n != 3 {
				t.Errorf("%d AlterPartitionReassignments requests, want 3", n)
			}
			if n := counter.get(kmsg.ElectLeaders); n != 3 {
				t.Errorf("%d ElectLeaders requests, want 3", n)
			}
			// Every poll of the controller asks in batches too: 3 requests, fewer only when
			// a batch still lists a reassignment.
			t.Logf("ListPartitionReassignments requests: %d", counter.get(kmsg.ListPartitionReassignments))
			waitPlaced(t, cl, topic, orders)
		})
	}
}

// countingWriter records the sizes of the creations of one znode path through a
// FencedWriter.
type countingWriter struct {
	kafka.FencedWriter
	path string

	mu      sync.Mutex
	creates []int
}

func (w *countingWriter) Multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	resp, err := w.FencedWriter.Multi(ctx, ops...)
	if err == nil {
		w.mu.Lock()
		for _, op := range ops {
			if c, ok := op.(*zk.CreateRequest); ok && c.Path == w.path {
				w.creates = append(w.creates, len(c.Data))
			}
		}
		w.mu.Unlock()
	}
	return resp, err
}

func (w *countingWriter) sizes() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.creates)
}

// zk-reassign on Kafka 2.3: a reorder of 12 partitions whose reassignment znode may hold 4
// of them goes out as 3 znodes, one after the other, and lands fully; so do the elections
// through /admin/preferred_replica_election (the path before Kafka 2.2), split the same
// way.
func TestZKReassignBatchesLand(t *testing.T) {
	env := testenv.Get(t)
	env.LockLegacyReassignments(t)
	const cluster = "legacy"
	cl := env.Kafka(t, cluster)
	c := env.Cluster(t, cluster)
	topic := testenv.Name(t, "batches")
	orders := rotatedTopic(t, cl, topic, 12)
	caps, err := kafka.Probe(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	caps.ElectLeaders = false // elections through the znode, as before 2.2
	// An entry of partition 10 and up is a byte longer than one of 0-9: room for 4 of the
	// longer ones (and not 5 of the shorter) in {"version":1,"partitions":[…]}.
	entry := len(fmt.Sprintf(`{"topic":%q,"partition":10,"replicas":[1,2,3]}`, topic))
	limits := kafka.Limits{ZnodeBytes: len(`{"version":1,"partitions":[]}`) + 4*entry + 3}
	sess, held := lockFor(t)
	reassign := &countingWriter{FencedWriter: held, path: kafka.ReassignPath(c.Chroot)}
	b, err := kafka.NewZKBackend(kafka.StrategyZKReassign, kafka.ZKConfig{Conn: sess.Conn(), Chroot: c.Chroot,
		Writer: reassign, Client: cl, Caps: caps, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := b.Reorder(ctx, orders); err != nil {
		t.Fatalf("reorder: %v", err)
	}
	// 3 znodes; one more when Kafka 2.3 deleted one unread (it deletes the znode twice at
	// the end of a batch that completes at once) and its partitions were written again.
	sizes := reassign.sizes()
	if len(sizes) < 3 || slices.Max(sizes) > limits.ZnodeBytes {
		t.Errorf("%s written %d times, sizes %v: want 3 or more, each at most %d bytes", reassign.path, len(sizes), sizes, limits.ZnodeBytes)
	}
	if len(sizes) > 3 {
		t.Logf("%s written %d times (%v bytes): a znode was deleted unread and its partitions written again", reassign.path, len(sizes), sizes)
	}
	election := &countingWriter{FencedWriter: held, path: c.Chroot + "/admin/preferred_replica_election"}
	// 5 a znode, by count.
	b, err = kafka.NewZKBackend(kafka.StrategyZKReassign, kafka.ZKConfig{Conn: sess.Conn(), Chroot: c.Chroot,
		Writer: election, Client: cl, Caps: caps, Limits: kafka.Limits{Partitions: 5}})
	if err != nil {
		t.Fatal(err)
	}
	tps := slices.Collect(maps.Keys(orders))
	res, err := b.ElectPreferred(ctx, tps)
	if err != nil {
		t.Fatalf("elect: %v", err)
	}
	for _, tp := range tps {
		if err, ok := res[tp]; !ok || err != nil {
			t.Errorf("elect %s: %v (in result: %v)", tp, err, ok)
		}
	}
	if n := len(election.sizes()); n != 3 {
		t.Errorf("%s written %d times, want 3", election.path, n)
	}
	waitPlaced(t, cl, topic, orders)
}
