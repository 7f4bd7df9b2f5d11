package handlers_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

const keyMetadata, keyListReassignments = 3, 46

// leaderCounts counts, over every partition of the cluster, the partitions each broker leads.
func leaderCounts(t *testing.T, f *fleet) map[int32]int {
	t.Helper()
	snap, err := kafka.ReadSnapshot(t.Context(), f.env.Kafka(t, f.real))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int32]int{}
	for id := range snap.Brokers {
		counts[id] = 0
	}
	for _, ps := range snap.Topics {
		for _, p := range ps {
			if p.Leader >= 0 {
				counts[p.Leader]++
			}
		}
	}
	return counts
}

// ledBy builds an assignment of n partitions all led (headed) by b, the other replicas
// cycling over the other brokers.
func ledBy(b int32, others []int32, n, rf int) [][]int32 {
	out := make([][]int32, n)
	for p := range out {
		r := []int32{b}
		for i := 0; len(r) < rf; i++ {
			r = append(r, others[(p+i)%len(others)])
		}
		out[p] = r
	}
	return out
}

// The whole acceptance of broker-overloaded on one cluster: 120 partitions led by broker 1
// move off it in one reorder request and one election, to in-sync replicas, leaving the
// other brokers' leader counts within one of each other; a repeated alert in the cool-down
// is a noop naming the first event.
func TestBrokerOverloadedShedsLeadership(t *testing.T) {
	// Exclusive: the balance is cluster-wide, so no other test's topics may come and go.
	env := testenv.GetExclusive(t)
	for _, tc := range []struct {
		cluster string
		others  []int32
	}{{"local", []int32{2, 3, 4}}, {"kraft", []int32{2, 3}}} {
		t.Run(tc.cluster, func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			f.start("worker-1")
			cl := env.Kafka(t, tc.cluster)
			var topics []string
			for i := range 2 {
				topic := testenv.Name(t, fmt.Sprintf("hot%d", i))
				testenv.CreateTopic(t, cl, topic, ledBy(1, tc.others, 60, 3), nil)
				topics = append(topics, topic)
			}
			// Other tests' topics may still be being deleted (ZooKeeper mode deletes in the
			// background): their leaders would count in the worker's snapshot and then
			// vanish, leaving counts the test cannot check.
			if tc.cluster == "local" {
				zc := env.ZooKeeper(t)
				testenv.Eventually(t, 60*time.Second, func() error {
					pending, _, err := zc.Children(stack.KafkaChroot + "/admin/delete_topics")
					if err != nil && !errors.Is(err, zk.ErrNoNode) {
						return err
					}
					if len(pending) > 0 {
						return fmt.Errorf("topics still being deleted: %v", pending)
					}
					return nil
				})
			}
			before := map[model.TopicPartition]model.Partition{}
			for _, topic := range topics {
				for _, p := range state(t, f, topic) {
					before[p.TopicPartition] = p
				}
			}
			counts := map[int16]int{}
			for _, k := range []int16{keyAlterPartitionReassignment, keyElectLeaders, keyMetadata, keyListReassignments} {
				counts[k] = f.requests.get(k)
			}

			e := f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "demote_to_end": true, "reason": "cpu 97%"})
			res := f.run(e)
			if res.Status != events.StatusSucceeded {
				t.Fatalf("result %s: %s (skipped %v)", res.Status, res.Error, res.Skipped)
			}
			moved := 0
			for _, c := range res.Changes {
				if _, ours := before[c.TopicPartition]; ours {
					moved++
				}
				if c.LeaderAfter == 1 || c.ReplicasAfter[0] != c.LeaderAfter || c.ReplicasAfter[len(c.ReplicasAfter)-1] != 1 {
					t.Errorf("%s: %v led by %d (demote_to_end)", c.TopicPartition, c.ReplicasAfter, c.LeaderAfter)
				}
			}
			if moved != 120 {
				t.Errorf("%d of our 120 partitions changed", moved)
			}
			// One reorder request and one election for the whole batch; reads are polls,
			// bounded whatever the number of partitions.
			if n := f.requests.get(keyAlterPartitionReassignment) - counts[keyAlterPartitionReassignment]; n != 1 {
				t.Errorf("%d AlterPartitionReassignments requests, want 1", n)
			}
			if n := f.requests.get(keyElectLeaders) - counts[keyElectLeaders]; n != 1 {
				t.Errorf("%d ElectLeaders requests, want 1", n)
			}
			reads := f.requests.get(keyMetadata) - counts[keyMetadata] + f.requests.get(keyListReassignments) - counts[keyListReassignments]
			if reads > 40 {
				t.Errorf("%d metadata and list-reassignment requests for one batch", reads)
			}
			t.Logf("requests: 1 reorder, 1 election, %d reads for %d changes", reads, len(res.Changes))

			testenv.Eventually(t, 15*time.Second, func() error {
				for _, topic := range topics {
					for _, p := range state(t, f, topic) {
						if p.Leader == 1 || p.Replicas[0] != p.Leader || !p.InSync(p.Leader) {
							return fmt.Errorf("%s: replicas %v leader %d isr %v", p.TopicPartition, p.Replicas, p.Leader, p.ISR)
						}
						if !slices.Equal(sorted(p.Replicas), sorted(before[p.TopicPartition].Replicas)) {
							return fmt.Errorf("%s: replica set changed %v -> %v", p.TopicPartition, before[p.TopicPartition].Replicas, p.Replicas)
						}
					}
				}
				counts := leaderCounts(t, f)
				lo, hi := 1<<30, -1
				for _, b := range tc.others {
					lo, hi = min(lo, counts[b]), max(hi, counts[b])
				}
				if hi-lo > 1 {
					return fmt.Errorf("leader counts of the other brokers %v differ by %d", counts, hi-lo)
				}
				if counts[1] != 0 {
					return fmt.Errorf("broker 1 still leads %d partitions", counts[1])
				}
				return nil
			})

			again := f.run(f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "reason": "cpu 97%"}))
			if again.Status != events.StatusNoop || again.PreviousEvent != e.ID || !strings.Contains(again.Note, e.ID) || len(again.Changes) != 0 {
				t.Fatalf("second alert in the cool-down: %+v", again)
			}
		})
	}
}

func sorted(l []int32) []int32 {
	l = slices.Clone(l)
	slices.Sort(l)
	return l
}

// With one of the other replicas stopped, partitions whose only other in-sync replica was
// on it are skipped with the reason; the rest move.
func TestBrokerOverloadedSkipsWithoutInSyncReplica(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "hot")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 4}, {1, 4}, {1, 2}, {1, 3}}, nil)
	env.StopBroker(t, "local", 4)
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, p := range state(t, f, topic) {
			if p.InSync(4) {
				return fmt.Errorf("broker 4 still in the ISR of %s", p.TopicPartition)
			}
		}
		return nil
	})
	res := f.run(f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "topics": []string{topic}}))
	if res.Status != events.StatusPartial {
		t.Fatalf("status %s (%s), want partial", res.Status, res.Error)
	}
	var skipped []int32
	for _, s := range res.Skipped {
		if s.Topic == topic {
			skipped = append(skipped, s.Partition)
			if !strings.Contains(s.Reason, "no in-sync replica other than broker 1") || s.Code != "no_in_sync_candidate" {
				t.Errorf("skip %s: %q (%s)", s.TopicPartition, s.Reason, s.Code)
			}
		}
	}
	if !slices.Equal(skipped, []int32{0, 1}) {
		t.Fatalf("skipped %v, want partitions 0 and 1", skipped)
	}
	testenv.Eventually(t, 15*time.Second, func() error {
		got := state(t, f, topic)
		if got[2].Leader != 2 || got[3].Leader != 3 || got[0].Leader != 1 || got[1].Leader != 1 {
			return fmt.Errorf("leaders %d %d %d %d, want 1 1 2 3", got[0].Leader, got[1].Leader, got[2].Leader, got[3].Leader)
		}
		return nil
	})
}

// A dry run shows the plan (old and new AR, old and new leader) and changes nothing.
func TestBrokerOverloadedDryRun(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	topic := testenv.Name(t, "hot")
	testenv.CreateTopic(t, env.Kafka(t, "kraft"), topic, ledBy(2, []int32{1, 3}, 6, 3), nil)
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 2, "topics": []string{topic}, "dry_run": true}))
	if res.Status != events.StatusPlanned || len(res.Changes) != 6 {
		t.Fatalf("dry run: %s, %d changes (%s)", res.Status, len(res.Changes), res.Error)
	}
	for _, c := range res.Changes {
		if c.LeaderBefore != 2 || c.LeaderAfter == 2 || c.ReplicasAfter[0] != c.LeaderAfter || !slices.Equal(c.ReplicasBefore, before[c.Partition].Replicas) {
			t.Errorf("planned change %+v", c)
		}
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("a dry run changed the cluster")
	}
}
