package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

// createBatch is the most partitions one request creates: a KRaft controller refuses a
// request that writes more than 10,000 records (a partition is one).
const createBatch = 5000

// CreateLargeTopic creates topic with the explicit assignment (assignment[p] is the
// ordered replica list of partition p), of any size: the first partitions with
// CreateTopics, the rest with CreatePartitions, each request under the controller's cap.
// It waits until every broker knows every partition with a leader, and deletes the topic
// (waiting until it is gone) when the test ends.
func CreateLargeTopic(t testing.TB, cl *kgo.Client, topic string, assignment [][]int32) {
	t.Helper()
	first := min(len(assignment), createBatch)
	if err := kafka.CreateTopic(t.Context(), cl, topic, assignment[:first], nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, cl, topic) })
	for from := first; from < len(assignment); from += createBatch {
		to := min(from+createBatch, len(assignment))
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 60_000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, int32(to)
		for _, replicas := range assignment[from:to] {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(t.Context(), cl)
		if err != nil {
			t.Fatalf("create partitions %d-%d of %s: %v", from, to-1, topic, err)
		}
		for _, r := range resp.Topics {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				t.Fatalf("create partitions %d-%d of %s: %v", from, to-1, topic, err)
			}
		}
	}
	Eventually(t, 5*time.Minute, func() error { return knownByAll(t.Context(), cl, topic, len(assignment)) })
}

// deleteAndWait deletes topic and waits until no broker knows it, then until every broker
// learns a new topic again: a large topic takes a while to go, the brokers stay busy with
// it for a while after (a KRaft broker took over a minute to learn the next test's
// topic), and the next test should not find them so.
func deleteAndWait(t testing.TB, cl *kgo.Client, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
		t.Logf("delete topic %s: %v", topic, err)
		return
	}
	gone := func() bool {
		known, err := kafka.KnownBy(ctx, cl, []string{topic})
		return err == nil && len(known) == 0
	}
	if !pollUntil(ctx, gone) {
		t.Logf("topic %s still known 5 minutes after its deletion", topic)
		return
	}
	brokers, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Logf("after deleting %s: %v", topic, err)
		return
	}
	var all []int32
	for _, b := range brokers.Brokers {
		all = append(all, b.NodeID)
	}
	probe := topic + "-probe"
	if err := kafka.CreateTopic(ctx, cl, probe, [][]int32{all}, nil); err != nil {
		t.Logf("after deleting %s: %v", topic, err)
		return
	}
	defer func() { _, _ = kadm.NewClient(cl).DeleteTopic(context.Background(), probe) }()
	if !pollUntil(ctx, func() bool { return knownByAll(ctx, cl, probe, 1) == nil }) {
		t.Logf("the brokers did not all learn a new topic within 5 minutes of deleting %s", topic)
	}
}

// pollUntil calls done every 500ms until it returns true (then true) or ctx ends (then
// false). Not poll: deleteAndWait runs in a Cleanup, when the test's context has ended.
func pollUntil(ctx context.Context, done func() bool) bool {
	for ctx.Err() == nil {
		if done() {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}
