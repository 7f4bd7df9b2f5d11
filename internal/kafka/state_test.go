package kafka_test

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

// A read of named topics asks metadata once, and lists the reassignments of exactly the
// partitions it read (kfake: two topics of 3 partitions; its ListPartitionReassignments,
// which never has any, is answered here with one in progress).
func TestReadSnapshotOfTopicsReadsMetadataOnce(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	var metadata atomic.Int64
	kf.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		metadata.Add(1)
		return nil, nil, false // kfake answers
	})
	var listed atomic.Pointer[[]kmsg.ListPartitionReassignmentsRequestTopic] // the hook runs in kfake's goroutine
	kf.ControlKey(int16(kmsg.ListPartitionReassignments), func(r kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req := r.(*kmsg.ListPartitionReassignmentsRequest)
		listed.Store(&req.Topics)
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = "b"
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = 2, []int32{0, 1, 2}, []int32{2}, []int32{0}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kafka.BrokerMetadata(t.Context(), cl); err != nil { // connect first: kgo's own requests not counted
		t.Fatal(err)
	}
	before := metadata.Load()

	s, err := kafka.ReadSnapshot(t.Context(), cl, "b", "a")
	if err != nil {
		t.Fatal(err)
	}
	if n := metadata.Load() - before; n != 1 {
		t.Errorf("%d metadata requests, want 1", n)
	}
	var got []kmsg.ListPartitionReassignmentsRequestTopic
	if l := listed.Load(); l != nil {
		got = *l
	}
	if len(got) != 2 || got[0].Topic != "a" || got[1].Topic != "b" ||
		!slices.Equal(got[0].Partitions, []int32{0, 1, 2}) || !slices.Equal(got[1].Partitions, []int32{0, 1, 2}) {
		t.Errorf("listed %+v, want a and b, partitions 0-2", got)
	}
	p, ok := s.Partition(kafka.TopicPartition{Topic: "b", Partition: 2})
	if !ok || !slices.Equal(p.Adding, []int32{2}) || !slices.Equal(p.Removing, []int32{0}) || !p.Reassigning() {
		t.Errorf("b-2: %+v", p)
	}
	if q, _ := s.Partition(kafka.TopicPartition{Topic: "a", Partition: 2}); q.Reassigning() || len(s.Topics) != 2 {
		t.Errorf("a-2: %+v; topics %d", q, len(s.Topics))
	}
}
