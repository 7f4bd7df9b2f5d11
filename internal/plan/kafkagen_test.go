package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kafkamender/kafkamender/internal/model"
)

// Reference algorithms the replication-factor planner is compared with, and the synthetic
// clusters it is compared on. Test code only.

// kafkaAssign is Kafka's AdminUtils.assignReplicasToBrokers (the ZooKeeper-era algorithm
// that kafka-topics.sh --create, --alter --partitions and kafka-reassign-partitions.sh
// --generate use): rack-aware when every broker has a rack, rack-unaware when none has.
// brokers must be sorted by id. A negative fixedStartIndex draws the start index and the
// replica shift from rnd, as Kafka does.
func kafkaAssign(brokers []model.Broker, nPartitions, rf, fixedStartIndex, startPartitionID int, rnd *rand.Rand) [][]int32 {
	withRack := 0
	for _, b := range brokers {
		if b.Rack != "" {
			withRack++
		}
	}
	switch {
	case rf < 1 || rf > len(brokers):
		panic(fmt.Sprintf("replication factor %d with %d brokers", rf, len(brokers)))
	case withRack == 0:
		ids := make([]int32, len(brokers))
		for i, b := range brokers {
			ids[i] = b.ID
		}
		return kafkaAssignRackUnaware(nPartitions, rf, ids, fixedStartIndex, startPartitionID, rnd)
	case withRack < len(brokers):
		panic("not all brokers have rack information for replica rack aware assignment")
	}
	return kafkaAssignRackAware(nPartitions, rf, brokers, fixedStartIndex, startPartitionID, rnd)
}

func kafkaAssignRackUnaware(nPartitions, rf int, brokers []int32, fixedStartIndex, startPartitionID int, rnd *rand.Rand) [][]int32 {
	n := len(brokers)
	startIndex, shift := fixedStartIndex, fixedStartIndex
	if fixedStartIndex < 0 {
		startIndex, shift = rnd.IntN(n), rnd.IntN(n)
	}
	out := make([][]int32, 0, nPartitions)
	cur := max(0, startPartitionID)
	for range nPartitions {
		if cur > 0 && cur%n == 0 {
			shift++
		}
		first := (cur + startIndex) % n
		r := []int32{brokers[first]}
		for j := range rf - 1 {
			r = append(r, brokers[kafkaReplicaIndex(first, shift, j, n)])
		}
		out = append(out, r)
		cur++
	}
	return out
}

func kafkaAssignRackAware(nPartitions, rf int, brokers []model.Broker, fixedStartIndex, startPartitionID int, rnd *rand.Rand) [][]int32 {
	rackOf := map[int32]string{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	arranged := kafkaRackAlternated(brokers)
	n := len(arranged)
	numRacks := len(kafkaRacks(brokers))
	startIndex, shift := fixedStartIndex, fixedStartIndex
	if fixedStartIndex < 0 {
		startIndex, shift = rnd.IntN(n), rnd.IntN(n)
	}
	out := make([][]int32, 0, nPartitions)
	cur := max(0, startPartitionID)
	for range nPartitions {
		if cur > 0 && cur%n == 0 {
			shift++
		}
		first := (cur + startIndex) % n
		leader := arranged[first]
		r := []int32{leader}
		racks := map[string]bool{rackOf[leader]: true}
		have := map[int32]bool{leader: true}
		k := 0
		for range rf - 1 {
			for {
				b := arranged[kafkaReplicaIndex(first, shift*numRacks, k, n)]
				k++
				// Skip a broker in a rack that has a replica while some rack has none, and a
				// broker that has a replica while some broker has none.
				if (!racks[rackOf[b]] || len(racks) == numRacks) && (!have[b] || len(have) == n) {
					r = append(r, b)
					racks[rackOf[b]], have[b] = true, true
					break
				}
			}
		}
		out = append(out, r)
		cur++
	}
	return out
}

func kafkaReplicaIndex(first, secondShift, j, n int) int {
	shift := 1 + (secondShift+j)%(n-1)
	return (first + shift) % n
}

func kafkaRacks(brokers []model.Broker) []string {
	var racks []string
	for _, b := range brokers {
		racks = append(racks, b.Rack)
	}
	slices.Sort(racks)
	return slices.Compact(racks)
}

// kafkaRackAlternated is Kafka's getRackAlternatedBrokerList: racks in name order, each
// rack's brokers in id order, one broker of each rack in turn.
func kafkaRackAlternated(brokers []model.Broker) []int32 {
	byRack := map[string][]int32{}
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	racks := kafkaRacks(brokers)
	for _, r := range racks {
		slices.Sort(byRack[r])
	}
	var out []int32
	for len(out) < len(brokers) {
		for _, r := range racks {
			if len(byRack[r]) > 0 {
				out = append(out, byRack[r][0])
				byRack[r] = byRack[r][1:]
			}
		}
	}
	return out
}

// kafkaAddPartitions is AdminZkClient.addPartitions without a manual assignment: the
// start index is the position of the first broker whose id is >= the head of partition
// 0's replicas, also used as the replica shift, and numbering continues.
func kafkaAddPartitions(existing [][]int32, brokers []model.Broker, add int) [][]int32 {
	start := 0
	for i, b := range brokers {
		if b.ID >= existing[0][0] {
			start = i
			break
		}
	}
	return kafkaAssign(brokers, add, len(existing[0]), start, len(existing), nil)
}

// kafkaGenerate is what kafka-reassign-partitions.sh --generate proposes for a whole topic
// given the new replication factor (the JSON a user would then edit): a fresh assignment
// of every partition from a random start, ignoring where the replicas are now.
func kafkaGenerate(s *model.Snapshot, topic string, factor int, rnd *rand.Rand) [][]int32 {
	return kafkaAssign(sortedBrokers(s), len(s.Topics[topic]), factor, -1, -1, rnd)
}

// seedNextBroker is the seed article's rule: append the broker after the last replica in
// broker-id order (wrapping, skipping brokers already present) until the factor is
// reached; to lower, drop replicas from the tail.
func seedNextBroker(s *model.Snapshot, topic string, factor int) [][]int32 {
	var ids []int32
	for _, b := range sortedBrokers(s) {
		ids = append(ids, b.ID)
	}
	ps := s.Topics[topic]
	out := make([][]int32, len(ps))
	for i, p := range ps {
		r := slices.Clone(p.Replicas)
		if len(r) >= factor {
			out[i] = r[:factor]
			continue
		}
		for len(r) < factor {
			last := r[len(r)-1]
			k, _ := slices.BinarySearch(ids, last+1) // the next live broker by id
			for slices.Contains(r, ids[k%len(ids)]) {
				k++
			}
			r = append(r, ids[k%len(ids)])
		}
		out[i] = r
	}
	return out
}

func sortedBrokers(s *model.Snapshot) []model.Broker {
	out := make([]model.Broker, 0, len(s.Brokers))
	for _, b := range s.Brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b model.Broker) int { return int(a.ID) - int(b.ID) })
	return out
}

// oursAssignment runs ReplicationFactor and returns the topic's new assignment.
func oursAssignment(s *model.Snapshot, topic string, factor int) ([][]int32, error) {
	p, err := ReplicationFactor(s, RFRequest{Topic: topic, Factor: factor, MinISR: 1})
	if err != nil {
		return nil, err
	}
	return applyChanges(s, topic, p), nil
}

// applyChanges returns the topic's assignment once the plan's changes are made.
func applyChanges(s *model.Snapshot, topic string, p Plan) [][]int32 {
	ps := s.Topics[topic]
	out := make([][]int32, len(ps))
	for i := range ps {
		out[i] = ps[i].Replicas
	}
	for _, c := range p.Changes {
		out[c.Partition] = c.ReplicasAfter
	}
	return out
}

// rfOutcome measures an assignment of topic against the snapshot's current one.
type rfOutcome struct {
	moved, min   int // replicas that copy data, and the least possible
	spread       int // max − min of replicas per live broker, whole cluster
	before       int // that spread before the change
	rackShort    int // partitions on fewer racks than min(factor, racks)
	lowDiversity int // partitions whose new replicas ignored an emptier rack (rule 1 broken)
}

func measureRF(s *model.Snapshot, topic string, factor int, assignment [][]int32) rfOutcome {
	var o rfOutcome
	loads := map[int32]int{}
	for id := range s.Brokers {
		loads[id] = 0
	}
	for name, ps := range s.Topics {
		for i, p := range ps {
			for _, r := range p.Replicas {
				if _, ok := loads[r]; ok {
					loads[r]++
				}
			}
			if name != topic {
				continue
			}
			after := assignment[i]
			for _, r := range after {
				if !slices.Contains(p.Replicas, r) {
					o.moved++
				}
			}
			o.min += max(0, factor-len(p.Replicas))
		}
	}
	o.before = spreadOf(loads)
	for i, p := range s.Topics[topic] {
		for _, r := range p.Replicas {
			if _, ok := loads[r]; ok {
				loads[r]--
			}
		}
		for _, r := range assignment[i] {
			if _, ok := loads[r]; ok {
				loads[r]++
			}
		}
	}
	o.spread = spreadOf(loads)
	racks := len(kafkaRacks(sortedBrokers(s)))
	for i, p := range s.Topics[topic] {
		after := assignment[i]
		var rs []string
		for _, r := range after {
			if b, ok := s.Brokers[r]; ok {
				rs = append(rs, b.Rack)
			}
		}
		slices.Sort(rs)
		if len(slices.Compact(rs)) < min(factor, racks) {
			o.rackShort++
		}
		if len(after) > len(p.Replicas) && slices.Equal(after[:len(p.Replicas)], p.Replicas) && !fillsFewest(s, p.Replicas, after[len(p.Replicas):]) {
			o.lowDiversity++
		}
	}
	return o
}

func spreadOf(loads map[int32]int) int {
	lo, hi, first := 0, 0, true
	for _, n := range loads {
		if first || n < lo {
			lo = n
		}
		if first || n > hi {
			hi = n
		}
		first = false
	}
	return hi - lo
}

// fillsFewest reports whether the new replicas, appended to old, can be explained by rule
// 1 of ReplicationFactor: added in some order, each in a rack with the fewest replicas of
// the partition among the racks that still had a live broker without one. It tries every
// order (new is short).
func fillsFewest(s *model.Snapshot, old, added []int32) bool {
	rackN := map[string]int{}
	for _, r := range old {
		if b, ok := s.Brokers[r]; ok {
			rackN[b.Rack]++
		}
	}
	have := map[int32]bool{}
	for _, r := range old {
		have[r] = true
	}
	var try func(left []int32) bool
	try = func(left []int32) bool {
		if len(left) == 0 {
			return true
		}
		fewest := -1 // the fewest replicas in a rack with a broker left
		for id, b := range s.Brokers {
			if !have[id] && (fewest < 0 || rackN[b.Rack] < fewest) {
				fewest = rackN[b.Rack]
			}
		}
		for k, r := range left {
			b, ok := s.Brokers[r]
			if !ok || have[r] || rackN[b.Rack] != fewest {
				continue
			}
			have[r] = true
			rackN[b.Rack]++
			rest := append(slices.Clone(left[:k]), left[k+1:]...)
			ok = try(rest)
			have[r] = false
			rackN[b.Rack]--
			if ok {
				return true
			}
		}
		return false
	}
	return try(added)
}

// synthSpec describes a synthetic cluster with a history: brokers 1..Early first, the rest
// added later; racks filled in blocks of ids (as racks are usually racked), the late
// brokers spread over the racks; topic "events" (the one changed) and Others other topics
// created with Kafka's own assignment at various times, grown with Kafka's partition
// expansion (before and after the late brokers came), and some partitions assigned by
// hand (ignoring racks and balance).
type synthSpec struct {
	Brokers, Early, Racks int
	Partitions            int // of "events"
	RF                    int // of "events"
	Others                int
	Seed                  uint64
}

func synthCluster(spec synthSpec) *model.Snapshot {
	rnd := rand.New(rand.NewPCG(spec.Seed, 0x6b61666b61))
	s := &model.Snapshot{Controller: 1, Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	per := spec.Early / spec.Racks
	for id := 1; id <= spec.Brokers; id++ {
		rack := (id - 1) / max(per, 1)
		if id > spec.Early {
			rack = (id - spec.Early - 1) % spec.Racks
		}
		rack = min(rack, spec.Racks-1)
		s.Brokers[int32(id)] = model.Broker{ID: int32(id), Rack: fmt.Sprintf("rack-%c", 'a'+rack)}
	}
	all := sortedBrokers(s)
	early := all[:spec.Early]
	grow := func(n, rf int, late bool) [][]int32 {
		// Created on the early brokers, or (late) on all; then expanded 1 to 3 times, the
		// expansions after the late brokers came using all of them.
		parts := []int{n}
		for range rnd.IntN(3) {
			k := parts[0] / (2 + rnd.IntN(3))
			parts[0] -= k
			parts = append(parts, k)
		}
		on := early
		if late {
			on = all
		}
		a := kafkaAssign(on, parts[0], rf, -1, -1, rnd)
		for i, k := range parts[1:] {
			if k == 0 {
				continue
			}
			if i > 0 || rnd.IntN(2) == 0 {
				on = all
			}
			a = append(a, kafkaAddPartitions(a, on, k)...)
		}
		return a
	}
	handMade := func(a [][]int32, share float64) {
		for i := range a {
			if rnd.Float64() >= share {
				continue
			}
			switch rnd.IntN(3) {
			case 0: // someone moved a replica off a busy broker onto a new one
				a[i][rnd.IntN(len(a[i]))] = int32(spec.Early + 1 + rnd.IntN(spec.Brokers-spec.Early))
				if len(slices.Compact(slices.Sorted(slices.Values(a[i])))) != len(a[i]) {
					a[i] = handPick(rnd, spec.Brokers, len(a[i]))
				}
			default: // an assignment typed by hand: any brokers, racks not considered
				a[i] = handPick(rnd, min(spec.Brokers, 6+rnd.IntN(spec.Brokers)), len(a[i]))
			}
		}
	}
	add := func(name string, a [][]int32) {
		ps := make([]model.Partition, len(a))
		for i, r := range a {
			ps[i] = model.Partition{
				TopicPartition: model.TopicPartition{Topic: name, Partition: int32(i)},
				Replicas:       r, ISR: slices.Clone(r), Leader: r[0],
			}
		}
		s.Topics[name] = ps
	}
	ev := grow(spec.Partitions, spec.RF, false)
	handMade(ev, 0.02)
	add("events", ev)
	for t := range spec.Others {
		n := max(1, spec.Partitions/(10+rnd.IntN(40)))
		rf := 2 + rnd.IntN(2)
		a := grow(n, rf, rnd.IntN(2) == 0)
		handMade(a, 0.05)
		add(fmt.Sprintf("topic-%02d", t), a)
	}
	return s
}

// handPick returns n distinct brokers among 1..upto in the order drawn.
func handPick(rnd *rand.Rand, upto, n int) []int32 {
	out := make([]int32, 0, n)
	for _, k := range rnd.Perm(upto)[:n] {
		out = append(out, int32(k+1))
	}
	return out
}
