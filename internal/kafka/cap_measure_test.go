package kafka_test

import (
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A measurement, not a regression test (KAFKAMENDER_MEASURE_CAP=1 runs it): what a KRaft
// controller answers to one ElectLeaders and one AlterPartitionReassignments that would
// write more than its 10,000 records per request (QuorumController.MAX_RECORDS_PER_USER_OP).
//
// 12,000 distinct partitions of 2 replicas or more would put 24,000 replicas on the stack's
// three KRaft nodes (320 MB of heap each, shared with every other test), so the requests
// name one partition 12,000 times instead: the controller weighs each entry against the
// committed state, so each writes one record, as 12,000 partitions would. Then the same
// with 9,000 entries, under the cap. Each run leaves up to 19,000 small records in the
// kraft cluster's metadata log.
func TestMeasureKRaftRecordCap(t *testing.T) {
	if os.Getenv("KAFKAMENDER_MEASURE_CAP") == "" {
		t.Skip("a measurement: KAFKAMENDER_MEASURE_CAP=1 runs it")
	}
	env := testenv.Get(t)
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "cap")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}}, nil)

	elect := func(n int) *kmsg.ElectLeadersResponse {
		t.Helper()
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = 0 // preferred
		req.TimeoutMillis = 60000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = topic
		for range n {
			rt.Partitions = append(rt.Partitions, 0)
		}
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(t.Context(), cl)
		if err != nil {
			t.Fatalf("ElectLeaders of %d: %v", n, err)
		}
		t.Logf("ElectLeaders of %d entries: %s", n, time.Since(start))
		return resp
	}
	alter := func(n int, replicas []int32) *kmsg.AlterPartitionAssignmentsResponse {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 60000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		for range n {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = 0, replicas
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(t.Context(), cl)
		if err != nil {
			t.Fatalf("AlterPartitionReassignments of %d: %v", n, err)
		}
		t.Logf("AlterPartitionReassignments of %d entries: %s", n, time.Since(start))
		return resp
	}
	codes := func(each func(func(code int16, msg *string))) map[string]int {
		out := map[string]int{}
		each(func(code int16, msg *string) {
			k := "OK"
			if err := kerr.ErrorForCode(code); err != nil {
				k = err.Error()
			}
			if msg != nil && *msg != "" {
				k += " (" + *msg + ")"
			}
			out[k]++
		})
		return out
	}
	alterCodes := func(resp *kmsg.AlterPartitionAssignmentsResponse) map[string]int {
		return codes(func(f func(int16, *string)) {
			f(resp.ErrorCode, resp.ErrorMessage)
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					f(p.ErrorCode, p.ErrorMessage)
				}
			}
		})
	}
	electCodes := func(resp *kmsg.ElectLeadersResponse) map[string]int {
		return codes(func(f func(int16, *string)) {
			f(resp.ErrorCode, nil)
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					f(p.ErrorCode, p.ErrorMessage)
				}
			}
		})
	}

	// A reorder puts broker 2 at the head (leader stays 1): each entry is one record.
	t.Logf("reorder, 12,000 entries: %v (top-level code counted once)", alterCodes(alter(12000, []int32{2, 1, 3})))
	t.Logf("reorder back, 9,000 entries: %v", alterCodes(alter(9000, []int32{1, 2, 3})))
	t.Logf("reorder again, 9,000 entries: %v", alterCodes(alter(9000, []int32{2, 1, 3})))
	// The head is 2, the leader still 1 (the controller answered once it had the order):
	// each election entry is one record.
	t.Logf("election, 12,000 entries: %v (top-level code counted once)", electCodes(elect(12000)))
	t.Logf("election, 9,000 entries: %v", electCodes(elect(9000)))
	t.Logf("election again, 9,000 entries (now not needed): %v", electCodes(elect(9000)))
}
