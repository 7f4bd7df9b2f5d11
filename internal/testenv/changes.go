package testenv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/events"
)

// DiffChanges compares two change lists field by field, in order, and returns "" when they
// are equal, else one line per difference naming the entry, the partition and the field.
// (fmt.Sprint of a change list shows only the partitions' names: Change embeds
// TopicPartition, whose String method hides every other field.)
func DiffChanges(got, want []events.Change) string {
	var diffs []string
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			diffs = append(diffs, fmt.Sprintf("[%d] missing: want %s", i, FormatChange(want[i])))
			continue
		case i >= len(want):
			diffs = append(diffs, fmt.Sprintf("[%d] extra: %s", i, FormatChange(got[i])))
			continue
		}
		g, w := got[i], want[i]
		field := func(name string, gv, wv any) {
			diffs = append(diffs, fmt.Sprintf("[%d] %s: %s %v, want %v", i, w.TopicPartition, name, gv, wv))
		}
		if g.TopicPartition != w.TopicPartition {
			diffs = append(diffs, fmt.Sprintf("[%d] partition %s, want %s", i, g.TopicPartition, w.TopicPartition))
		}
		if !slices.Equal(g.ReplicasBefore, w.ReplicasBefore) {
			field("replicas_before", g.ReplicasBefore, w.ReplicasBefore)
		}
		if !slices.Equal(g.ReplicasAfter, w.ReplicasAfter) {
			field("replicas_after", g.ReplicasAfter, w.ReplicasAfter)
		}
		if g.LeaderBefore != w.LeaderBefore {
			field("leader_before", g.LeaderBefore, w.LeaderBefore)
		}
		if g.LeaderAfter != w.LeaderAfter {
			field("leader_after", g.LeaderAfter, w.LeaderAfter)
		}
		if gb, wb := brokerString(g.Broker), brokerString(w.Broker); gb != wb {
			field("broker", gb, wb)
		}
		if g.DirBefore != w.DirBefore {
			field("dir_before", fmt.Sprintf("%q", g.DirBefore), fmt.Sprintf("%q", w.DirBefore))
		}
		if g.DirAfter != w.DirAfter {
			field("dir_after", fmt.Sprintf("%q", g.DirAfter), fmt.Sprintf("%q", w.DirAfter))
		}
		if g.Bytes != w.Bytes {
			field("bytes", g.Bytes, w.Bytes)
		}
	}
	return strings.Join(diffs, "\n")
}

// FormatChange shows every field of a change (fmt's %v shows only its partition).
func FormatChange(c events.Change) string {
	s := fmt.Sprintf("%s replicas %v→%v leader %d→%d", c.TopicPartition, c.ReplicasBefore, c.ReplicasAfter, c.LeaderBefore, c.LeaderAfter)
	if c.Broker != nil || c.DirBefore != "" || c.DirAfter != "" || c.Bytes != 0 {
		s += fmt.Sprintf(" broker %s dir %q→%q bytes %d", brokerString(c.Broker), c.DirBefore, c.DirAfter, c.Bytes)
	}
	return s
}

// FormatChanges shows every field of each change of a list.
func FormatChanges(cs []events.Change) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = FormatChange(c)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func brokerString(b *int32) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprint(*b)
}
