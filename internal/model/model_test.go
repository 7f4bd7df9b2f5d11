package model

import (
	"slices"
	"testing"
)

// The target of a reassignment, also from a read whose metadata lags the list of
// reassignments (the replicas do not show the one being added yet).
func TestReassigningTo(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Partition
		want []int32
	}{
		{"none", Partition{Replicas: []int32{1, 2}}, nil},
		{"adding", Partition{Replicas: []int32{1, 2, 3}, Adding: []int32{3}}, []int32{1, 2, 3}},
		{"adding, metadata lagging", Partition{Replicas: []int32{1, 2}, Adding: []int32{3}}, []int32{1, 2, 3}},
		{"moving", Partition{Replicas: []int32{1, 2, 3}, Adding: []int32{3}, Removing: []int32{1}}, []int32{2, 3}},
		{"removing", Partition{Replicas: []int32{1, 2, 3}, Removing: []int32{3}}, []int32{1, 2}},
		{"before 2.4", Partition{Replicas: []int32{1, 2, 3}, Target: []int32{2, 3}}, []int32{2, 3}},
	} {
		if got := tc.p.ReassigningTo(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A read older than what an operation left: a lower leader epoch, or the same epoch with
// the replicas from before the change (KRaft bumps no leader epoch for a reorder or an
// added replica). A change made since at the same epoch is not older.
func TestSeenOlder(t *testing.T) {
	s := Seen{Replicas: []int32{2, 1, 3}, Leader: 2, LeaderEpoch: 5, Before: []int32{1, 2, 3}}
	for _, tc := range []struct {
		name  string
		p     Partition
		older bool
	}{
		{"as left", Partition{Replicas: []int32{2, 1, 3}, Leader: 2, LeaderEpoch: 5}, false},
		{"a lower epoch", Partition{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4}, true},
		{"a lower epoch, even as left", Partition{Replicas: []int32{2, 1, 3}, Leader: 2, LeaderEpoch: 4}, true},
		{"the same epoch, the replicas before", Partition{Replicas: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 5}, true},
		{"the same epoch, a replica added since", Partition{Replicas: []int32{2, 1, 3, 4}, Leader: 2, LeaderEpoch: 5}, false},
		{"a higher epoch", Partition{Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 6}, false},
	} {
		if got := s.Older(tc.p); got != tc.older {
			t.Errorf("%s: older %v, want %v", tc.name, got, tc.older)
		}
	}
	if (Seen{Replicas: []int32{1}, LeaderEpoch: 5}).Older(Partition{Replicas: []int32{2}, LeaderEpoch: 5}) {
		t.Error("a Seen without its replicas before took another state at its epoch for an older one")
	}
}
