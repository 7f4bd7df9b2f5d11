package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// Verification never passes on state it did not read: when no read of the cluster
// succeeds, observe and report fail with a transient error and no partitions, and never
// hand back the plan as if the cluster showed it.
func TestVerifyWithoutAFreshReadFails(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTimeout(200*time.Millisecond),
		kgo.RetryTimeout(500*time.Millisecond), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := &Cluster{Name: "unreachable", Client: cl}
	planned := []plan.Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0},
		ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}, LeaderBefore: 1, LeaderAfter: 2}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	rd := c.reader(kafka.Capabilities{ListReassignments: true})
	now, err := observe(ctx, rd, planned, time.Second, nil, true)
	if err == nil || !retry.IsTransient(err) || now != nil {
		t.Fatalf("observe of an unreachable cluster = %v, %v; want no partitions and a transient error", now, err)
	}
	changes, err := report(ctx, rd, planned, true)
	if err == nil || !retry.IsTransient(err) || changes != nil {
		t.Fatalf("report of an unreachable cluster = %v, %v; want no changes and a transient error", changes, err)
	}
}
