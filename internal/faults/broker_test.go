package faults_test

import (
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// vacated: broker b is gone from the partition's replicas and leadership, its other
// replicas kept in order, one new one in its place.
func vacated(before []model.Partition, b int32) func(model.Partition) bool {
	return func(p model.Partition) bool {
		q := before[p.Partition]
		kept := model.Minus(q.Replicas, []int32{b})
		return !slices.Contains(p.Replicas, b) && p.Leader != b && len(p.Replicas) == len(q.Replicas) &&
			slices.Equal(model.Minus(p.Replicas, model.Minus(p.Replicas, kept)), kept)
	}
}

// kill -9 at each step of a throttled drain (its leadership shed, then its copies): the
// next worker finishes it, from the shed step where the first one stopped; one result,
// the broker holds and leads nothing of the topic, nothing left behind.
func TestKillBrokerDrainAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, step := range []string{operation.StepJournalWritten, operation.StepThrottled, operation.StepCopying, operation.StepBeforeResult} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t, env, "local")
			topic := r.topic("drain", [][]int32{{4, 1}, {1, 4}, {2, 3}}, 1_000_000, nil)
			before := r.partitions(topic)
			_, res := killAt(t, r, step, events.TypeBrokerDrain,
				map[string]any{"broker": 4, "topics": []string{topic}, "throttle_bytes_per_sec": throttleRate})
			if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
				t.Fatalf("result %s %q, changes %v: want succeeded with 2 changes", res.Status, res.Error, res.Changes)
			}
			r.outcome(res, topic, before, vacated(before, 4), true)
			r.noLeftovers([]string{topic}, nil)
		})
	}
}

// kill -9 in the middle of a broker-failed copy, broker 4 down for good: the next worker
// adopts the copy and finishes it; one result, every partition replicated again without
// broker 4, nothing left behind.
func TestKillBrokerFailedDuringTheCopy(t *testing.T) {
	env := testenv.GetExclusive(t)
	r := newRig(t, env, "local")
	topic := r.topic("failed", [][]int32{{4, 1}, {1, 4}, {2, 3}}, 1_000_000, nil)
	env.KillBroker(t, "local", 4)
	before := r.partitions(topic)
	_, res := killAt(t, r, operation.StepCopying, events.TypeBrokerFailed,
		map[string]any{"broker": 4, "rack": "r2", "topics": []string{topic}, "throttle_bytes_per_sec": throttleRate})
	if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
		t.Fatalf("result %s %q, changes %v: want succeeded with 2 changes", res.Status, res.Error, res.Changes)
	}
	r.outcome(res, topic, before, vacated(before, 4), false)
	r.noLeftovers([]string{topic}, nil)
}

// kill -9 at each step of a broker-added (its copies onto the new broker, then the
// elections of the leaders it moves there): the next worker finishes it, elections
// included; one result, the replica and leader counts of the topic within 1 of even,
// nothing left behind.
func TestKillBrokerAddedAtEachStep(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, step := range []string{operation.StepCopying, operation.StepCopied, operation.StepBeforeResult} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t, env, "local")
			topic := r.topic("added", [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}, {3, 1}}, 300_000, nil)
			before := r.partitions(topic)
			_, res := killAt(t, r, step, events.TypeBrokerAdded,
				map[string]any{"broker": 4, "topics": []string{topic}, "throttle_bytes_per_sec": throttleRate})
			if res.Status != events.StatusSucceeded || len(res.Changes) == 0 {
				t.Fatalf("result %s %q, changes %v: want succeeded", res.Status, res.Error, res.Changes)
			}
			r.outcome(res, topic, before, func(p model.Partition) bool {
				q := before[p.Partition]
				return len(p.Replicas) == len(q.Replicas) && len(model.Minus(p.Replicas, q.Replicas)) <= 1 &&
					(slices.Equal(p.Replicas, q.Replicas) || slices.Contains(p.Replicas, 4)) && p.Leader == p.Replicas[0]
			}, true)
			replicas, leaders := map[int32]int{}, map[int32]int{}
			for _, p := range r.partitions(topic) {
				for _, b := range p.Replicas {
					replicas[b]++
				}
				leaders[p.Leader]++
			}
			for _, counts := range []map[int32]int{replicas, leaders} {
				lo, hi := counts[1], counts[1]
				for b := int32(1); b <= 4; b++ {
					lo, hi = min(lo, counts[b]), max(hi, counts[b])
				}
				if hi-lo > 1 {
					t.Errorf("counts per broker %v: spread %d, want at most 1 (replicas %v, leaders %v)", counts, hi-lo, replicas, leaders)
				}
			}
			r.noLeftovers([]string{topic}, nil)
		})
	}
}
