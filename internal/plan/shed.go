package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/model"
)

// ShedRequest asks to move partition leadership off Broker (event broker-overloaded).
type ShedRequest struct {
	Broker        int32
	Topics        []string // only these topics (nil or empty = every topic of the snapshot)
	ExcludeTopics []string // never these topics (wins over Topics)
	// MaxPartitions caps the number of partitions changed (0 = no cap). The first ones in
	// (topic, partition) order are changed; the rest are skipped with a reason.
	MaxPartitions int
	// DemoteToEnd also moves Broker to the tail of the assigned replicas of every changed
	// partition, so that a later preferred election (or Kafka's auto leader rebalance) does
	// not hand leadership back.
	DemoteToEnd bool
	// Avoid lists brokers reported overloaded recently: one of them is chosen only when no
	// other candidate exists for that partition.
	Avoid []int32
	// WaitBlocked sends partitions under reassignment to Plan.Blocked (the caller waits and
	// plans again); otherwise they are skipped with a reason.
	WaitBlocked bool
	// Protected topics are never changed (guardrails.protected_topics); nil: none.
	Protected Protected
}

// Shed plans moving partition leadership off req.Broker (B).
//
// The partitions concerned are those of the selected topics that B leads, and those whose
// preferred leader (head of the assigned replicas, AR) is B although B does not lead them:
// left alone, the next preferred election would give them back to B.
//
// For each such partition a new head is chosen among its candidates: replicas in the ISR,
// other than B, and live (present in the snapshot's brokers). Brokers in req.Avoid are
// dropped from a partition's candidates unless they are all it has. The chosen broker swaps
// positions with the old head of the AR; with DemoteToEnd, B then moves to the tail (the
// others keep their relative order). Change.LeaderAfter is the chosen broker: the caller
// applies every reorder, then elects the preferred leader of Plan.Elections() in one batch.
//
//   - B heads the AR but another candidate leads: that leader is chosen (it moves nothing,
//     so Avoid does not apply), and no election is needed.
//   - under reassignment: Blocked when req.WaitBlocked, else skipped.
//   - no candidate: skipped ("no in-sync replica other than broker B").
//   - a topic req.Protected protects: skipped (SkipProtected), also when under
//     reassignment (never Blocked: it would not be changed after the wait either). Only
//     partitions B leads or heads are listed, those without a candidate keep that reason,
//     and none counts toward MaxPartitions.
//   - beyond req.MaxPartitions, in (topic, partition) order: skipped.
//
// Balance. The other choices move leadership, and together they make the leader counts of
// the other live brokers as even as possible. Counts start from the leaders of every
// partition of the snapshot, not only of the selected topics (so the caller should read
// every topic of the cluster), without those B leads. The result is decreasingly minimal:
// no other choice of eligible candidates gives a sorted (largest first) vector of leader
// counts that is lexicographically smaller. Such a result at once minimises the largest
// count, maximises the smallest (hence their difference) and minimises the sum of squares
// (Frank and Murota, "Discrete decreasing minimization", on M-convex sets). See balance for
// how.
//
// Per topic, second. Among the choices with that same best sorted vector (the cluster-wide
// result is never traded for it), the plan takes one that balances each topic's leaders:
// the least per-topic square sum S = Σ n(t,b)² over the topics t of the snapshot and the
// live brokers b other than B, where n(t,b) counts the partitions of t that b leads after
// the plan (all of t's partitions, changed or not; a topic without a change only adds a
// constant). Why S: passing one of t's leaders from a broker with a of them to one with c
// changes S by 2(c-a+1), so S counts each gap within a topic by its size, a 45/42/37 topic
// more than a 2/1/1 one, and ranks no topic above another by name; when the changes are all
// in one topic, the least S is that topic's decreasingly minimal vector (the theorem above);
// and a sum of convex terms, next to the square sum of the cluster-wide counts, keeps the
// whole a convex-cost flow, solved exactly: the plan's S is the least possible, not a local
// optimum. A choice differs from the cluster-wide one only where that lowers S, so where the
// cluster-wide choice is already as good per topic it is the plan, and ties go to the
// lower broker id as before. See balanceTopics for how.
//
// Rejected (*RejectError): a negative MaxPartitions, a topic of req.Topics that the
// snapshot does not have, and a B that is no live broker, leads nothing and is no replica
// of any partition. A B that leads and heads nothing among the selected partitions is no
// error: the plan is empty (noop).
//
// The plan is deterministic (Changes, Skipped and Blocked in (topic, partition) order) and
// the snapshot is not modified. Time is O(P) for the P partitions of the snapshot plus
// O(k log k) for the k partitions of B, and the balancing passes (small for real clusters:
// on the scale benchmark, 25,000 leaders moved over 2,000 topics, the per-topic pass takes
// about 20 ms).
func Shed(s *model.Snapshot, req ShedRequest) (Plan, error) {
	return shed(s, req, true)
}

// shed is Shed; without perTopic it balances the cluster-wide counts only (the planner
// before per-topic balance, kept for the tests to compare with). It reads as its steps:
// check the request, pick the partitions, choose the leaders that stay and the
// candidates of those that move, balance the moves, build the changes.
func shed(s *model.Snapshot, req ShedRequest, perTopic bool) (Plan, error) {
	topics, err := checkShed(s, req)
	if err != nil {
		return Plan{}, err
	}
	sh := newShedding(s, req)
	var plan Plan
	sh.pick(topics, &plan)
	sh.capAt(req.MaxPartitions, &plan)
	slices.SortFunc(plan.Skipped, func(x, y Skip) int { return compareTP(x.TopicPartition, y.TopicPartition) })
	if len(sh.items) == 0 {
		return plan, nil
	}
	sh.choose()
	sh.balanceMoves(perTopic)
	plan.Changes = sh.changes()
	return plan, nil
}

// checkShed rejects a request Shed cannot plan, and returns its topics, sorted.
func checkShed(s *model.Snapshot, req ShedRequest) ([]string, error) {
	if req.MaxPartitions < 0 {
		return nil, reject("max_partitions %d is negative", req.MaxPartitions)
	}
	topics, err := shedTopics(s, req)
	if err != nil {
		return nil, err
	}
	if !knownBroker(s, req.Broker) {
		return nil, reject("broker %d is not a broker of this cluster", req.Broker)
	}
	return topics, nil
}

// knownBroker reports whether b is a live broker of the snapshot, or leads or holds a
// replica of one of its partitions.
func knownBroker(s *model.Snapshot, b int32) bool {
	if b < 0 {
		return false
	}
	if _, live := s.Brokers[b]; live {
		return true
	}
	for _, ps := range s.Topics {
		for i := range ps {
			if ps[i].Leader == b || slices.Contains(ps[i].Replicas, b) {
				return true
			}
		}
	}
	return false
}

// shedding is a shed in progress: what its steps share. Brokers are numbered densely
// (dense), in id order (ids).
type shedding struct {
	s     *model.Snapshot
	req   ShedRequest
	ids   []int32 // the live brokers, in id order: ids[d] is broker number d
	dense brokerIndex
	load  []int      // leaders per broker number, of every partition of the snapshot
	items []shedItem // the partitions to change, in (topic, partition) order
	cands []int32    // the candidates of every item, as broker numbers
}

// newShedding numbers the live brokers and counts their leaders.
func newShedding(s *model.Snapshot, req ShedRequest) *shedding {
	ids := make([]int32, 0, len(s.Brokers))
	for id := range s.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dense := newBrokerIndex(ids)
	load := make([]int, len(ids))
	for _, ps := range s.Topics { // counting: the order does not matter
		for i := range ps {
			if d, ok := dense.get(ps[i].Leader); ok {
				load[d]++
			}
		}
	}
	return &shedding{s: s, req: req, ids: ids, dense: dense, load: load}
}

// pick lists the partitions of topics that B leads or heads: those to change become items,
// with their candidates (sorted); those under reassignment, without a candidate or
// protected go to plan's Blocked or Skipped.
func (sh *shedding) pick(topics []string, plan *Plan) {
	b := sh.req.Broker
	for _, t := range topics {
		ps := sh.s.Topics[t]
		pattern, protected := sh.req.Protected.match(t)
		for i := range ps {
			p := &ps[i]
			if p.Leader != b && (len(p.Replicas) == 0 || p.Replicas[0] != b) {
				continue
			}
			if p.Reassigning() {
				switch {
				case protected:
					plan.Skipped = append(plan.Skipped, protectedSkip(p.TopicPartition, pattern))
				case sh.req.WaitBlocked:
					plan.Blocked = append(plan.Blocked, p.TopicPartition)
				default:
					plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Reason: fmt.Sprintf("under reassignment (%s)", p.Reassignment()), Code: SkipReassigning})
				}
				continue
			}
			lo := len(sh.cands)
			notLive := sh.addCandidates(p)
			c := sh.cands[lo:]
			switch {
			case len(c) == 0:
				plan.Skipped = append(plan.Skipped, noCandidateSkip(p, b, notLive))
			case protected:
				sh.cands = sh.cands[:lo]
				plan.Skipped = append(plan.Skipped, protectedSkip(p.TopicPartition, pattern))
			default:
				slices.Sort(c)
				sh.items = append(sh.items, shedItem{p: p, lo: int32(lo), hi: int32(len(sh.cands)), choice: -1})
			}
		}
	}
}

// addCandidates appends the candidates of p to sh.cands: its in-sync replicas other than
// B that are live, each once. It returns the in-sync replicas that are not live.
func (sh *shedding) addCandidates(p *model.Partition) (notLive []int32) {
	lo := len(sh.cands)
	for _, r := range p.Replicas {
		if r == sh.req.Broker || !p.InSync(r) {
			continue
		}
		d, ok := sh.dense.get(r)
		if !ok {
			notLive = append(notLive, r)
			continue
		}
		if !slices.Contains(sh.cands[lo:], d) {
			sh.cands = append(sh.cands, d)
		}
	}
	return notLive
}

// noCandidateSkip is the skip of p, which has no candidate.
func noCandidateSkip(p *model.Partition, b int32, notLive []int32) Skip {
	reason := fmt.Sprintf("no in-sync replica other than broker %d", b)
	if len(notLive) > 0 {
		reason = fmt.Sprintf("no live in-sync replica other than broker %d (isr %v; not live: %v)", b, p.ISR, notLive)
	}
	return Skip{TopicPartition: p.TopicPartition, Reason: reason, Code: SkipNoCandidate}
}

// capAt skips the items beyond the first max (0: no cap).
func (sh *shedding) capAt(max int, plan *Plan) {
	if max == 0 || len(sh.items) <= max {
		return
	}
	for _, it := range sh.items[max:] {
		plan.Skipped = append(plan.Skipped, Skip{TopicPartition: it.p.TopicPartition, Reason: fmt.Sprintf("beyond max_partitions %d", max), Code: SkipCapped})
	}
	sh.items = sh.items[:max]
}

// choose keeps the leader of a partition that B heads but does not lead, when that leader
// is a candidate: nothing moves. The other items move: their candidates lose the brokers
// of req.Avoid, unless those are all they have.
func (sh *shedding) choose() {
	avoid := make([]bool, len(sh.ids))
	for _, a := range sh.req.Avoid {
		if d, ok := sh.dense.get(a); ok {
			avoid[d] = true
		}
	}
	for i := range sh.items {
		it := &sh.items[i]
		c := sh.cands[it.lo:it.hi]
		if it.p.Leader != sh.req.Broker {
			if d, ok := sh.dense.get(it.p.Leader); ok && slices.Contains(c, d) {
				it.choice = d
				continue
			}
		}
		k := 0 // in place, order kept
		for _, d := range c {
			if !avoid[d] {
				c[k] = d
				k++
			}
		}
		if k > 0 {
			it.hi = it.lo + int32(k)
		}
	}
}

// balanceMoves chooses the new leaders of the items that move (see Shed: Balance, Per
// topic). A partition B heads but does not lead, whose leader is live but no candidate,
// loses that leader at the election: it is taken off the leader's count first.
func (sh *shedding) balanceMoves(perTopic bool) {
	var (
		moving []int32   // indices into items
		mc     [][]int32 // their candidates
	)
	for i, it := range sh.items {
		if it.choice >= 0 {
			continue
		}
		if l := it.p.Leader; l != sh.req.Broker {
			if d, ok := sh.dense.get(l); ok {
				sh.load[d]--
			}
		}
		moving = append(moving, int32(i))
		mc = append(mc, sh.cands[it.lo:it.hi])
	}
	choice := balance(sh.load, mc)
	if perTopic {
		topicOf, leaders := shedTopicLeaders(sh.s, sh.items, moving, sh.dense)
		balanceTopics(sh.load, mc, topicOf, leaders, choice)
	}
	for i, d := range choice {
		sh.items[moving[i]].choice = d
	}
}

// changes are the items' changes: the chosen broker swaps places with the head of the
// replicas; with DemoteToEnd, B then moves to the tail.
func (sh *shedding) changes() []Change {
	b := sh.req.Broker
	n := 0
	for _, it := range sh.items {
		n += 2 * len(it.p.Replicas)
	}
	arena := make([]int32, n) // one backing array for every before/after list
	out := make([]Change, 0, len(sh.items))
	for _, it := range sh.items {
		p, to := it.p, sh.ids[it.choice]
		r := len(p.Replicas)
		before, after := arena[:r:r], arena[r:2*r:2*r]
		arena = arena[2*r:]
		copy(before, p.Replicas)
		copy(after, p.Replicas)
		if j := slices.Index(after, to); j > 0 {
			after[0], after[j] = after[j], after[0]
		}
		if sh.req.DemoteToEnd {
			if j := slices.Index(after, b); j >= 0 {
				copy(after[j:], after[j+1:])
				after[r-1] = b
			}
		}
		out = append(out, Change{
			TopicPartition: p.TopicPartition, ReplicasBefore: before, ReplicasAfter: after,
			LeaderBefore: p.Leader, LeaderAfter: to,
		})
	}
	return out
}

// shedTopicLeaders numbers the topics of the moving items (items[moving[i]]) in order,
// and lists for each the dense leader of every partition that keeps its leader.
func shedTopicLeaders(s *model.Snapshot, items []shedItem, moving []int32, dense brokerIndex) (topicOf []int32, leaders [][]int32) {
	topicOf = make([]int32, len(moving))
	n := 0
	for i := 0; i < len(moving); i++ {
		if name := items[moving[i]].p.Topic; i == 0 || name != items[moving[i-1]].p.Topic {
			n += len(s.Topics[name])
		}
	}
	arena := make([]int32, 0, n) // one array for every list
	for i := 0; i < len(moving); {
		name := items[moving[i]].p.Topic
		t := int32(len(leaders))
		j := i
		for ; j < len(moving) && items[moving[j]].p.Topic == name; j++ {
			topicOf[j] = t
		}
		ps := s.Topics[name]
		lo := len(arena)
		k := i
		for x := range ps {
			if k < j && items[moving[k]].p == &ps[x] {
				k++
				continue
			}
			if d, ok := dense.get(ps[x].Leader); ok {
				arena = append(arena, d)
			}
		}
		leaders = append(leaders, arena[lo:len(arena):len(arena)])
		i = j
	}
	return topicOf, leaders
}

// brokerIndex numbers the live brokers 0..n-1 in id order. Ids are looked up once per
// partition of the snapshot, so small ids (the usual case) use a table instead of a map.
type brokerIndex struct {
	table []int32 // table[id] = number+1, 0 when not live
	m     map[int32]int32
}

func newBrokerIndex(ids []int32) brokerIndex {
	if len(ids) == 0 || ids[0] < 0 || int(ids[len(ids)-1]) > 64*len(ids)+1024 {
		m := make(map[int32]int32, len(ids))
		for i, id := range ids {
			m[id] = int32(i)
		}
		return brokerIndex{m: m}
	}
	t := make([]int32, ids[len(ids)-1]+1)
	for i, id := range ids {
		t[id] = int32(i) + 1
	}
	return brokerIndex{table: t}
}

func (x brokerIndex) get(id int32) (int32, bool) {
	if x.m != nil {
		d, ok := x.m[id]
		return d, ok
	}
	if id < 0 || int(id) >= len(x.table) || x.table[id] == 0 {
		return 0, false
	}
	return x.table[id] - 1, true
}

// shedItem is a partition Shed changes: its candidates are cands[lo:hi] (dense broker
// numbers, ascending) and choice is the chosen one (-1 until chosen).
type shedItem struct {
	p      *model.Partition
	lo, hi int32
	choice int32
}

// shedTopics returns the selected topics, sorted, or rejects unknown ones.
func shedTopics(s *model.Snapshot, req ShedRequest) ([]string, error) {
	var names []string
	if len(req.Topics) == 0 {
		names = make([]string, 0, len(s.Topics))
		for t := range s.Topics {
			names = append(names, t)
		}
		slices.Sort(names)
	} else {
		names = slices.Clone(req.Topics)
		slices.Sort(names)
		names = slices.Compact(names)
		var unknown []string
		for _, t := range names {
			if err, ok := s.Missing[t]; ok {
				unknown = append(unknown, fmt.Sprintf("topic %q does not exist (%v)", t, err))
			} else if _, ok := s.Topics[t]; !ok {
				unknown = append(unknown, fmt.Sprintf("topic %q was not read", t))
			}
		}
		if len(unknown) > 0 {
			return nil, reject("%s", strings.Join(unknown, "; "))
		}
	}
	if len(req.ExcludeTopics) > 0 {
		names = slices.DeleteFunc(names, func(t string) bool { return slices.Contains(req.ExcludeTopics, t) })
	}
	return names, nil
}

func compareTP(a, b model.TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// balance gives each item i one of its candidates cands[i] (dense broker numbers, ascending,
// distinct, at least one) so that the final loads are decreasingly minimal: no other choice
// gives a sorted (largest first) load vector that is lexicographically smaller. load holds
// the starting count of every broker and ends with the final counts.
//
// It works in two steps:
//
//  1. Greedy: the most constrained items first (fewest candidates, then input order), each
//     to its candidate with the lowest count, then the lowest number. This is optimal or
//     close to it on real clusters, and makes the ties go to the lowest broker id.
//  2. Repair: while some broker u can hand one item along a chain of items (u's item to v,
//     one of v's items to w, …) to a broker t with load[t] <= load[u]-2, do so. Only u and t
//     change counts, and the sum of squares drops, so this ends; an assignment without such
//     a chain ("cost-reducing path") is optimal (Harvey, Ladner, Lovász, Tamir 2003), and
//     optimal for every convex cost at once, which is the decreasing minimality above.
//
// Items with the same candidate set form a class, and the chains are searched over brokers
// through classes (u → v when a class holds both and has an item on u), so a search costs
// O(sum over classes of its size squared), independent of the number of items per class.
func balance(load []int, cands [][]int32) []int32 {
	n := len(cands)
	choice := make([]int32, n)
	if n == 0 {
		return choice
	}
	// Classes: runs of equal candidate sets once sorted.
	bySet := make([]int32, n)
	for i := range bySet {
		bySet[i] = int32(i)
	}
	slices.SortFunc(bySet, func(a, b int32) int {
		if c := slices.Compare(cands[a], cands[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	classOf := make([]int32, n)
	var classes []shedClass
	for i, it := range bySet {
		if i == 0 || !slices.Equal(cands[it], cands[bySet[i-1]]) {
			classes = append(classes, shedClass{members: cands[it]})
		}
		classOf[it] = int32(len(classes) - 1)
		classes[len(classes)-1].size++
	}
	// held[k] lists the class's items on members[k]; it never holds more than size items,
	// so each gets a fixed region of one array.
	heldN, itemsN := 0, 0
	for _, c := range classes {
		heldN += len(c.members)
		itemsN += len(c.members) * c.size
	}
	heads, room := make([][]int32, heldN), make([]int32, itemsN)
	for i := range classes {
		c := &classes[i]
		c.held, heads = heads[:len(c.members):len(c.members)], heads[len(c.members):]
		for k := range c.held {
			c.held[k], room = room[:0:c.size], room[c.size:]
		}
	}

	order := slices.Clone(bySet)
	slices.Sort(order)
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(len(cands[a]), len(cands[b])) })
	for _, it := range order {
		c := cands[it]
		best := 0
		for k := 1; k < len(c); k++ {
			if load[c[k]] < load[c[best]] {
				best = k
			}
		}
		choice[it] = c[best]
		load[c[best]]++
		cl := &classes[classOf[it]]
		k := slices.Index(cl.members, c[best])
		cl.held[k] = append(cl.held[k], it)
	}
	repair(load, classes, choice)
	return choice
}

type shedClass struct {
	members []int32   // candidate brokers, ascending
	size    int       // items in the class
	held    [][]int32 // held[k]: items of the class on members[k], in assignment order
}

// repair moves items along cost-reducing paths until there is none (see balance).
func repair(load []int, classes []shedClass, choice []int32) {
	type slot struct{ class, pos int32 } // a member of a class
	of := make([][]slot, len(load))      // the classes of each broker
	var sources []int32                  // brokers in some class
	for c, cl := range classes {
		for k, m := range cl.members {
			if len(of[m]) == 0 {
				sources = append(sources, m)
			}
			of[m] = append(of[m], slot{int32(c), int32(k)})
		}
	}
	var (
		seen   = make([]bool, len(load))
		parent = make([]int32, len(load)) // the broker an item comes from
		via    = make([]slot, len(load))  // the class and parent's position in it
		at     = make([]int32, len(load)) // the broker's position in that class
		queue  = make([]int32, 0, len(sources))
	)
	for {
		// Most loaded first, then the lowest number: deterministic.
		slices.SortFunc(sources, func(a, b int32) int {
			if c := cmp.Compare(load[b], load[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		low := load[sources[len(sources)-1]]
		moved := false
		for _, u := range sources {
			if load[u]-2 < low {
				break // no broker is low enough for this one, nor for the next ones
			}
			clear(seen)
			seen[u] = true
			queue = append(queue[:0], u)
			for q := 0; q < len(queue); q++ {
				p := queue[q]
				for _, sl := range of[p] {
					cl := &classes[sl.class]
					if len(cl.held[sl.pos]) == 0 {
						continue
					}
					for k, v := range cl.members {
						if !seen[v] {
							seen[v], parent[v], via[v], at[v] = true, p, sl, int32(k)
							queue = append(queue, v)
						}
					}
				}
			}
			t := int32(-1)
			for _, v := range queue[1:] {
				if load[v] <= load[u]-2 && (t < 0 || load[v] < load[t] || load[v] == load[t] && v < t) {
					t = v
				}
			}
			if t < 0 {
				continue
			}
			// Walk back from t: each step pops from a list untouched since the search.
			for v := t; v != u; v = parent[v] {
				cl := &classes[via[v].class]
				h := cl.held[via[v].pos]
				it := h[len(h)-1]
				cl.held[via[v].pos] = h[:len(h)-1]
				cl.held[at[v]] = append(cl.held[at[v]], it)
				choice[it] = v
			}
			load[u]--
			load[t]++
			moved = true
			break
		}
		if !moved {
			return
		}
	}
}
