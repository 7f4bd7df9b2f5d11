package kafka_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// fakeAdmin is a kfake cluster whose AlterPartitionReassignments and ElectLeaders are
// answered by the test: each request's partitions are recorded, and each partition gets
// the error code answer gives it (0: none). A request number in failRequest (1-based) is
// refused as a whole with that top-level error code.
type fakeAdmin struct {
	kf *kfake.Cluster
	cl *kgo.Client

	mu       sync.Mutex
	requests map[int16][][]kafka.TopicPartition // by request key, in order
}

func newFakeAdmin(t *testing.T, answer func(kafka.TopicPartition) int16, failRequest map[int]int16) *fakeAdmin {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(12, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	f := &fakeAdmin{kf: kf, requests: map[int16][][]kafka.TopicPartition{}}
	record := func(key int16, tps []kafka.TopicPartition) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests[key] = append(f.requests[key], tps)
		return len(f.requests[key])
	}
	kf.ControlKey(int16(kmsg.AlterPartitionAssignments), func(r kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req := r.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		var tps []kafka.TopicPartition
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				tp := kafka.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
				tps = append(tps, tp)
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, answer(tp)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if code, ok := failRequest[record(int16(kmsg.AlterPartitionAssignments), tps)]; ok {
			resp.Topics, resp.ErrorCode = nil, code
		}
		return resp, nil, true
	})
	kf.ControlKey(int16(kmsg.ElectLeaders), func(r kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req := r.(*kmsg.ElectLeadersRequest)
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		var tps []kafka.TopicPartition
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				tp := kafka.TopicPartition{Topic: rt.Topic, Partition: p}
				tps = append(tps, tp)
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, answer(tp)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		record(int16(kmsg.ElectLeaders), tps)
		return resp, nil, true
	})
	f.cl, err = kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cl.Close)
	return f
}

// sent returns the number of partitions of each request of key, and all of them, request
// by request (sorted within each: kadm sends a request's partitions in map order).
func (f *fakeAdmin) sent(key kmsg.Key) (sizes []int, all []kafka.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.requests[int16(key)] {
		r = slices.Clone(r)
		kafka.SortTopicPartitions(r)
		sizes = append(sizes, len(r))
		all = append(all, r...)
	}
	return sizes, all
}

func twelve() []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 12)
	for i := range out {
		out[i] = kafka.TopicPartition{Topic: "t", Partition: int32(i)}
	}
	return out
}

// A cancel of 12 partitions by 5 goes out in 3 requests; partitions with nothing to cancel
// are no error, the others' errors of every request come back joined.
func TestCancelReassignmentsInBatches(t *testing.T) {
	f := newFakeAdmin(t, func(tp kafka.TopicPartition) int16 {
		switch tp.Partition {
		case 1, 6, 10:
			return kerr.NoReassignmentInProgress.Code
		case 3:
			return kerr.InvalidReplicaAssignment.Code
		case 11:
			return kerr.NotController.Code
		}
		return 0
	}, nil)
	reversed := twelve()
	slices.Reverse(reversed) // sent in (topic, partition) order all the same
	err := kafka.Limits{Partitions: 5}.CancelReassignments(t.Context(), f.cl, reversed)
	sizes, all := f.sent(kmsg.AlterPartitionAssignments)
	if !slices.Equal(sizes, []int{5, 5, 2}) || !slices.Equal(all, twelve()) {
		t.Errorf("requests of %v partitions: %v", sizes, all)
	}
	if err == nil || !errors.Is(err, kerr.InvalidReplicaAssignment) || !errors.Is(err, kerr.NotController) || errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel = %v, want t-3's and t-11's errors only", err)
	}
	for _, want := range []string{"cancel the reassignment of t-3: INVALID_REPLICA_ASSIGNMENT", "cancel the reassignment of t-11: NOT_CONTROLLER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("cancel = %v, want it to say %q", err, want)
		}
	}
	if !retry.IsTransient(err) { // NOT_CONTROLLER of t-11
		t.Errorf("cancel = %v: not transient", err)
	}
}

// A request refused as a whole stops the cancel there, transient, with the per-partition
// errors of the requests before it.
func TestCancelReassignmentsRequestFailure(t *testing.T) {
	f := newFakeAdmin(t, func(tp kafka.TopicPartition) int16 {
		if tp.Partition == 2 {
			return kerr.InvalidReplicaAssignment.Code
		}
		return 0
	}, map[int]int16{2: kerr.PolicyViolation.Code})
	err := kafka.Limits{Partitions: 5}.CancelReassignments(t.Context(), f.cl, twelve())
	if sizes, _ := f.sent(kmsg.AlterPartitionAssignments); !slices.Equal(sizes, []int{5, 5}) {
		t.Errorf("requests of %v partitions, want 5 and 5 (none after the refused one)", sizes)
	}
	if !errors.Is(err, kerr.PolicyViolation) || !errors.Is(err, kerr.InvalidReplicaAssignment) || !retry.IsTransient(err) {
		t.Fatalf("cancel = %v, want the refusal (transient) and t-2's error", err)
	}
	if !strings.Contains(err.Error(), "request 2 of 3") {
		t.Errorf("cancel = %v, want it to say which request failed", err)
	}
}

// Reassignments go out in requests of at most 5 partitions; the per-partition errors of
// every request come back joined, REASSIGNMENT_IN_PROGRESS as ErrReassignmentInProgress.
func TestSubmitReassignmentInBatches(t *testing.T) {
	f := newFakeAdmin(t, func(tp kafka.TopicPartition) int16 {
		switch tp.Partition {
		case 4:
			return kerr.ReassignmentInProgress.Code
		case 9:
			return kerr.InvalidReplicaAssignment.Code
		}
		return 0
	}, nil)
	targets := map[kafka.TopicPartition][]int32{}
	for _, tp := range twelve() {
		targets[tp] = []int32{0}
	}
	err := kafka.Limits{Partitions: 5}.SubmitReassignment(t.Context(), f.cl, targets)
	if sizes, all := f.sent(kmsg.AlterPartitionAssignments); !slices.Equal(sizes, []int{5, 5, 2}) || !slices.Equal(all, twelve()) {
		t.Errorf("requests of %v partitions: %v", sizes, all)
	}
	if !errors.Is(err, kafka.ErrReassignmentInProgress) || !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("submit = %v, want t-4 in progress and t-9 invalid", err)
	}
	for _, want := range []string{"reassign t-4: ", "reassign t-9: INVALID_REPLICA_ASSIGNMENT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("submit = %v, want it to say %q", err, want)
		}
	}
	// The default: every partition in one request.
	if err := kafka.SubmitReassignment(t.Context(), f.cl, map[kafka.TopicPartition][]int32{{Topic: "t", Partition: 0}: {0}}); err != nil {
		t.Fatal(err)
	}
	if sizes, _ := f.sent(kmsg.AlterPartitionAssignments); len(sizes) != 4 || sizes[3] != 1 {
		t.Errorf("requests of %v partitions", sizes)
	}
}

// Elections of 12 partitions by 5: 3 requests, one result per partition.
func TestElectPreferredInBatches(t *testing.T) {
	f := newFakeAdmin(t, func(tp kafka.TopicPartition) int16 {
		switch tp.Partition {
		case 0, 5:
			return kerr.ElectionNotNeeded.Code
		case 7:
			return kerr.PreferredLeaderNotAvailable.Code
		case 11:
			return kerr.PolicyViolation.Code
		}
		return 0
	}, nil)
	b := kafka.NewAPIBackendWithLimits(f.cl, kafka.Limits{Partitions: 5})
	tps := append(twelve(), kafka.TopicPartition{Topic: "t", Partition: 3}) // named twice: elected once
	res, err := b.ElectPreferred(t.Context(), tps)
	if err != nil {
		t.Fatal(err)
	}
	if sizes, all := f.sent(kmsg.ElectLeaders); !slices.Equal(sizes, []int{5, 5, 2}) || !slices.Equal(all, twelve()) {
		t.Errorf("requests of %v partitions: %v", sizes, all)
	}
	if len(res) != 12 {
		t.Errorf("%d results, want 12", len(res))
	}
	for _, tp := range twelve() {
		err, ok := res[tp]
		switch tp.Partition {
		case 7:
			if !errors.Is(err, kafka.ErrPreferredNotAvailable) {
				t.Errorf("%s: %v, want ErrPreferredNotAvailable", tp, err)
			}
		case 11:
			if !errors.Is(err, kerr.PolicyViolation) {
				t.Errorf("%s: %v, want POLICY_VIOLATION", tp, err)
			}
		default:
			if !ok || err != nil {
				t.Errorf("%s: %v (in result: %v), want elected", tp, err, ok)
			}
		}
	}
	if _, err := b.ElectPreferred(t.Context(), nil); !errors.Is(err, kafka.ErrEmptyElection) {
		t.Errorf("an empty election = %v", err)
	}
}
