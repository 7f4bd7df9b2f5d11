package testenv

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

// Produce writes n records of size random bytes to each of the first partitions of topic,
// one at a time (cl must use a manual partitioner). Random bytes, because the client
// compresses batches: zeros would shrink to a few kilobytes, which a new replica copies in
// its first fetch, before any throttle bites.
func Produce(t testing.TB, cl *kgo.Client, topic string, partitions, n, size int) {
	t.Helper()
	value := make([]byte, size)
	_, _ = crand.Read(value)
	for p := range partitions {
		for range n {
			r := &kgo.Record{Topic: topic, Partition: int32(p), Value: value}
			if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// CreateTopic creates topic with an explicit replica assignment (assignment[p] is the
// ordered replica list of partition p), waits until every partition has a leader in the
// metadata, and deletes the topic when the test ends.
func CreateTopic(t testing.TB, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	if err := kafka.CreateTopic(t.Context(), cl, topic, assignment, configs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).DeleteTopic(ctx, topic); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	adm := kadm.NewClient(cl)
	Eventually(t, 60*time.Second, func() error {
		// Every broker must know the topic, so code under test, asking any of them, does.
		if err := knownByAll(t.Context(), cl, topic, len(assignment)); err != nil {
			return err
		}
		md, err := adm.Metadata(t.Context(), topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %s not in metadata yet (%v)", topic, td.Err)
		}
		if len(td.Partitions) != len(assignment) {
			return fmt.Errorf("topic %s has %d of %d partitions", topic, len(td.Partitions), len(assignment))
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("%s-%d has no leader yet (%v)", topic, p.Partition, p.Err)
			}
		}
		return nil
	})
}

// Assignment reads the ordered replica lists of topic's partitions from metadata.
func Assignment(t testing.TB, adm *kadm.Client, topic string) [][]int32 {
	t.Helper()
	md, err := adm.Metadata(t.Context(), topic)
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		t.Fatalf("metadata %s: %v", topic, td.Err)
	}
	out := make([][]int32, len(td.Partitions))
	for _, p := range td.Partitions.Sorted() {
		out[p.Partition] = p.Replicas
	}
	return out
}

// TwoLogDirs returns the two log directories (disks) of broker id of a stack cluster (broker
// 1 of local and node 1 of kraft have two) and fails the test if it has not exactly two.
func (e *Env) TwoLogDirs(t testing.TB, cluster string, id int32) [2]string {
	t.Helper()
	dirs, err := e.Stack.LogDirs(cluster, id)
	if err != nil || len(dirs) != 2 {
		t.Fatalf("%s broker %d log dirs: %v %v, want two", cluster, id, dirs, err)
	}
	return [2]string{dirs[0], dirs[1]}
}

// OtherLogDir is the one of dirs that is not dir.
func OtherLogDir(dirs [2]string, dir string) string {
	if dirs[0] == dir {
		return dirs[1]
	}
	return dirs[0]
}

// knownByAll returns nil once every broker's metadata lists the partitions of topic, each
// with a leader.
func knownByAll(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	brokers, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	for _, b := range brokers.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != partitions {
			return fmt.Errorf("broker %d does not know the %d partitions of %s yet", b.NodeID, partitions, topic)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("broker %d: %s-%d has no leader yet", b.NodeID, topic, p.Partition)
			}
		}
	}
	return nil
}
