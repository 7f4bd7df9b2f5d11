package approval

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Fingerprint is the cluster state a plan depends on, as read when it was made (and read
// again when it is approved): for each touched partition its replicas, ISR, leader and
// ongoing reassignment (and, for a log-dir move, the directory of the moving replica);
// the configs the plan read; the broker set with their racks. A plan runs only on the
// state it was made for.
type Fingerprint struct {
	Partitions []PartitionState `json:"partitions"`
	// Configs: "topic <name> <key>" or "broker <id> <key>" → value ("" unset).
	Configs map[string]string `json:"configs,omitempty"`
	Brokers []Broker          `json:"brokers"`
}

// PartitionState is one touched partition's state.
type PartitionState struct {
	events.TopicPartition
	Replicas []int32 `json:"replicas"`
	ISR      []int32 `json:"isr"`
	Leader   int32   `json:"leader"`
	// Adding and Removing are the partition's ongoing reassignment (empty: none).
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
	// Dirs, for log-dir moves: broker → the log directory of its replica ("" unknown), and
	// "→dir" appended while a move to dir is in flight.
	Dirs map[int32]string `json:"dirs,omitempty"`
}

// Broker is one broker of the cluster.
type Broker struct {
	ID   int32  `json:"id"`
	Rack string `json:"rack,omitempty"`
}

// Sorted returns f with its lists in a stable order (partitions by topic and number,
// brokers by id, every id list as read: an order of replicas is state, an ISR's is not).
func (f Fingerprint) Sorted() Fingerprint {
	f.Partitions = slices.Clone(f.Partitions)
	for i := range f.Partitions {
		p := &f.Partitions[i]
		p.ISR = slices.Sorted(slices.Values(p.ISR))
		p.Adding = slices.Sorted(slices.Values(p.Adding))
		p.Removing = slices.Sorted(slices.Values(p.Removing))
	}
	slices.SortFunc(f.Partitions, func(a, b PartitionState) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	f.Brokers = slices.Clone(f.Brokers)
	slices.SortFunc(f.Brokers, func(a, b Broker) int { return int(a.ID) - int(b.ID) })
	return f
}

// Diff lists, in words, each way now differs from was (the state a plan was made for),
// in a stable order: "orders-3: leader 2 → 4", "orders-3: isr [1 2 3] → [1 2]",
// "brokers: 4 added", "topic orders min.insync.replicas: 2 → 1". Empty: the plan may run.
func Diff(was, now Fingerprint) []string {
	was, now = was.Sorted(), now.Sorted()
	var out []string
	cur := map[events.TopicPartition]PartitionState{}
	for _, p := range now.Partitions {
		cur[p.TopicPartition] = p
	}
	for _, w := range was.Partitions {
		n, ok := cur[w.TopicPartition]
		name := w.TopicPartition.String()
		if !ok {
			out = append(out, name+": gone")
			continue
		}
		if !slices.Equal(w.Replicas, n.Replicas) {
			out = append(out, fmt.Sprintf("%s: replicas %s → %s", name, ids(w.Replicas), ids(n.Replicas)))
		}
		if w.Leader != n.Leader {
			out = append(out, fmt.Sprintf("%s: leader %s → %s", name, leader(w.Leader), leader(n.Leader)))
		}
		if !slices.Equal(w.ISR, n.ISR) {
			out = append(out, fmt.Sprintf("%s: isr %s → %s", name, ids(w.ISR), ids(n.ISR)))
		}
		if !slices.Equal(w.Adding, n.Adding) || !slices.Equal(w.Removing, n.Removing) {
			out = append(out, fmt.Sprintf("%s: reassignment %s → %s", name, reassignment(w), reassignment(n)))
		}
		for _, b := range slices.Sorted(maps.Keys(union(w.Dirs, n.Dirs))) {
			if w.Dirs[b] != n.Dirs[b] {
				out = append(out, fmt.Sprintf("%s: log dir of broker %d %s → %s", name, b, dir(w.Dirs[b]), dir(n.Dirs[b])))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(unionS(was.Configs, now.Configs))) {
		if was.Configs[k] != now.Configs[k] {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, value(was.Configs[k]), value(now.Configs[k])))
		}
	}
	wb, nb := brokerMap(was.Brokers), brokerMap(now.Brokers)
	var added, gone []string
	for _, id := range slices.Sorted(maps.Keys(union(wb, nb))) {
		w, inW := wb[id]
		n, inN := nb[id]
		switch {
		case !inW:
			added = append(added, strconv.Itoa(int(id)))
		case !inN:
			gone = append(gone, strconv.Itoa(int(id)))
		case w != n:
			out = append(out, fmt.Sprintf("broker %d: rack %s → %s", id, value(w), value(n)))
		}
	}
	if len(added) > 0 {
		out = append(out, "brokers: "+strings.Join(added, ", ")+" added")
	}
	if len(gone) > 0 {
		out = append(out, "brokers: "+strings.Join(gone, ", ")+" gone")
	}
	return out
}

// Consistent checks that a fingerprint read right after a plan shows the state the plan's
// changes start from (their replicas and leader before, and dirs): a read that does not
// was made across a change, and the plan must be made again. Empty: consistent.
func Consistent(changes []events.Change, f Fingerprint) []string {
	cur := map[events.TopicPartition]PartitionState{}
	for _, p := range f.Partitions {
		cur[p.TopicPartition] = p
	}
	var out []string
	for _, c := range changes {
		p, ok := cur[c.TopicPartition]
		name := c.TopicPartition.String()
		switch {
		case !ok:
			out = append(out, name+": not read")
		case c.Broker != nil:
			if d := p.Dirs[*c.Broker]; d != c.DirBefore {
				out = append(out, fmt.Sprintf("%s: log dir of broker %d %s, the plan has %s", name, *c.Broker, dir(d), dir(c.DirBefore)))
			}
		default:
			if !slices.Equal(p.Replicas, c.ReplicasBefore) {
				out = append(out, fmt.Sprintf("%s: replicas %s, the plan has %s", name, ids(p.Replicas), ids(c.ReplicasBefore)))
			}
			if p.Leader != c.LeaderBefore {
				out = append(out, fmt.Sprintf("%s: leader %s, the plan has %s", name, leader(p.Leader), leader(c.LeaderBefore)))
			}
		}
	}
	return out
}

func ids(l []int32) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.Itoa(int(v))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func leader(l int32) string {
	if l < 0 {
		return "none"
	}
	return strconv.Itoa(int(l))
}

func reassignment(p PartitionState) string {
	if len(p.Adding) == 0 && len(p.Removing) == 0 {
		return "none"
	}
	return fmt.Sprintf("adding %s removing %s", ids(p.Adding), ids(p.Removing))
}

func dir(d string) string {
	if d == "" {
		return "unknown"
	}
	return d
}

func value(v string) string {
	if v == "" {
		return "unset"
	}
	return v
}

func brokerMap(l []Broker) map[int32]string {
	m := make(map[int32]string, len(l))
	for _, b := range l {
		m[b.ID] = b.Rack
	}
	return m
}

func union[V any](a, b map[int32]V) map[int32]V {
	m := maps.Clone(a)
	if m == nil {
		m = map[int32]V{}
	}
	maps.Copy(m, b)
	return m
}

func unionS(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, b)
	return m
}
