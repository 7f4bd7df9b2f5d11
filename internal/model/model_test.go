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
