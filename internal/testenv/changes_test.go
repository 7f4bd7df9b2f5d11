package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestDiffChanges(t *testing.T) {
	tp := events.TopicPartition{Topic: "orders", Partition: 3}
	two := int32(2)
	base := events.Change{TopicPartition: tp, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1}
	with := func(f func(*events.Change)) []events.Change {
		c := base
		f(&c)
		return []events.Change{c}
	}
	for _, tc := range []struct {
		name string
		got  []events.Change
		want string // a substring of the diff; "" when equal
	}{
		{"equal", []events.Change{base}, ""},
		{"no replicas", with(func(c *events.Change) { c.ReplicasBefore = nil }), "replicas_before [], want [1 2]"},
		{"replicas after", with(func(c *events.Change) { c.ReplicasAfter = []int32{1, 2, 4} }), "[0] orders-3: replicas_after [1 2 4], want [1 2 3]"},
		{"replicas before", with(func(c *events.Change) { c.ReplicasBefore = []int32{2, 1} }), "replicas_before [2 1], want [1 2]"},
		{"leader before", with(func(c *events.Change) { c.LeaderBefore = 2 }), "leader_before 2, want 1"},
		{"leader after", with(func(c *events.Change) { c.LeaderAfter = 3 }), "leader_after 3, want 1"},
		{"bytes", with(func(c *events.Change) { c.Bytes = 7 }), "bytes 7, want 0"},
		{"broker", with(func(c *events.Change) { c.Broker = &two }), "broker 2, want none"},
		{"dir", with(func(c *events.Change) { c.DirAfter = "/d2" }), `dir_after "/d2", want ""`},
		{"partition", with(func(c *events.Change) { c.Partition = 4 }), "partition orders-4, want orders-3"},
		{"missing", nil, "[0] missing: want orders-3 replicas [1 2]→[1 2 3] leader 1→1"},
		{"extra", append([]events.Change{base}, base), "[1] extra: orders-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DiffChanges(tc.got, []events.Change{base})
			if tc.want == "" && d != "" || tc.want != "" && !strings.Contains(d, tc.want) {
				t.Errorf("diff:\n%s\nwant it to contain %q", d, tc.want)
			}
		})
	}
}

// The comparison DiffChanges replaces: fmt.Sprint shows only the partitions' names, so a
// change list with the wrong replicas passed it.
func TestSprintHidesReplicas(t *testing.T) {
	tp := events.TopicPartition{Topic: "orders", Partition: 0}
	got := []events.Change{{TopicPartition: tp, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 4}}}
	want := []events.Change{{TopicPartition: tp, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fmt.Sprint tells them apart now (%v, %v): this test's premise is gone", got, want)
	}
	if DiffChanges(got, want) == "" {
		t.Fatal("DiffChanges accepts a wrong replica list")
	}
}
