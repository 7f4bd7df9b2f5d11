package handlers_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// largePartitions is the size of the topic of TestLargeOperations: past the point where a
// journal entry or a result no longer fits one NATS message at the server's default
// max_payload (about 8,000 changes), and past one request of the batches the controller
// accepts (5,000). (A broker of the local stack holds at most about 15,000 partitions: it
// keeps a file open for each, and the machine's limit is 20,000 a process; see the
// in-process scale test for 25,000.)
const largePartitions = 10_000

// A shed of a broker leading 10,000 partitions, then a replication-factor change of the
// same 10,000 partitions, on KRaft with NATS at its default limits: each journals (in
// chunks), runs in batches the controller accepts, verifies, and reports every change in
// its result (stored in parts), read back whole. Before, the shed could never be
// journaled (the cluster's queue blocked for minutes, then failed), and a change of the
// factor of 6,000 partitions or more overflowed part-way.
func TestLargeOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Getenv("KAFKAMENDER_TEST_LARGE") == "" {
		// 20,000 replicas load the stack's KRaft brokers for minutes after the test (on two
		// cores, a broker took over a minute to learn the next test's topic): run alone.
		t.Skip("10,000 real partitions: run alone with go tool task test:large")
	}
	env := testenv.GetExclusive(t) // 10,000 partitions load the cluster: alone
	f := newFleet(t, env, "kraft")
	f.configure = func(cfg *handlers.Config) {
		cfg.RF.MaxMovesPerBroker = largePartitions // empty partitions: one batch
		cfg.RF.ThrottleSettle = -1
	}
	f.start("worker-1")
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "big")
	assignment := make([][]int32, largePartitions)
	for p := range assignment {
		assignment[p] = []int32{1, int32(2 + p%2)} // broker 1 leads them all
	}
	start := time.Now()
	testenv.CreateLargeTopic(t, cl, topic, assignment)
	t.Logf("created %d partitions in %s", largePartitions, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	shed := wait(t, f.publish(f.event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "topics": []string{topic}})), 10*time.Minute)
	t.Logf("shed of %d leaders: %s in %s", largePartitions, shed.Status, time.Since(start).Round(time.Millisecond))
	if shed.Status != events.StatusSucceeded || len(shed.Changes) != largePartitions || len(shed.Skipped) != 0 {
		t.Fatalf("shed: %s (%q), %d changes, %d skipped; want succeeded with %d changes", shed.Status, shed.Error, len(shed.Changes), len(shed.Skipped), largePartitions)
	}
	if shed.Truncated == nil {
		t.Error("a result of 10,000 changes stored whole in one message, past the default max_payload?")
	}
	// What the result says, the cluster shows (read until every broker's metadata has caught
	// up with the controller: 10,000 changes take them a moment).
	testenv.Eventually(t, time.Minute, func() error {
		after := state(t, f, topic)
		for _, ch := range shed.Changes {
			p := after[ch.Partition]
			if p.Leader == 1 || p.Leader != ch.LeaderAfter || !slices.Equal(p.Replicas, ch.ReplicasAfter) || ch.LeaderBefore != 1 {
				return fmt.Errorf("%s: the result says %v led by %d (from %d), the read shows %v led by %d", ch.TopicPartition, ch.ReplicasAfter, ch.LeaderAfter, ch.LeaderBefore, p.Replicas, p.Leader)
			}
		}
		return nil
	})
	if rec, err := journal.New(f.js).Get(t.Context(), f.alias); err != nil || rec == nil || rec.Open() || len(rec.Left) != largePartitions {
		t.Fatalf("journal after the shed: %v (%v), want closed with what the shed left", rec, err)
	}

	// The replication-factor change lowers the factor (2 -> 1): the same 10,000-entry plan,
	// journal, batched reassignments, verification and result as a raise, without 10,000
	// new replicas for KRaft to create and fill (about four minutes on this machine, all of
	// it Kafka's; the raise of 10,000 partitions runs through pipeline, engine and task in
	// TestScaleOperationsThroughTheEngine).
	start = time.Now()
	rf := wait(t, f.publish(f.event(events.TypeReplicaChangeRequested, rfData(topic, 1, nil))), 10*time.Minute)
	t.Logf("replication factor 2 -> 1 of %d partitions: %s in %s", largePartitions, rf.Status, time.Since(start).Round(time.Millisecond))
	if rf.Status != events.StatusSucceeded || len(rf.Changes) != largePartitions || len(rf.Skipped) != 0 {
		t.Fatalf("lowering: %s (%q), %d changes, %d skipped (first: %v)", rf.Status, rf.Error, len(rf.Changes), len(rf.Skipped), rf.Skipped[:min(3, len(rf.Skipped))])
	}
	if rf.Truncated == nil {
		t.Error("a result of 10,000 changes stored whole in one message, past the default max_payload?")
	}
	led := make(map[int32]int32, len(shed.Changes))
	for _, ch := range shed.Changes {
		led[ch.Partition] = ch.LeaderAfter
	}
	testenv.Eventually(t, time.Minute, func() error {
		after := state(t, f, topic)
		for _, ch := range rf.Changes {
			p := after[ch.Partition]
			if len(p.Replicas) != 1 || !slices.Equal(p.Replicas, ch.ReplicasAfter) || p.Replicas[0] != led[ch.Partition] || !slices.Equal(ch.ReplicasBefore[:1], p.Replicas) {
				return fmt.Errorf("%s: the result says %v -> %v, the read shows %v (leader after the shed %d)", ch.TopicPartition, ch.ReplicasBefore, ch.ReplicasAfter, p.Replicas, led[ch.Partition])
			}
		}
		return nil
	})
	f.noLeftovers([]string{topic}, nil, "")
}
