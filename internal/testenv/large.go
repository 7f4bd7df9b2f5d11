package testenv

import (
	"context"
	"fmt"
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
	adm := kadm.NewClient(cl)
	Eventually(t, 5*time.Minute, func() error {
		brokers, err := adm.BrokerMetadata(t.Context())
		if err != nil {
			return err
		}
		for _, b := range brokers.Brokers {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(t.Context(), cl.Broker(int(b.NodeID)))
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != len(assignment) {
				return fmt.Errorf("broker %d does not know the %d partitions of %s yet", b.NodeID, len(assignment), topic)
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.Leader < 0 {
					return fmt.Errorf("broker %d: %s-%d has no leader yet", b.NodeID, topic, p.Partition)
				}
			}
		}
		return nil
	})
}

// deleteAndWait deletes topic and waits until no broker knows it: a large topic takes a
// while to go, and the next test should not find the brokers busy with it.
func deleteAndWait(t testing.TB, cl *kgo.Client, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
		t.Logf("delete topic %s: %v", topic, err)
		return
	}
	for ctx.Err() == nil {
		known, err := kafka.KnownBy(ctx, cl, []string{topic})
		if err == nil && len(known) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("topic %s still known 5 minutes after its deletion", topic)
}
