package main

import (
	"maps"
	"slices"
	"testing"
)

func TestMinimumCopy(t *testing.T) {
	before := map[int32][]int32{0: {1, 2}, 1: {2, 3}, 2: {3, 4}, 3: {4, 1}}
	sizes := map[int32]int64{0: 10, 1: 20, 2: 30, 3: 40}
	if got := minimumCopy(sizes, before, 4); got != 70 {
		t.Errorf("minimumCopy = %d, want 70 (partitions 2 and 3, once each)", got)
	}
	if got := minimumCopy(sizes, before, 5); got != 0 {
		t.Errorf("minimumCopy of a broker holding nothing = %d, want 0", got)
	}
	// The minimum is what copied gives for a repair adding one replica to each.
	after := map[int32][]int32{0: {1, 2}, 1: {2, 3}, 2: {3, 1}, 3: {2, 1}}
	if c, m := copied(sizes, before, after), minimumCopy(sizes, before, 4); c != m {
		t.Errorf("copied %d, minimum %d: want equal for a minimal repair", c, m)
	}
}

func TestProposedAssignment(t *testing.T) {
	out := `Current partition replica assignment
{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,4],"log_dirs":["any","any"]}]}

Proposed partition reassignment configuration
{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,3],"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[2,1],"log_dirs":["any","any"]}]}
`
	got, err := proposedAssignment(out, "t")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32][]int32{0: {1, 3}, 1: {2, 1}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("proposedAssignment = %v, want %v", got, want)
	}
	for name, bad := range map[string]string{
		"no proposal":  "Current partition replica assignment\n{}\n",
		"not json":     "Proposed partition reassignment configuration\nnope\n",
		"other topic":  "Proposed partition reassignment configuration\n" + `{"version":1,"partitions":[{"topic":"u","partition":0,"replicas":[1]}]}`,
		"no partition": "Proposed partition reassignment configuration\n" + `{"version":1,"partitions":[]}`,
	} {
		if _, err := proposedAssignment(bad, "t"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestIsPartitionDir(t *testing.T) {
	for name, want := range map[string]bool{
		"bench-failed-x-0-1-12":     true,
		"bench-failed-x-0-1-3":      true,
		"bench-failed-x-0-1-12-13":  false, // another topic's, whose name extends this one
		"bench-failed-x-0-1-a":      false,
		"bench-failed-x-0-1-":       false,
		"bench-failed-x-0-1.delete": false,
		"other-3":                   false,
	} {
		if got := isPartitionDir(name, "bench-failed-x-0-1"); got != want {
			t.Errorf("isPartitionDir(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestReassignThrottles(t *testing.T) {
	current := map[int32][]int32{0: {1, 2}, 1: {3, 4}}
	proposed := map[int32][]int32{0: {1, 2}, 1: {2, 3}}
	brokers, leaders, followers := reassignThrottles(current, proposed, 4)
	if !slices.Equal(brokers, []int32{1, 2, 3}) {
		t.Errorf("brokers %v, want [1 2 3] (the lost 4 left out)", brokers)
	}
	if leaders != "0:1,0:2,1:3,1:4" {
		t.Errorf("leaders %q", leaders)
	}
	if followers != "1:2" {
		t.Errorf("followers %q", followers)
	}
}

func TestSameSet(t *testing.T) {
	if !sameSet([]int32{1, 2}, []int32{2, 1}) || sameSet([]int32{1, 2}, []int32{1, 3}) || sameSet([]int32{1}, []int32{1, 2}) {
		t.Error("sameSet")
	}
}
