package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/model"
)

// SkipNoSpare: too few live brokers are left that are not already replicas of the
// partition to recreate its replicas elsewhere.
const SkipNoSpare SkipCode = "no_spare_broker"

// VacateRequest asks for every replica on Brokers to be recreated on other brokers: the
// brokers are gone for good (broker-failed) or are being emptied (broker-drain).
type VacateRequest struct {
	Brokers []int32
	// Topics, when given, limits the plan to the partitions of these topics (a partial
	// drain); the replica counts are still those of every topic. Nil: every topic.
	Topics []string
	// Racks gives the rack of a vacated broker the snapshot does not list (a failed broker
	// is absent from the metadata), when it is known. Without it such a broker's replicas
	// still keep their partition's rack spread; only the preference for its own rack is
	// lost.
	Racks map[int32]string
	// MinISR returns a topic's effective min.insync.replicas (nil, or below 1: 1): the
	// partitions with the fewest in-sync replicas above it come first.
	MinISR func(topic string) int
	// Protected topics are skipped (SkipProtected).
	Protected Protected
	// Capacity bounds the bytes each broker may be planned to hold (zero: not checked).
	Capacity Capacity
}

// Capacity is what brokers' disks hold, for a plan that copies data.
type Capacity struct {
	// Total is each broker's capacity in bytes; a broker it does not list is not bounded.
	Total map[int32]int64
	// Used is each broker's bytes in use now.
	Used map[int32]int64
	// Size returns the bytes a new replica of a partition copies (its leader's log).
	Size func(tp model.TopicPartition) int64
	// Threshold is the fraction of Total no broker may be planned above (say 0.8).
	Threshold float64
}

// limit returns the bytes broker id may hold, and whether it is bounded.
func (c Capacity) limit(id int32) (int64, bool) {
	t, ok := c.Total[id]
	if !ok || c.Size == nil {
		return 0, false
	}
	return int64(c.Threshold * float64(t)), true
}

// Vacate plans recreating every replica on req.Brokers on other live brokers, with the
// least data movement: a partition with k replicas on them gets exactly k new replicas and
// keeps every other replica, in order (the new ones are appended), so it copies exactly
// k replicas, and no partition without a replica on them changes. The new brokers follow
// the rules of ReplicationFactor's raise (racks as diverse as the cluster allows, then the
// replica counts of the whole snapshot as even as that allows, then the lowest id: the
// snapshot should hold every topic), with one more: when rule 1 lets a new replica choose
// among racks, it goes to the rack of the replica it replaces (req.Racks or the snapshot),
// so each rack keeps its share of the cluster.
//
// A vacated broker that leads a partition (a drain whose leadership shed skipped it) is
// replaced as leader by the first kept in-sync replica (Change.LeaderAfter); the
// reassignment's end moves leadership there.
//
// The changes are ordered by urgency: fewest live in-sync replicas above the topic's
// min.insync.replicas first (a partition at or below it first of all), then topic and
// partition. Change.Note says where a partition's rack spread shrinks, and why (no broker
// is left in the racks it would need).
//
// Capacity (req.Capacity): when a broker would end above its threshold, new replicas on
// it move to another broker rule 1 allows and that has room (the least loaded, then the
// lowest id), the largest first; when that cannot bring every broker within its bound
// the request is rejected, naming the brokers and bytes. A broker already above it
// before the plan gets nothing.
//
// Per partition with a replica on req.Brokers:
//   - under reassignment: Blocked (the caller waits and plans again);
//   - protected topic: skipped (SkipProtected);
//   - no leader: skipped (SkipNoLeader: a new replica would have nothing to copy from);
//   - fewer spare live brokers than replicas to recreate: skipped (SkipNoSpare);
//   - a vacated leader with no kept in-sync replica: skipped (SkipNoCandidate).
//
// Rejected (*RejectError): no broker named, or one named twice; no live broker left; a
// plan that cannot fit the capacity.
func Vacate(s *model.Snapshot, req VacateRequest) (Plan, error) {
	if len(req.Brokers) == 0 {
		return Plan{}, reject("no broker to vacate")
	}
	gone := slices.Clone(req.Brokers)
	slices.Sort(gone)
	if len(slices.Compact(gone)) != len(req.Brokers) {
		return Plan{}, reject("brokers %v lists a broker twice", req.Brokers)
	}
	live := maps.Clone(s.Brokers)
	for _, b := range gone {
		delete(live, b)
	}
	if len(live) == 0 {
		return Plan{}, reject("no live broker is left besides %v", req.Brokers)
	}
	c := newRFCluster(&model.Snapshot{Brokers: live, Topics: s.Topics})
	rackNo := func(b int32) int32 {
		name, ok := req.Racks[b]
		if br, live := s.Brokers[b]; live {
			name, ok = br.Rack, true
		}
		if !ok {
			return -1
		}
		for d, id := range c.ids {
			if s.Brokers[id].Rack == name {
				return c.rackOf[d]
			}
		}
		return -1 // no live broker is left in its rack
	}
	minISR := func(topic string) int {
		if req.MinISR == nil {
			return 1
		}
		return max(req.MinISR(topic), 1)
	}

	var (
		plan    Plan
		wants   []rfWant
		parts   []*model.Partition
		leaders []int32
	)
	for _, topic := range slices.Sorted(maps.Keys(s.Topics)) {
		if req.Topics != nil && !slices.Contains(req.Topics, topic) {
			continue
		}
		ps := s.Topics[topic]
		pattern, protected := req.Protected.match(topic)
		for i := range ps {
			p := &ps[i]
			vac := slices.DeleteFunc(slices.Clone(p.Replicas), func(b int32) bool { _, ok := slices.BinarySearch(gone, b); return !ok })
			if len(vac) == 0 {
				continue
			}
			keep := model.Minus(p.Replicas, vac)
			spare := 0
			for id := range live {
				if !slices.Contains(keep, id) {
					spare++
				}
			}
			leader := p.Leader
			if slices.Contains(vac, p.Leader) {
				leader = -1
				for _, b := range keep {
					if _, ok := live[b]; ok && p.InSync(b) {
						leader = b
						break
					}
				}
			}
			switch {
			case p.Reassigning():
				plan.Blocked = append(plan.Blocked, p.TopicPartition)
			case protected:
				plan.Skipped = append(plan.Skipped, protectedSkip(p.TopicPartition, pattern))
			case p.Leader < 0:
				plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Code: SkipNoLeader,
					Reason: fmt.Sprintf("no leader: its replicas on %v cannot be recreated, a new replica would have nothing to copy from (replicas %v, isr %v)", vac, p.Replicas, p.ISR)})
			case spare < len(vac):
				plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Code: SkipNoSpare,
					Reason: fmt.Sprintf("%d replicas on %v to recreate, but only %d live brokers are not replicas already (replicas %v)", len(vac), vac, spare, p.Replicas)})
			case leader < 0:
				plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Code: SkipNoCandidate,
					Reason: fmt.Sprintf("broker %d leads it and no other replica is in sync to take over (replicas %v, isr %v)", p.Leader, p.Replicas, p.ISR)})
			default:
				wants = append(wants, rfWant{p: p, pos: len(wants), old: keep, add: len(vac), prefer: rackNo(vac[0])})
				parts = append(parts, p)
				leaders = append(leaders, leader)
			}
		}
	}
	if len(wants) == 0 {
		return plan, nil
	}
	ra := newRFRaiser(c, wants)
	ra.greedy()
	ra.repair()
	if err := ra.fit(req.Capacity); err != nil {
		return Plan{}, err
	}
	after := make([][]int32, len(wants))
	width := 0
	for _, p := range parts {
		width = max(width, len(p.Replicas))
	}
	ra.appended(after, width)

	urgency := make([]int, len(parts))
	plan.Changes = make([]Change, len(parts))
	for k, p := range parts {
		inSync := 0
		for _, b := range p.ISR {
			if _, ok := live[b]; ok {
				inSync++
			}
		}
		urgency[k] = inSync - minISR(p.Topic)
		plan.Changes[k] = Change{TopicPartition: p.TopicPartition, ReplicasBefore: slices.Clone(p.Replicas), ReplicasAfter: after[k],
			LeaderBefore: p.Leader, LeaderAfter: leaders[k], Note: rackNote(s, req.Racks, p.Replicas, after[k])}
	}
	order := make([]int, len(parts))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(urgency[a], urgency[b]) })
	sorted := make([]Change, len(order))
	for k, o := range order {
		sorted[k] = plan.Changes[o]
	}
	plan.Changes = sorted
	return plan, nil
}

// rackNote says why a change's replicas span fewer racks after it than before, or is "".
// Brokers that are not live count in their req.Racks rack when given.
func rackNote(s *model.Snapshot, racks map[int32]string, before, after []int32) string {
	spread := func(replicas []int32) []string {
		var out []string
		for _, b := range replicas {
			name, ok := racks[b]
			if br, live := s.Brokers[b]; live {
				name, ok = br.Rack, true
			}
			if ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	was, is := spread(before), spread(after)
	if len(is) >= len(was) {
		return ""
	}
	var lost []string
	for _, r := range was {
		if !slices.Contains(is, r) {
			lost = append(lost, fmt.Sprintf("%q", r))
		}
	}
	return fmt.Sprintf("rack spread %d → %d (racks %v → %v): no live broker outside its replicas is left in rack %s",
		len(was), len(is), was, is, strings.Join(lost, ", "))
}

// fit moves new replicas off brokers that would end above their capacity bound, the
// largest first, each to the least loaded broker (then the lowest id) rule 1 allows that
// has room; it returns a rejection naming every broker it cannot bring within its bound.
func (ra *rfRaiser) fit(cp Capacity) error {
	if len(cp.Total) == 0 || cp.Size == nil {
		return nil
	}
	c := ra.c
	size := make([]int64, len(ra.fresh))
	held := make([]int64, len(c.ids)) // bytes each broker would hold
	for d, id := range c.ids {
		held[d] = cp.Used[id]
	}
	for j, d := range ra.fresh {
		size[j] = cp.Size(ra.parts[ra.owner[j]].p.TopicPartition)
		held[d] += size[j]
	}
	room := func(d int32, n int64) bool {
		l, ok := cp.limit(c.ids[d])
		return !ok || held[d]+n <= l
	}
	var over []string
	for u := range int32(len(c.ids)) {
		if room(u, 0) {
			continue
		}
		var mine []int32
		for j, d := range ra.fresh {
			if d == u {
				mine = append(mine, int32(j))
			}
		}
		slices.SortStableFunc(mine, func(a, b int32) int { return cmp.Compare(size[b], size[a]) })
		for _, j := range mine {
			if room(u, 0) {
				break
			}
			best := int32(-1)
			for v := range int32(len(c.ids)) {
				if v != u && room(v, size[j]) && ra.movable(j, u, v) && (best < 0 || c.load[v] < c.load[best]) {
					best = v
				}
			}
			if best < 0 {
				continue
			}
			ra.fresh[j] = best
			c.load[u]--
			c.load[best]++
			held[u] -= size[j]
			held[best] += size[j]
		}
		if !room(u, 0) {
			l, _ := cp.limit(c.ids[u])
			over = append(over, fmt.Sprintf("broker %d: %d bytes planned (%d in use), above its bound of %d (%.0f%% of %d)",
				c.ids[u], held[u], cp.Used[c.ids[u]], l, 100*cp.Threshold, cp.Total[c.ids[u]]))
		}
	}
	if len(over) > 0 {
		return reject("the change does not fit the brokers' capacity: %s", strings.Join(over, "; "))
	}
	return nil
}

// movable reports whether new replica j (on broker u) may move to broker v under rule 1,
// as its partition is now.
func (ra *rfRaiser) movable(j, u, v int32) bool {
	x := &ra.parts[ra.owner[j]]
	ra.load(int(ra.owner[j]))
	if ra.member(v) {
		return false
	}
	a, r := ra.c.rackOf[u], ra.c.rackOf[v]
	if a == r {
		return true
	}
	loA, _ := ra.bounds(x, a)
	return ra.f[a] > loA && ra.enters(x, r)
}

// Drain plans emptying a live broker (broker-drain): first its leadership, as Shed moves
// it (the new leader swaps places with it at the head of the replicas, the leader counts
// balanced), then its replicas, as Vacate recreates them, planned on the cluster as the
// shed leaves it. Each change goes from the partition's replicas and leader now to its
// replicas and leader at the end; DrainStep gives the replicas in between (the shed's
// order) of those whose leadership moves first. req.Brokers must name the one broker.
func Drain(s *model.Snapshot, req VacateRequest) (Plan, error) {
	if len(req.Brokers) != 1 {
		return Plan{}, reject("a drain empties one broker, not %v", req.Brokers)
	}
	b := req.Brokers[0]
	if _, ok := s.Brokers[b]; !ok {
		return Plan{}, reject("broker %d is not in the cluster's metadata: it is not live (for a broker gone for good, send broker-failed)", b)
	}
	sh, err := Shed(s, ShedRequest{Broker: b, Topics: req.Topics, Protected: req.Protected})
	if err != nil {
		// Only a broker that leads, heads and holds nothing: nothing to shed.
		sh = Plan{}
	}
	shed := *s
	if len(sh.Changes) > 0 {
		shed.Topics = maps.Clone(s.Topics)
		cloned := map[string]bool{}
		for _, c := range sh.Changes {
			if !cloned[c.Topic] {
				shed.Topics[c.Topic] = slices.Clone(s.Topics[c.Topic])
				cloned[c.Topic] = true
			}
			p := &shed.Topics[c.Topic][c.Partition]
			p.Replicas, p.Leader = c.ReplicasAfter, c.LeaderAfter
		}
	}
	p, err := Vacate(&shed, req)
	if err != nil {
		return Plan{}, err
	}
	vacated := map[model.TopicPartition]bool{}
	for i := range p.Changes {
		c := &p.Changes[i]
		vacated[c.TopicPartition] = true
		orig, _ := s.Partition(c.TopicPartition)
		c.ReplicasBefore, c.LeaderBefore = slices.Clone(orig.Replicas), orig.Leader
	}
	// A partition whose replica cannot move still sheds its leadership: the skip says why
	// the replica stays, of the replicas as they are now.
	shedOf := map[model.TopicPartition]Change{}
	for _, c := range sh.Changes {
		if !vacated[c.TopicPartition] {
			shedOf[c.TopicPartition] = c
		}
	}
	for i := range p.Skipped {
		sk := &p.Skipped[i]
		if c, ok := shedOf[sk.TopicPartition]; ok {
			sk.Reason = strings.ReplaceAll(sk.Reason, fmt.Sprint(c.ReplicasAfter), fmt.Sprint(c.ReplicasBefore)) +
				fmt.Sprintf("; its leadership moves to %d", c.LeaderAfter)
		}
	}
	for _, c := range sh.Changes {
		if _, ok := shedOf[c.TopicPartition]; ok && !slices.Contains(p.Blocked, c.TopicPartition) {
			p.Changes = append(p.Changes, c)
		}
	}
	return p, nil
}

// DrainStep returns the replicas of a drain's change between its two steps: its
// replicas before with the drained broker b, at their head, swapped with the new head; nil
// when the change's leadership does not move first (b does not head the replicas before).
func DrainStep(c Change, b int32) []int32 {
	if len(c.ReplicasBefore) == 0 || len(c.ReplicasAfter) == 0 || c.ReplicasBefore[0] != b {
		return nil
	}
	i := slices.Index(c.ReplicasBefore, c.ReplicasAfter[0])
	if i <= 0 {
		return nil
	}
	mid := slices.Clone(c.ReplicasBefore)
	mid[0], mid[i] = mid[i], mid[0]
	return mid
}
