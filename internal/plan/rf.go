package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/model"
)

// RFRequest asks for the partitions of Topic to have Factor replicas each.
type RFRequest struct {
	Topic      string
	Partitions []int32 // nil = every partition of the topic
	Factor     int
	// MinISR is the topic's effective min.insync.replicas (its topic config, else the
	// brokers' default), which the caller reads. Below 1 (unknown) it is taken as 1.
	MinISR int
	// AllowInternal allows changing an internal topic: any name that starts with "__",
	// such as __consumer_offsets and __transaction_state.
	AllowInternal bool
	// Capacity bounds the bytes each broker may be planned to hold after a raise (zero:
	// not checked), as in VacateRequest.
	Capacity Capacity
}

// SkipNoLeader: the partition has no leader, so new replicas would have nothing to copy
// from and a reassignment of it could not complete.
const SkipNoLeader SkipCode = "no_leader"

// ReplicationFactor plans changing the number of replicas of req.Topic's partitions to
// req.Factor with the least data movement, never moving leadership. Kafka's --generate
// recomputes the whole assignment and moves most replicas; this only appends and trims.
//
// Raise. A partition with r < Factor replicas gets Δ = Factor − r live brokers appended to
// its assigned replicas (AR). The existing replicas and their order are kept, so exactly Δ
// replicas copy data (the least possible) and the preferred leader and the leader stay
// (Change.LeaderAfter == Change.LeaderBefore). The new brokers are chosen so that:
//
//  1. Racks stay as diverse as the cluster allows: each new replica goes to a rack with the
//     fewest replicas of the partition among the racks that still have a broker without
//     one (water filling). Replicas on brokers that are not live have no known rack and
//     count in none.
//  2. The per-broker replica counts of the whole snapshot (every topic: the caller should
//     read them all) end as even as rule 1 allows: the counts are decreasingly minimal over
//     every choice rule 1 allows (no other choice gives a sorted, largest-first count
//     vector that is lexicographically smaller), hence they have the smallest maximum, the
//     largest minimum and the smallest max − min spread at once.
//  3. Ties go to the lowest broker id.
//
// How: a greedy pass places the partitions' new replicas one at a time, the partitions
// with the fewest candidate brokers first, each replica on the least loaded broker (then
// the lowest id) of a rack that rule 1 allows; a repair pass then moves new replicas along
// cost-reducing chains while any exists (see rfRaiser.repair).
//
// Racks are Broker.Rack; brokers without one share the rack "". On a cluster without racks
// this makes rule 1 vacuous (giving every broker its own rack would too, since a
// partition's replicas are on distinct brokers); on a cluster where only some brokers have
// a rack, those without one are treated as one more rack (Kafka's own assignment refuses
// such clusters).
//
// Lower. A partition with r > Factor replicas loses r − Factor of them, never its leader;
// the others keep their order. One at a time, the replica removed is the first by: on a
// broker that is not live (not in the snapshot's brokers), then out of sync, then in the
// rack holding the most replicas of the partition (racks stay diverse), then on the most
// loaded broker (counts of the whole snapshot, updated as replicas go), then the last in
// the AR.
//
// Per partition:
//   - under reassignment: Blocked (the caller waits and plans again);
//   - already Factor replicas: Noop;
//   - no leader: skipped (SkipNoLeader);
//   - otherwise one Change, raising or lowering.
//
// Rejected (*RejectError, nothing may be changed): Factor < 1; an internal topic (name
// starting with "__") unless AllowInternal; a topic the snapshot does not have; Factor
// above the number of live brokers; Factor below MinISR (producers with acks=all would
// fail); a named partition that does not exist or is named twice.
//
// The plan is deterministic, in partition order, and the snapshot is not modified. Time is
// O(P·B) for the P partitions of the snapshot and B live brokers, plus the repair pass
// (little once the greedy pass is done: every chain it applies lowers the sum of squared
// counts).
func ReplicationFactor(s *model.Snapshot, req RFRequest) (Plan, error) {
	factor := req.Factor
	if factor < 1 {
		return Plan{}, reject("replication factor %d is below 1", factor)
	}
	if strings.HasPrefix(req.Topic, "__") && !req.AllowInternal {
		return Plan{}, reject("topic %q is internal: changing its replication factor must be allowed explicitly", req.Topic)
	}
	if err, ok := s.Missing[req.Topic]; ok {
		return Plan{}, reject("topic %q does not exist (%v)", req.Topic, err)
	}
	parts, ok := s.Topics[req.Topic]
	if !ok {
		return Plan{}, reject("topic %q was not read", req.Topic)
	}
	if factor > len(s.Brokers) {
		return Plan{}, reject("replication factor %d is above the %d live brokers", factor, len(s.Brokers))
	}
	if minISR := max(req.MinISR, 1); factor < minISR {
		return Plan{}, reject("replication factor %d is below min.insync.replicas %d of topic %q: producers with acks=all would fail", factor, minISR, req.Topic)
	}
	ids, err := rfPartitions(parts, req)
	if err != nil {
		return Plan{}, err
	}

	c := newRFCluster(s)
	var (
		plan   Plan
		after  = make([][]int32, len(ids)) // new AR of ids[k]; nil: unchanged
		raises = make([]int, 0, len(ids))  // positions in ids
	)
	for k, id := range ids {
		p := &parts[id]
		switch r := len(p.Replicas); {
		case p.Reassigning():
			plan.Blocked = append(plan.Blocked, p.TopicPartition)
		case r == factor:
			plan.Noop = append(plan.Noop, p.TopicPartition)
		case p.Leader < 0:
			plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Reason: fmt.Sprintf("no leader: cannot change from %d to %d replicas (replicas %v, isr %v)", r, factor, p.Replicas, p.ISR), Code: SkipNoLeader})
		case r > factor:
			after[k] = c.trim(p, r-factor)
		default:
			raises = append(raises, k)
		}
	}
	if len(raises) > 0 {
		wants := make([]rfWant, len(raises))
		for i, k := range raises {
			p := &parts[ids[k]]
			wants[i] = rfWant{p: p, pos: k, old: p.Replicas, add: factor - len(p.Replicas), prefer: -1}
		}
		ra := newRFRaiser(c, wants)
		ra.greedy()
		ra.repair()
		if err := ra.fit(req.Capacity); err != nil {
			return Plan{}, err
		}
		ra.appended(after, factor)
	}
	n, size := 0, 0
	for k, a := range after {
		if a != nil {
			n++
			size += len(parts[ids[k]].Replicas)
		}
	}
	if n > 0 {
		plan.Changes = make([]Change, 0, n)
	}
	arena := make([]int32, size)
	for k, a := range after {
		if a == nil {
			continue
		}
		p := &parts[ids[k]]
		r := len(p.Replicas)
		before := arena[:r:r]
		arena = arena[r:]
		copy(before, p.Replicas)
		plan.Changes = append(plan.Changes, Change{
			TopicPartition: p.TopicPartition, ReplicasBefore: before, ReplicasAfter: a,
			LeaderBefore: p.Leader, LeaderAfter: p.Leader,
		})
	}
	return plan, nil
}

// rfPartitions returns the partition numbers the request selects, ascending.
func rfPartitions(parts []model.Partition, req RFRequest) ([]int32, error) {
	if req.Partitions == nil {
		ids := make([]int32, len(parts))
		for i := range parts {
			ids[i] = int32(i)
		}
		return ids, nil
	}
	ids := slices.Clone(req.Partitions)
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(req.Partitions) {
		return nil, reject("partitions %v lists a partition twice", req.Partitions)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= len(parts) {
			return nil, reject("partition %d of topic %q does not exist (the topic has %d partitions)", id, req.Topic, len(parts))
		}
	}
	return ids, nil
}

// rfCluster is the live brokers, densely numbered in id order, with their racks and their
// replica counts over the whole snapshot.
type rfCluster struct {
	ids      []int32     // dense number → broker id
	index    brokerIndex // broker id → dense number
	rackOf   []int32     // dense number → rack number (racks numbered in name order)
	rackSize []int32     // rack number → live brokers in it
	maxRack  int32       // the largest rack size
	load     []int       // dense number → replicas on the broker
	rackN    []int32     // scratch, per rack, kept zero between uses
}

func newRFCluster(s *model.Snapshot) *rfCluster {
	ids := make([]int32, 0, len(s.Brokers))
	var names []string
	for id, b := range s.Brokers {
		ids = append(ids, id)
		names = append(names, b.Rack)
	}
	slices.Sort(ids)
	slices.Sort(names)
	names = slices.Compact(names)
	c := &rfCluster{
		ids: ids, index: newBrokerIndex(ids), rackOf: make([]int32, len(ids)),
		rackSize: make([]int32, len(names)), load: make([]int, len(ids)), rackN: make([]int32, len(names)),
	}
	for d, id := range ids {
		r, _ := slices.BinarySearch(names, s.Brokers[id].Rack)
		c.rackOf[d] = int32(r)
		c.rackSize[r]++
		c.maxRack = max(c.maxRack, c.rackSize[r])
	}
	for _, ps := range s.Topics {
		for i := range ps {
			for _, r := range ps[i].Replicas {
				if d, ok := c.index.get(r); ok {
					c.load[d]++
				}
			}
		}
	}
	return c
}

// trim returns p's replicas without the n that the rules of ReplicationFactor remove, and
// takes those off the loads.
func (c *rfCluster) trim(p *model.Partition, n int) []int32 {
	type key struct {
		dead, outOfSync bool
		rack            int32 // replicas of the partition in the replica's rack
		load            int
		pos             int
	}
	better := func(a, b key) bool { // a is removed before b
		switch {
		case a.dead != b.dead:
			return a.dead
		case a.outOfSync != b.outOfSync:
			return a.outOfSync
		case a.rack != b.rack:
			return a.rack > b.rack
		case a.load != b.load:
			return a.load > b.load
		}
		return a.pos > b.pos
	}
	after := slices.Clone(p.Replicas)
	for _, r := range after {
		if d, ok := c.index.get(r); ok {
			c.rackN[c.rackOf[d]]++
		}
	}
	for range n {
		best, bk := -1, key{}
		for j, r := range after {
			if r == p.Leader {
				continue
			}
			k := key{pos: j, dead: true, outOfSync: true}
			if d, ok := c.index.get(r); ok {
				k.dead, k.outOfSync = false, !p.InSync(r)
				k.rack, k.load = c.rackN[c.rackOf[d]], c.load[d]
			}
			if best < 0 || better(k, bk) {
				best, bk = j, k
			}
		}
		if best < 0 {
			break // only the leader is left (a malformed AR that lists it twice)
		}
		if d, ok := c.index.get(after[best]); ok {
			c.rackN[c.rackOf[d]]--
			c.load[d]--
		}
		after = slices.Delete(after, best, best+1)
	}
	for _, r := range after {
		if d, ok := c.index.get(r); ok {
			c.rackN[c.rackOf[d]]--
		}
	}
	return after
}

// rfRaiser chooses the new replicas of the partitions to raise.
//
// The bounds of rule 1. Given a partition's counts e[r] of live replicas per rack, the rack
// sizes cap[r] and Δ new replicas, water filling ends at a level L: the largest with
// Σ_r max(0, min(cap[r], L) − e[r]) ≤ Δ. Every way of placing the Δ replicas by rule 1
// ends with counts f[r] in [lo[r], hi[r]], where lo[r] = max(e[r], min(cap[r], L)) and
// hi[r] = lo[r] + 1 when e[r] ≤ L < cap[r] (a rack at the level with room: it may get one
// of the replicas left over), else lo[r]; and every such f with Σ f = Σ e + Δ is reachable
// by rule 1 (add up to lo first, level by level, then the left-over ones). So a new replica
// may move to another broker of its rack, or to a broker of rack C when its rack A has
// f[A] > lo[A] and f[C] < hi[C].
type rfRaiser struct {
	c     *rfCluster
	parts []rfRaise
	fresh []int32 // the new replicas (dense broker numbers) of parts[i] are fresh[lo:hi]
	owner []int32 // fresh index → index in parts
	e, f  []int32 // scratch per rack: the loaded partition's live replicas before and after
	mark  []uint32
	stamp uint32 // mark[d] == stamp: broker d is a replica of the loaded partition
}

type rfRaise struct {
	p      *model.Partition
	pos    int     // the caller's position of the partition (rfWant.pos)
	keep   []int32 // the replicas kept, in order (broker ids; rfWant.old)
	old    []int32 // live replicas kept, dense
	lo, hi int32
	level  int32 // L (see rfRaiser)
	// forced is the rack (number) that must take one of the left-over replicas (see
	// rfWant.prefer), or -1.
	forced int32
	cands  int32 // candidate brokers of its first new replica (greedy order)
}

// rfWant asks for add new replicas beside old, the replicas a partition keeps (broker
// ids, in order; brokers not live count in no rack). prefer is a rack (number) that one
// of them should go to when rule 1 lets it choose among racks (the rack of a replica
// being replaced), or -1.
type rfWant struct {
	p      *model.Partition
	pos    int
	old    []int32
	add    int
	prefer int32
}

func newRFRaiser(c *rfCluster, wants []rfWant) *rfRaiser {
	nr := len(c.rackSize)
	ra := &rfRaiser{c: c, parts: make([]rfRaise, len(wants)), e: make([]int32, nr), f: make([]int32, nr), mark: make([]uint32, len(c.ids))}
	n, o := 0, 0
	for _, w := range wants {
		n += w.add
		o += len(w.old)
	}
	ra.fresh, ra.owner = make([]int32, n), make([]int32, n)
	olds := make([]int32, 0, o)
	n = 0
	for i, w := range wants {
		x := &ra.parts[i]
		x.p, x.pos, x.keep, x.forced = w.p, w.pos, w.old, -1
		lo := len(olds)
		for _, r := range w.old {
			if d, ok := c.index.get(r); ok && !slices.Contains(olds[lo:], d) {
				olds = append(olds, d)
			}
		}
		x.old = olds[lo:len(olds):len(olds)]
		x.lo, x.hi = int32(n), int32(n+w.add)
		for j := x.lo; j < x.hi; j++ {
			ra.owner[j] = int32(i)
			ra.fresh[j] = -1
		}
		n = int(x.hi)
		ra.load(i)
		x.level = ra.waterLevel(x.hi - x.lo)
		if w.prefer >= 0 && ra.leftOver(x) > 0 {
			if lo, hi := ra.bounds(x, w.prefer); hi > lo {
				x.forced = w.prefer
			}
		}
		low := int32(math.MaxInt32)
		for d := range c.ids {
			if !ra.member(int32(d)) {
				if f := ra.f[c.rackOf[d]]; f < low {
					low, x.cands = f, 0
				}
				if ra.f[c.rackOf[d]] == low {
					x.cands++
				}
			}
		}
	}
	return ra
}

// load makes parts[i] the loaded partition: its members marked, e and f counted.
func (ra *rfRaiser) load(i int) {
	x := &ra.parts[i]
	ra.stamp++
	if ra.stamp == 0 { // wrapped: forget every old mark
		clear(ra.mark)
		ra.stamp = 1
	}
	clear(ra.e)
	clear(ra.f)
	for _, d := range x.old {
		ra.mark[d] = ra.stamp
		ra.e[ra.c.rackOf[d]]++
		ra.f[ra.c.rackOf[d]]++
	}
	for _, d := range ra.fresh[x.lo:x.hi] {
		if d >= 0 {
			ra.mark[d] = ra.stamp
			ra.f[ra.c.rackOf[d]]++
		}
	}
}

func (ra *rfRaiser) member(d int32) bool { return ra.mark[d] == ra.stamp }

// waterLevel returns L for the loaded partition and delta new replicas.
func (ra *rfRaiser) waterLevel(delta int32) int32 {
	var level int32
	for level < ra.c.maxRack {
		next, fill := level+1, int32(0)
		for r, size := range ra.c.rackSize {
			fill += max(0, min(size, next)-ra.e[r])
		}
		if fill > delta {
			break
		}
		level = next
	}
	return level
}

// bounds returns lo[r] and hi[r] of x, the loaded partition. The rack x.forced gets a
// left-over replica for sure: its lo is raised to its hi.
func (ra *rfRaiser) bounds(x *rfRaise, r int32) (lo, hi int32) {
	e, size, level := ra.e[r], ra.c.rackSize[r], x.level
	lo = max(e, min(size, level))
	if e <= level && level < size {
		if r == x.forced {
			return lo + 1, lo + 1
		}
		return lo, lo + 1
	}
	return lo, lo
}

// leftOver returns how many of x's new replicas rule 1 leaves to racks at the level
// (x loaded, forced not yet set).
func (ra *rfRaiser) leftOver(x *rfRaise) int32 {
	n := x.hi - x.lo
	for r := range int32(len(ra.c.rackSize)) {
		lo, _ := ra.bounds(x, r)
		n -= lo - ra.e[r]
	}
	return n
}

// appended sets after[x.pos] of every partition to its kept replicas followed by its new
// ones (arena: every new AR has at most size replicas).
func (ra *rfRaiser) appended(after [][]int32, size int) {
	arena := make([]int32, len(ra.parts)*size) // one backing array for every new AR
	for i := range ra.parts {
		x := &ra.parts[i]
		a := arena[:0:size]
		arena = arena[size:]
		a = append(a, x.keep...)
		for _, d := range ra.fresh[x.lo:x.hi] {
			a = append(a, ra.c.ids[d])
		}
		after[x.pos] = a
	}
}

// greedy places every new replica: partitions with the fewest candidates first (then in
// partition order), each replica in a rack with the fewest replicas of the partition
// among those with a broker left, on its least loaded broker, then the lowest id.
func (ra *rfRaiser) greedy() {
	c := ra.c
	order := make([]int32, len(ra.parts))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(ra.parts[a].cands, ra.parts[b].cands) })
	for _, i := range order {
		x := &ra.parts[i]
		ra.load(int(i))
		for j := x.lo; j < x.hi; j++ {
			// A rack's key is twice its replicas of the partition, less one for the forced
			// rack until it has its left-over replica: it wins the ties at the level.
			key := func(r int32) int32 {
				k := 2 * ra.f[r]
				if r == x.forced && ra.f[r] <= x.level {
					k--
				}
				return k
			}
			low := int32(math.MaxInt32)
			for d := range c.ids {
				if !ra.member(int32(d)) {
					low = min(low, key(c.rackOf[d]))
				}
			}
			best := int32(-1)
			for d := range int32(len(c.ids)) {
				if !ra.member(d) && key(c.rackOf[d]) == low && (best < 0 || c.load[d] < c.load[best]) {
					best = d
				}
			}
			ra.fresh[j] = best
			ra.mark[best] = ra.stamp
			ra.f[c.rackOf[best]]++
			c.load[best]++
		}
	}
}

// repair moves new replicas while some broker u can hand one along a chain (one of u's new
// replicas to broker v, one of v's to w, …) to a broker t with load[t] <= load[u]-2,
// every step allowed by rule 1 (same rack, or within the bounds, see rfRaiser) and to a
// broker that is no replica of the partition yet. Only u and t change counts and the sum
// of squared counts drops, so this ends.
//
// Why it is optimal: with the bounds, the valid placements are the integral flows of a
// network (partition → its racks, between lo and hi → the rack's brokers not yet
// replicas, capacity 1 → the sink), so the reachable count vectors form an M-convex set;
// its decreasingly minimal element is the one with no cost-reducing path in the residual
// network (Frank and Murota, "Discrete decreasing minimization"), and such a path, seen on
// brokers, is exactly a chain as above.
//
// The chains are searched on a broker graph: can[u·B+v] counts the new replicas on u that
// may move to v. A chain may use two replicas of one partition whose moves are allowed
// alone but not together (two left-over replicas into one rack); each step is checked
// against the partition as it is when applied, and a chain that fails is undone and that
// source given up for the round. (The tests compare with a brute force.)
func (ra *rfRaiser) repair() {
	c := ra.c
	nb := len(c.ids)
	if nb < 2 || len(ra.fresh) == 0 || slices.Max(c.load)-slices.Min(c.load) < 2 {
		return
	}
	can := make([]int32, nb*nb)
	on := make([][]int32, nb) // fresh indices on each broker
	at := make([]int32, len(ra.fresh))
	for j, d := range ra.fresh {
		at[j] = int32(len(on[d]))
		on[d] = append(on[d], int32(j))
	}
	contrib := func(i int, sign int32) {
		x := &ra.parts[i]
		ra.load(i)
		for _, u := range ra.fresh[x.lo:x.hi] {
			a := c.rackOf[u]
			loA, _ := ra.bounds(x, a)
			leave := ra.f[a] > loA
			row := can[int(u)*nb : (int(u)+1)*nb]
			for v := range int32(nb) {
				if ra.member(v) {
					continue
				}
				if r := c.rackOf[v]; r == a || leave && ra.enters(x, r) {
					row[v] += sign
				}
			}
		}
	}
	for i := range ra.parts {
		contrib(i, 1)
	}
	move := func(j int32, v int32) {
		i := int(ra.owner[j])
		contrib(i, -1)
		u := ra.fresh[j]
		list := on[u]
		last := list[len(list)-1]
		list[at[j]], at[last] = last, at[j]
		on[u] = list[:len(list)-1]
		c.load[u]--
		ra.fresh[j] = v
		at[j] = int32(len(on[v]))
		on[v] = append(on[v], j)
		c.load[v]++
		contrib(i, 1)
	}
	type step struct{ j, from int32 }
	var (
		brokers = make([]int32, nb)
		seen    = make([]bool, nb)
		parent  = make([]int32, nb)
		queue   = make([]int32, 0, nb)
		done    []step
	)
	for d := range brokers {
		brokers[d] = int32(d)
	}
	for {
		slices.SortFunc(brokers, func(a, b int32) int {
			if x := cmp.Compare(c.load[b], c.load[a]); x != 0 {
				return x
			}
			return cmp.Compare(a, b)
		})
		low := c.load[brokers[nb-1]]
		moved := false
		for _, u := range brokers {
			if c.load[u]-2 < low {
				break // no broker is low enough for this one, nor for the next ones
			}
			clear(seen)
			seen[u] = true
			queue = append(queue[:0], u)
			for q := 0; q < len(queue); q++ {
				x := queue[q]
				row := can[int(x)*nb : (int(x)+1)*nb]
				for y, n := range row {
					if n > 0 && !seen[y] {
						seen[y], parent[y] = true, x
						queue = append(queue, int32(y))
					}
				}
			}
			t := int32(-1)
			for _, v := range queue[1:] {
				if c.load[v] <= c.load[u]-2 && (t < 0 || c.load[v] < c.load[t] || c.load[v] == c.load[t] && v < t) {
					t = v
				}
			}
			if t < 0 {
				continue
			}
			// Walk back from t, each step with a replica that may move as things are now.
			done = done[:0]
			ok := true
			for v := t; v != u; v = parent[v] {
				x, j := parent[v], int32(-1)
				for k := len(on[x]) - 1; k >= 0; k-- {
					if ra.movable(on[x][k], x, v) {
						j = on[x][k]
						break
					}
				}
				if j < 0 {
					ok = false
					break
				}
				move(j, v)
				done = append(done, step{j, x})
			}
			if !ok {
				for k := len(done) - 1; k >= 0; k-- {
					move(done[k].j, done[k].from)
				}
				continue
			}
			moved = true
			break
		}
		if !moved {
			return
		}
	}
}

// enters reports whether rack r of x, the loaded partition, may take one more replica
// within its bounds.
func (ra *rfRaiser) enters(x *rfRaise, r int32) bool {
	_, hi := ra.bounds(x, r)
	return ra.f[r] < hi
}
