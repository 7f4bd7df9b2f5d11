package plan

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// snap builds a snapshot of topic "t": parts[i] = {replicas, isr, leader}.
func snap(parts ...model.Partition) *model.Snapshot {
	s := &model.Snapshot{Topics: map[string][]model.Partition{}, Missing: map[string]error{"gone": errors.New("UNKNOWN_TOPIC_OR_PARTITION")}}
	for i := range parts {
		parts[i].TopicPartition = model.TopicPartition{Topic: "t", Partition: int32(i)}
	}
	s.Topics["t"] = parts
	return s
}

// withBrokers gives s the brokers ids, up.
func withBrokers(s *model.Snapshot, ids ...int32) *model.Snapshot {
	s.Brokers = map[int32]model.Broker{}
	for _, id := range ids {
		s.Brokers[id] = model.Broker{ID: id}
	}
	return s
}

func part(replicas, isr []int32, leader int32) model.Partition {
	return model.Partition{Replicas: replicas, ISR: isr, Leader: leader}
}

func tp(p int32) model.TopicPartition {
	return model.TopicPartition{Topic: "t", Partition: p}
}

func TestPreferredLeader(t *testing.T) {
	all := []int32{0, 1, 2}
	reassigning := part(all, all, 0)
	reassigning.Adding = []int32{3}
	for _, tc := range []struct {
		name        string
		snap        *model.Snapshot
		req         PreferredLeaderRequest
		changes     []Change
		noop        []model.TopicPartition
		skipped     []string // "partition: reason substring"
		blocked     []model.TopicPartition
		rejectMatch string
	}{
		{
			name:    "swap positions as the seeds do",
			snap:    snap(part([]int32{0, 1, 2}, all, 0)),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			changes: []Change{{TopicPartition: tp(0), ReplicasBefore: []int32{0, 1, 2}, ReplicasAfter: []int32{2, 1, 0}, LeaderBefore: 0, LeaderAfter: 2}},
		},
		{
			name: "already head and leader is a noop",
			snap: snap(part([]int32{2, 1, 0}, all, 2)),
			req:  PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			noop: []model.TopicPartition{tp(0)},
		},
		{
			name:    "head but not leader: election only",
			snap:    snap(part([]int32{2, 1, 0}, all, 1)),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			changes: []Change{{TopicPartition: tp(0), ReplicasBefore: []int32{2, 1, 0}, ReplicasAfter: []int32{2, 1, 0}, LeaderBefore: 1, LeaderAfter: 2}},
		},
		{
			name:    "leader but not head: reorder, no election needed",
			snap:    snap(part([]int32{0, 1, 2}, all, 2)),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			changes: []Change{{TopicPartition: tp(0), ReplicasBefore: []int32{0, 1, 2}, ReplicasAfter: []int32{2, 1, 0}, LeaderBefore: 2, LeaderAfter: 2}},
		},
		{
			// Down (restarting, or a cluster coming back), or up and catching up: wait
			// and plan again; the caller skips it after the wait.
			name:    "not in the ISR, its broker down, is blocked",
			snap:    snap(part([]int32{0, 1, 2}, []int32{0, 1}, 0)),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			blocked: []model.TopicPartition{tp(0)},
		},
		{
			name:    "not in the ISR, its broker up, is blocked",
			snap:    withBrokers(snap(part([]int32{0, 1, 2}, []int32{0, 1}, 0)), 0, 1, 2),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			blocked: []model.TopicPartition{tp(0)},
		},
		{
			name: "not in the ISR, its replica offline, is blocked",
			snap: withBrokers(snap(func() model.Partition {
				p := part([]int32{0, 1, 2}, []int32{0, 1}, 0)
				p.Offline = []int32{2}
				return p
			}()), 0, 1, 2),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			blocked: []model.TopicPartition{tp(0)},
		},
		{
			// Offline (every replica down, or a cluster coming back): wait and plan again.
			name:    "no leader is blocked",
			snap:    snap(part(all, nil, -1)),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			blocked: []model.TopicPartition{tp(0)},
		},
		{
			name:    "under reassignment is blocked",
			snap:    snap(reassigning),
			req:     PreferredLeaderRequest{Topic: "t", Partitions: []int32{0}, Broker: 2},
			blocked: []model.TopicPartition{tp(0)},
		},
		{
			name: "all partitions: those without the broker are skipped",
			snap: snap(part([]int32{0, 1}, []int32{0, 1}, 0), part([]int32{3, 4}, []int32{3, 4}, 3), part([]int32{1, 0}, []int32{1, 0}, 1)),
			req:  PreferredLeaderRequest{Topic: "t", Broker: 0},
			changes: []Change{
				{TopicPartition: tp(2), ReplicasBefore: []int32{1, 0}, ReplicasAfter: []int32{0, 1}, LeaderBefore: 1, LeaderAfter: 0},
			},
			noop:    []model.TopicPartition{tp(0)},
			skipped: []string{"1: broker 0 is not a replica (replicas [3 4])"},
		},
		{
			name:        "named partition without the broker is rejected",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0), part([]int32{3, 4}, []int32{3, 4}, 3)),
			req:         PreferredLeaderRequest{Topic: "t", Partitions: []int32{0, 1}, Broker: 0},
			rejectMatch: "broker 0 is not a replica of t-1 (replicas [3 4])",
		},
		{
			name:        "broker in no partition of the topic is rejected",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0)),
			req:         PreferredLeaderRequest{Topic: "t", Broker: 9},
			rejectMatch: "broker 9 is not a replica of any partition of topic \"t\"",
		},
		{
			name:        "unknown topic",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0)),
			req:         PreferredLeaderRequest{Topic: "gone", Broker: 0},
			rejectMatch: `topic "gone" does not exist`,
		},
		{
			name:        "partition out of range",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0)),
			req:         PreferredLeaderRequest{Topic: "t", Partitions: []int32{5}, Broker: 0},
			rejectMatch: `partition 5 of topic "t" does not exist (the topic has 1 partitions)`,
		},
		{
			name:        "negative partition",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0)),
			req:         PreferredLeaderRequest{Topic: "t", Partitions: []int32{-1}, Broker: 0},
			rejectMatch: `partition -1 of topic "t" does not exist`,
		},
		{
			name:        "duplicate partition",
			snap:        snap(part([]int32{0, 1}, []int32{0, 1}, 0)),
			req:         PreferredLeaderRequest{Topic: "t", Partitions: []int32{0, 0}, Broker: 0},
			rejectMatch: "lists a partition twice",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := checkPlan(t, tc.snap, tc.rejectMatch, func() (Plan, error) { return PreferredLeader(tc.snap, tc.req) })
			if !ok {
				return
			}
			if !slices.EqualFunc(got.Changes, tc.changes, changeEqual) {
				t.Errorf("changes = %+v, want %+v", got.Changes, tc.changes)
			}
			if !slices.Equal(got.Noop, tc.noop) {
				t.Errorf("noop = %v, want %v", got.Noop, tc.noop)
			}
			if !slices.Equal(got.Blocked, tc.blocked) {
				t.Errorf("blocked = %v, want %v", got.Blocked, tc.blocked)
			}
			var skipped []string
			for _, s := range got.Skipped {
				skipped = append(skipped, itoa(s.Partition)+": "+s.Reason)
			}
			if len(skipped) != len(tc.skipped) {
				t.Fatalf("skipped = %q, want %q", skipped, tc.skipped)
			}
			for i := range skipped {
				if !strings.HasPrefix(skipped[i], tc.skipped[i]) {
					t.Errorf("skipped[%d] = %q, want prefix %q", i, skipped[i], tc.skipped[i])
				}
			}
		})
	}
}

func TestPlanElectionsAndReorders(t *testing.T) {
	p := Plan{Changes: []Change{
		{TopicPartition: tp(0), ReplicasBefore: []int32{0, 1}, ReplicasAfter: []int32{1, 0}, LeaderBefore: 0, LeaderAfter: 1},
		{TopicPartition: tp(1), ReplicasBefore: []int32{1, 0}, ReplicasAfter: []int32{1, 0}, LeaderBefore: 0, LeaderAfter: 1},
		{TopicPartition: tp(2), ReplicasBefore: []int32{0, 1}, ReplicasAfter: []int32{1, 0}, LeaderBefore: 1, LeaderAfter: 1},
	}}
	if got := p.Elections(); !slices.Equal(got, []model.TopicPartition{tp(0), tp(1)}) {
		t.Errorf("elections = %v", got)
	}
	r := p.Reorders()
	if len(r) != 2 || !slices.Equal(r[tp(0)], []int32{1, 0}) || !slices.Equal(r[tp(2)], []int32{1, 0}) {
		t.Errorf("reorders = %v", r)
	}
}

func changeEqual(a, b Change) bool {
	return a.TopicPartition == b.TopicPartition && slices.Equal(a.ReplicasBefore, b.ReplicasBefore) &&
		slices.Equal(a.ReplicasAfter, b.ReplicasAfter) && a.LeaderBefore == b.LeaderBefore && a.LeaderAfter == b.LeaderAfter
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }
