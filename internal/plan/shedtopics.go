package plan

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// balanceTopics is Shed's second objective. choice gives each item i one of its candidates
// cands[i] (dense broker numbers, ascending, as for balance) and load holds the cluster-wide
// counts it gives, decreasingly minimal (balance's result). Item i is a partition of topic
// topicOf[i] (0 <= topicOf[i] < len(leaders)); leaders[t] lists the leaders (dense; others
// are ignored) of topic t's partitions that keep their leader. balanceTopics changes choice,
// and load with it, to an assignment that
//
//  1. gives the same sorted (largest first) cluster-wide counts, and
//  2. among all those, has the least per-topic square sum S = Σ n(t,b)² over topics t and
//     brokers b, where n(t,b) counts the partitions of t that b leads after the plan;
//
// and it makes no change that does not lower S: balance's choice stays where it is already
// the least, ties to the lower broker id with it.
//
// Why this is exact. Decreasing minimality is the least square sum of the cluster-wide
// counts (see Shed), so the goal is a least-cost flow with separable convex costs, compared
// first by that square sum and then by S: items → (topic, broker) → broker → sink, n(t,b)
// the flow from (t, b) into b, a broker's count the flow from it into the sink. A flow is
// optimal when its residual graph has no negative cycle.
//
//   - The first cost fixes what may change. Broker u can pass a leader to v when an item
//     on u has v among its candidates; tier(b) is the largest count among the brokers that
//     hold an item and reach b along such passes. Decreasing minimality is that no broker
//     reaches one two below it, so tier(b) <= count(b)+1, and 1-2·tier(b), the distance
//     from the sink, is an optimal dual of the first cost. The assignments with the same
//     first cost are those that differ from this one along edges of zero reduced cost, each
//     count moving by one at most: an item moves only between brokers of one tier; b may
//     end one below its count when b holds an item and tier(b) = count(b), one above when
//     tier(b) = count(b)+1, and keeps its count otherwise. That is exactly the assignments
//     with the same sorted counts.
//   - Within those, S is a convex flow again, searched on a graph of the brokers and a
//     sink. An edge u → v for topic t when a chain of moves of t's items (u's item to w,
//     w's item to v, within one tier) takes one of t's leaders from u to v, at cost
//     2·(n(t,v) - n(t,u) + 1), what S changes by; per pair the cheapest topic (the lowest
//     number among equals). Sink → u when u may end one below, v → sink when v may end one
//     above, at cost 0. A negative cycle of the full residual graph enters and leaves
//     topics at brokers, so it maps onto a closed walk of this graph no dearer: when this
//     graph has no negative cycle, the assignment is optimal. Conversely a negative cycle
//     of this graph, its edges replaced by their chains, is a negative closed walk of the
//     residual graph; split at a repeated node, one part is negative, down to a simple
//     cycle. Moving one item along each of its steps keeps the first cost and lowers S by
//     the cycle's cost, at least 2 (costs are even). S >= 0, so the rounds end.
//
// A round looks for the most negative cycle of two brokers first (a swap of two topics'
// leaders between u and v, or a pass from a broker that may lose one to one that may gain
// one: either has a negative edge, and the pairs with one are kept in a list), then for any
// (Bellman–Ford, O(brokers³), rarely). Each pair of brokers keeps its topics in a heap by
// cost, and a round updates only the topics it moved items of. Setup is O(k log k + Σ m²)
// time and memory for k items and topics with m local brokers each; a round without
// Bellman–Ford is O(negative pairs + the updated topics' m·log(topics)); there are at most
// (S - least S)/2 rounds: about 1,300 on the scale benchmark (25,000 leaders moved, 2,000
// topics, 6 brokers), 20 ms in all.
func balanceTopics(load []int, cands [][]int32, topicOf []int32, leaders [][]int32, choice []int32) {
	if len(cands) == 0 {
		return
	}
	tb := &topicBalancer{load: load, choice: choice, nb: len(load)}
	tb.classes(cands, topicOf)
	tb.tiers()
	tb.topics(topicOf, leaders)
	tb.pairs()
	for {
		cyc := tb.shortCycle()
		if cyc == nil {
			cyc = tb.negativeCycle()
		}
		if cyc == nil || !tb.cancel(cyc) {
			return
		}
	}
}

// tbClass is the items of one topic with one candidate set.
type tbClass struct {
	topic   int32
	members []int32   // candidates, ascending; after tiers only those of the items' tier
	held    [][]int32 // held[k]: the class's items on members[k]
	local   []int32   // members as indices into the topic's brokers
}

// tbTopic is a topic with items that can move.
type tbTopic struct {
	brokers []int32 // the brokers its movable classes may use (dense, ascending): "local"
	count   []int   // n(t, b) for each, at the current choice
	classes []int32 // its classes with two members or more
	membOff []int32 // local broker a is member pos of class c for the (c, pos) in
	memb    [][2]int32
	words   int
	reach   []uint64 // row a (words words): the local brokers a can pass a leader to
	slots   []int32  // slots[a*m+c]: its slot in the heap of pair (brokers[a], brokers[c])
	stale   bool     // reach needs recomputing: some held list emptied or filled
	changed []int32  // local brokers whose count changed since the last offer
}

type topicBalancer struct {
	load   []int
	choice []int32
	nb     int
	cls    []tbClass
	tops   []tbTopic
	onto   []int32 // items on each broker
	tier   []int   // -1: none
	lo, hi []int   // the cluster-wide counts that keep the first cost

	// Pairs of brokers that some topic has both of, each with a heap of its topics' slots.
	pairU, pairV []int32
	pairRev      []int32 // the pair (v, u), -1: none
	heapOff      []int32 // pair p's heap is heap[heapOff[p]:heapOff[p+1]]
	heap         []int32
	slotKey      []int32 // the topic's cost for the pair, MaxInt32 when it has no chain
	slotTopic    []int32
	slotPair     []int32
	slotPos      []int32 // position in the pair's heap
	pairKey      []int32 // the top of each pair's heap: its cost
	pairTop      []int32 // and its topic
	neg          []int32 // the pairs whose cost is negative, and maybe others
	inNeg        []bool

	scratch       []uint64
	tmp           []int32
	from, via     []int32 // chain's
	edges         []hEdge
	dist          []int
	parent, stamp []int32
}

// classes groups the items by topic and candidate set.
func (tb *topicBalancer) classes(cands [][]int32, topicOf []int32) {
	order := make([]int32, len(cands))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(topicOf[a], topicOf[b]); c != 0 {
			return c
		}
		if c := slices.Compare(cands[a], cands[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var starts []int32
	for i, it := range order {
		if i == 0 || topicOf[it] != topicOf[order[i-1]] || !slices.Equal(cands[it], cands[order[i-1]]) {
			starts = append(starts, int32(i))
		}
	}
	starts = append(starts, int32(len(order)))
	nc := len(starts) - 1
	// held[k] never holds more than the class's items: each gets a region of one array.
	nh, nroom := 0, 0
	for c := range nc {
		m := len(cands[order[starts[c]]])
		nh += m
		nroom += m * int(starts[c+1]-starts[c])
	}
	heads, room := make([][]int32, nh), make([]int32, nroom)
	tb.cls = make([]tbClass, nc)
	tb.onto = make([]int32, tb.nb)
	for c := range nc {
		items := order[starts[c]:starts[c+1]]
		cl := &tb.cls[c]
		cl.topic, cl.members = topicOf[items[0]], cands[items[0]]
		cl.held = carve(&heads, len(cl.members))
		for k := range cl.held {
			cl.held[k] = carve(&room, len(items))[:0]
		}
		for _, it := range items {
			k := slices.Index(cl.members, tb.choice[it])
			cl.held[k] = append(cl.held[k], it)
			tb.onto[tb.choice[it]]++
		}
	}
}

// carve returns the first n elements of *a, capacity n, and moves *a past them.
func carve[T any](a *[]T, n int) []T {
	s := (*a)[:n:n]
	*a = (*a)[n:]
	return s
}

// tiers computes tier, lo and hi (see balanceTopics) and keeps in each class only the
// members of its items' tier.
func (tb *topicBalancer) tiers() {
	nb := tb.nb
	adj := make([][]int32, nb)
	for _, c := range tb.cls {
		for k, u := range c.members {
			if len(c.held[k]) > 0 {
				for _, v := range c.members {
					if v != u {
						adj[u] = append(adj[u], v)
					}
				}
			}
		}
	}
	var src []int32
	for b := range nb {
		slices.Sort(adj[b])
		adj[b] = slices.Compact(adj[b])
		if tb.onto[b] > 0 {
			src = append(src, int32(b))
		}
	}
	// From the largest count down, each broker marks what it reaches and is not marked yet
	// (what a marked broker reaches is marked already).
	slices.SortStableFunc(src, func(a, b int32) int { return cmp.Compare(tb.load[b], tb.load[a]) })
	tb.tier = make([]int, nb)
	for b := range tb.tier {
		tb.tier[b] = -1
	}
	var queue []int32
	for _, s := range src {
		if tb.tier[s] >= 0 {
			continue
		}
		tb.tier[s] = tb.load[s]
		queue = append(queue[:0], s)
		for q := 0; q < len(queue); q++ {
			for _, v := range adj[queue[q]] {
				if tb.tier[v] < 0 {
					tb.tier[v] = tb.load[s]
					queue = append(queue, v)
				}
			}
		}
	}
	tb.lo, tb.hi = slices.Clone(tb.load), slices.Clone(tb.load)
	for b := range nb {
		if tb.onto[b] > 0 && tb.tier[b] == tb.load[b] {
			tb.lo[b]--
		}
		if tb.tier[b] == tb.load[b]+1 {
			tb.hi[b]++
		}
	}
	n := 0
	for _, c := range tb.cls {
		n += len(c.members)
	}
	kept := make([]int32, 0, n) // not in place: members is the caller's cands
	for i := range tb.cls {
		c := &tb.cls[i]
		t := -1
		for k, m := range c.members {
			if len(c.held[k]) == 0 {
				continue
			}
			if t >= 0 && tb.tier[m] != t {
				// Items of one class in two tiers: not with decreasingly minimal counts
				// (the lower tier's broker would reach the higher's). Leave them.
				t = -2
				break
			}
			t = tb.tier[m]
		}
		lo, j := len(kept), 0
		for k, m := range c.members {
			if tb.tier[m] == t {
				kept = append(kept, m)
				c.held[j] = c.held[k]
				j++
			}
		}
		c.members, c.held = kept[lo:len(kept):len(kept)], c.held[:j:j]
	}
}

// topics builds the topics' local brokers, counts and memberships, and their reach.
func (tb *topicBalancer) topics(topicOf []int32, leaders [][]int32) {
	nt := len(leaders)
	tb.tops = make([]tbTopic, nt)
	// The movable classes of each topic (classes are in topic order) and its brokers.
	movable := make([]int32, 0, len(tb.cls))
	nm := 0
	for ci, c := range tb.cls {
		if len(c.members) >= 2 {
			movable = append(movable, int32(ci))
			nm += len(c.members)
		}
	}
	brokers := make([]int32, 0, nm)
	nw := 0
	for i := 0; i < len(movable); {
		t := tb.cls[movable[i]].topic
		j := i
		lo := len(brokers)
		for ; j < len(movable) && tb.cls[movable[j]].topic == t; j++ {
			brokers = append(brokers, tb.cls[movable[j]].members...)
		}
		slices.Sort(brokers[lo:])
		brokers = brokers[:lo+len(slices.Compact(brokers[lo:]))]
		tp := &tb.tops[t]
		tp.classes, tp.brokers = movable[i:j:j], brokers[lo:len(brokers):len(brokers)]
		tp.words = (len(tp.brokers) + 63) / 64
		nw += len(tp.brokers) * tp.words
		i = j
	}
	// The items of each topic, for the counts: those that cannot move count too.
	off := make([]int32, nt+1)
	for _, t := range topicOf {
		off[t+1]++
	}
	for t := range nt {
		off[t+1] += off[t]
	}
	byTopic := make([]int32, len(topicOf))
	fill := slices.Clone(off[:nt])
	for i, t := range topicOf {
		byTopic[fill[t]] = int32(i)
		fill[t]++
	}
	loc := make([]int32, tb.nb)
	for b := range loc {
		loc[b] = -1
	}
	counts, membOff := make([]int, len(brokers)), make([]int32, len(brokers)+nt)
	memb, local, reach := make([][2]int32, nm), make([]int32, nm), make([]uint64, nw)
	for t := range nt {
		tp := &tb.tops[t]
		m := len(tp.brokers)
		if m == 0 {
			continue
		}
		for k, b := range tp.brokers {
			loc[b] = int32(k)
		}
		tp.count = carve(&counts, m)
		for _, l := range leaders[t] {
			if l >= 0 && int(l) < tb.nb && loc[l] >= 0 {
				tp.count[loc[l]]++
			}
		}
		for _, it := range byTopic[off[t]:off[t+1]] {
			if k := loc[tb.choice[it]]; k >= 0 {
				tp.count[k]++
			}
		}
		tp.membOff = carve(&membOff, m+1)
		n := 0
		for _, c := range tp.classes {
			cl := &tb.cls[c]
			cl.local = carve(&local, len(cl.members))
			for k, b := range cl.members {
				cl.local[k] = loc[b]
				tp.membOff[loc[b]+1]++
			}
			n += len(cl.members)
		}
		for a := range m {
			tp.membOff[a+1] += tp.membOff[a]
		}
		tp.memb = carve(&memb, n)
		at := tb.scratch32(m)
		copy(at, tp.membOff[:m])
		for _, c := range tp.classes {
			for k, a := range tb.cls[c].local {
				tp.memb[at[a]] = [2]int32{c, int32(k)}
				at[a]++
			}
		}
		for _, b := range tp.brokers {
			loc[b] = -1
		}
		tp.reach = carve(&reach, m*tp.words)
		tb.reach(t)
	}
}

// scratch32 returns a scratch slice of n int32 (its content is undefined).
func (tb *topicBalancer) scratch32(n int) []int32 {
	if cap(tb.tmp) < n {
		tb.tmp = make([]int32, 2*n)
	}
	return tb.tmp[:n]
}

// reach recomputes which local brokers of topic t can pass one of its leaders to which
// (Warshall's closure on bit rows).
func (tb *topicBalancer) reach(t int) {
	tp := &tb.tops[t]
	m, w := len(tp.brokers), tp.words
	r := tp.reach
	clear(r)
	for _, c := range tp.classes {
		cl := &tb.cls[c]
		for k, a := range cl.local {
			if len(cl.held[k]) == 0 {
				continue
			}
			for _, b := range cl.local {
				if b != a {
					r[int(a)*w+int(b)/64] |= 1 << (uint(b) % 64)
				}
			}
		}
	}
	for k := range m {
		rk := r[k*w : (k+1)*w]
		for a := range m {
			if ra := r[a*w : (a+1)*w]; ra[k/64]&(1<<(uint(k)%64)) != 0 {
				for i, x := range rk {
					ra[i] |= x
				}
			}
		}
	}
	tp.stale = false
}

// hEdge is an edge of the broker graph: u passes one leader of topic t to v, or (t < 0) an
// edge from or to the sink (nb).
type hEdge struct {
	u, v, t int32
	cost    int
}

// pairs numbers the pairs of brokers that some topic has both of, and builds their heaps.
func (tb *topicBalancer) pairs() {
	idx := newPairIndex(tb.nb)
	var cnt []int32
	n := 0
	for _, tp := range tb.tops {
		n += len(tp.brokers) * len(tp.brokers)
	}
	slots := make([]int32, n)
	for t := range tb.tops {
		tp := &tb.tops[t]
		m := len(tp.brokers)
		tp.slots = carve(&slots, m*m)
		for a, u := range tp.brokers {
			for c, v := range tp.brokers {
				if a == c {
					tp.slots[a*m+c] = -1
					continue
				}
				p, ok := idx.get(u, v)
				if !ok {
					p = int32(len(tb.pairU))
					idx.put(u, v, p)
					tb.pairU, tb.pairV = append(tb.pairU, u), append(tb.pairV, v)
					cnt = append(cnt, 0)
				}
				tp.slots[a*m+c] = p // the pair for now; the slot below
				cnt[p]++
			}
		}
	}
	np := len(tb.pairU)
	tb.pairRev = make([]int32, np)
	for p := range np {
		tb.pairRev[p] = -1
		if q, ok := idx.get(tb.pairV[p], tb.pairU[p]); ok {
			tb.pairRev[p] = q
		}
	}
	tb.heapOff = make([]int32, np+1)
	for p, k := range cnt {
		tb.heapOff[p+1] = tb.heapOff[p] + k
	}
	ns := tb.heapOff[np]
	tb.heap = make([]int32, ns)
	tb.slotKey, tb.slotTopic = make([]int32, ns), make([]int32, ns)
	tb.slotPair, tb.slotPos = make([]int32, ns), make([]int32, ns)
	fill := slices.Clone(tb.heapOff[:np])
	for t := range tb.tops {
		tp := &tb.tops[t]
		m := len(tp.brokers)
		for a := range m {
			for c := range m {
				p := tp.slots[a*m+c]
				if p < 0 {
					continue
				}
				sl := fill[p]
				fill[p]++
				tp.slots[a*m+c] = sl
				tb.heap[sl] = sl
				tb.slotTopic[sl], tb.slotPair[sl], tb.slotPos[sl] = int32(t), p, sl-tb.heapOff[p]
				tb.slotKey[sl] = tb.cost(t, a, c)
			}
		}
	}
	tb.pairKey, tb.pairTop, tb.inNeg = make([]int32, np), make([]int32, np), make([]bool, np)
	for p := range np {
		h := tb.heap[tb.heapOff[p]:tb.heapOff[p+1]]
		for i := len(h)/2 - 1; i >= 0; i-- {
			tb.down(h, i)
		}
		tb.top(int32(p))
	}
}

// pairIndex numbers pairs of brokers: a table up to 2,048 brokers, a map above.
type pairIndex struct {
	nb    int
	table []int32 // number+1, 0: none
	m     map[int64]int32
}

func newPairIndex(nb int) pairIndex {
	if nb <= 2048 {
		return pairIndex{nb: nb, table: make([]int32, nb*nb)}
	}
	return pairIndex{nb: nb, m: map[int64]int32{}}
}

func (x pairIndex) get(u, v int32) (int32, bool) {
	if x.m != nil {
		p, ok := x.m[int64(u)*int64(x.nb)+int64(v)]
		return p, ok
	}
	p := x.table[int(u)*x.nb+int(v)]
	return p - 1, p > 0
}

func (x pairIndex) put(u, v, p int32) {
	if x.m != nil {
		x.m[int64(u)*int64(x.nb)+int64(v)] = p
		return
	}
	x.table[int(u)*x.nb+int(v)] = p + 1
}

// cost is what S changes by when topic t's local broker a passes one leader to c, along a
// chain of moves; MaxInt32 when there is no chain.
func (tb *topicBalancer) cost(t int, a, c int) int32 {
	tp := &tb.tops[t]
	if tp.reach[a*tp.words+c/64]&(1<<(uint(c)%64)) == 0 {
		return math.MaxInt32
	}
	return int32(2 * (tp.count[c] - tp.count[a] + 1))
}

// best is pair p's cheapest edge (its lowest topic among equals); ok false: none.
func (tb *topicBalancer) best(p int32) (hEdge, bool) {
	if tb.pairKey[p] == math.MaxInt32 {
		return hEdge{}, false
	}
	return hEdge{u: tb.pairU[p], v: tb.pairV[p], t: tb.pairTop[p], cost: int(tb.pairKey[p])}, true
}

// top copies the top of pair p's heap to pairKey and pairTop, and lists p in neg when it
// is negative.
func (tb *topicBalancer) top(p int32) {
	sl := tb.heap[tb.heapOff[p]]
	tb.pairKey[p], tb.pairTop[p] = tb.slotKey[sl], tb.slotTopic[sl]
	if tb.pairKey[p] < 0 && !tb.inNeg[p] {
		tb.inNeg[p] = true
		tb.neg = append(tb.neg, p)
	}
}

// refresh updates the heaps after moves of topic t's items.
func (tb *topicBalancer) refresh(t int) {
	tp := &tb.tops[t]
	m := len(tp.brokers)
	if tp.stale {
		// Offer the pairs whose reach changed.
		w := tp.words
		tb.scratch = append(tb.scratch[:0], tp.reach...)
		tb.reach(t)
		for a := range m {
			for i, x := range tp.reach[a*w : (a+1)*w] {
				for d := x ^ tb.scratch[a*w+i]; d != 0; d &= d - 1 {
					tb.offer(t, a, i*64+bits.TrailingZeros64(d))
				}
			}
		}
	}
	slices.Sort(tp.changed)
	for _, x := range slices.Compact(tp.changed) {
		for y := range m {
			tb.offer(t, int(x), y)
			tb.offer(t, y, int(x))
		}
	}
	tp.changed = tp.changed[:0]
}

// offer puts the current cost of topic t's local pair (a, c) into the pair's heap.
func (tb *topicBalancer) offer(t int, a, c int) {
	tp := &tb.tops[t]
	sl := tp.slots[a*len(tp.brokers)+c]
	if sl < 0 {
		return
	}
	key, old := tb.cost(t, a, c), tb.slotKey[sl]
	if key == old {
		return
	}
	tb.slotKey[sl] = key
	p := tb.slotPair[sl]
	h := tb.heap[tb.heapOff[p]:tb.heapOff[p+1]]
	if key < old {
		tb.up(h, int(tb.slotPos[sl]))
	} else {
		tb.down(h, int(tb.slotPos[sl]))
	}
	tb.top(p)
}

func (tb *topicBalancer) less(x, y int32) bool {
	kx, ky := tb.slotKey[x], tb.slotKey[y]
	return kx < ky || kx == ky && tb.slotTopic[x] < tb.slotTopic[y]
}

func (tb *topicBalancer) up(h []int32, i int) {
	for i > 0 {
		j := (i - 1) / 2
		if !tb.less(h[i], h[j]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		tb.slotPos[h[i]], tb.slotPos[h[j]] = int32(i), int32(j)
		i = j
	}
}

func (tb *topicBalancer) down(h []int32, i int) {
	for {
		j := 2*i + 1
		if j >= len(h) {
			return
		}
		if j+1 < len(h) && tb.less(h[j+1], h[j]) {
			j++
		}
		if !tb.less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		tb.slotPos[h[i]], tb.slotPos[h[j]] = int32(i), int32(j)
		i = j
	}
}

// shortCycle returns the most negative cycle of two brokers, or nil. Such a cycle has a
// negative edge (of a pair in neg): a pass from a broker that may lose one to one that may
// gain one, or a swap with the reverse pair.
func (tb *topicBalancer) shortCycle() []hEdge {
	sink := int32(tb.nb)
	var cyc []hEdge
	least := 0
	k := 0
	for _, p := range tb.neg {
		e, _ := tb.best(p)
		if e.cost >= 0 {
			tb.inNeg[p] = false
			continue
		}
		tb.neg[k] = p
		k++
		if e.cost < least && tb.load[e.u] > tb.lo[e.u] && tb.load[e.v] < tb.hi[e.v] {
			least = e.cost
			cyc = append(cyc[:0], hEdge{u: sink, v: e.u, t: -1}, e, hEdge{u: e.v, v: sink, t: -1})
		}
		if q := tb.pairRev[p]; q >= 0 {
			if f, ok := tb.best(q); ok && e.cost+f.cost < least {
				least = e.cost + f.cost
				cyc = append(cyc[:0], e, f)
			}
		}
	}
	tb.neg = tb.neg[:k]
	return cyc
}

// negativeCycle returns a negative cycle of the broker graph, or nil (Bellman–Ford from
// every node at once).
func (tb *topicBalancer) negativeCycle() []hEdge {
	nb := tb.nb
	sink := int32(nb)
	edges := tb.edges[:0]
	for p := range tb.pairU {
		if e, ok := tb.best(int32(p)); ok {
			edges = append(edges, e)
		}
	}
	for b := range nb {
		if tb.load[b] > tb.lo[b] {
			edges = append(edges, hEdge{u: sink, v: int32(b), t: -1})
		}
		if tb.load[b] < tb.hi[b] {
			edges = append(edges, hEdge{u: int32(b), v: sink, t: -1})
		}
	}
	tb.edges = edges
	if tb.dist == nil {
		tb.dist, tb.parent, tb.stamp = make([]int, nb+1), make([]int32, nb+1), make([]int32, nb+1)
	}
	dist, parent := tb.dist, tb.parent
	clear(dist)
	for i := range parent {
		parent[i] = -1
	}
	// Without a negative cycle the distances settle within nb+1 rounds; with one, the
	// parent edges close a cycle (a negative one) by then.
	for range nb + 2 {
		relaxed := false
		for i, e := range edges {
			if d := dist[e.u] + e.cost; d < dist[e.v] {
				dist[e.v], parent[e.v] = d, int32(i)
				relaxed = true
			}
		}
		if !relaxed {
			return nil
		}
		if x := tb.parentCycle(); x >= 0 {
			var cyc []hEdge
			for y := x; ; {
				e := edges[parent[y]]
				cyc = append(cyc, e)
				if y = e.u; y == x {
					break
				}
			}
			slices.Reverse(cyc)
			return cyc
		}
	}
	return nil // not reached
}

// parentCycle returns a node on a cycle of the parent edges, or -1.
func (tb *topicBalancer) parentCycle() int32 {
	stamp := tb.stamp
	clear(stamp)
	for s := range stamp {
		x := int32(s)
		for stamp[x] == 0 {
			stamp[x] = int32(s) + 1
			if tb.parent[x] < 0 {
				break
			}
			x = tb.edges[tb.parent[x]].u
		}
		if stamp[x] == int32(s)+1 && tb.parent[x] >= 0 {
			return x
		}
	}
	return -1
}

// fNode is a node of the residual graph: broker b (t = -1; b = nb is the sink) or topic
// t's local broker b.
type fNode struct{ t, b int32 }

// fStep is an edge of the residual graph; class >= 0 for a move of one of its items.
type fStep struct {
	from, to fNode
	cost     int
	class    int32
}

// cancel replaces each edge of the negative cycle by its chain, takes a negative simple
// cycle out of that walk and moves one item along each of its steps. It reports false if
// there was none (cannot happen).
func (tb *topicBalancer) cancel(cyc []hEdge) bool {
	var walk []fStep
	for _, e := range cyc {
		if e.t < 0 {
			walk = append(walk, fStep{from: fNode{-1, e.u}, to: fNode{-1, e.v}, class: -1})
			continue
		}
		tp := &tb.tops[e.t]
		a, _ := slices.BinarySearch(tp.brokers, e.u)
		c, _ := slices.BinarySearch(tp.brokers, e.v)
		walk = append(walk, fStep{from: fNode{-1, e.u}, to: fNode{e.t, int32(a)}, cost: 1 - 2*tp.count[a], class: -1})
		walk = append(walk, tb.chain(int(e.t), int32(a), int32(c))...)
		walk = append(walk, fStep{from: fNode{e.t, int32(c)}, to: fNode{-1, e.v}, cost: 2*tp.count[c] + 1, class: -1})
	}
	walk = simpleNegative(walk)
	if walk == nil {
		return false
	}
	var touched []int32
	for _, s := range walk {
		if s.class >= 0 {
			tb.move(s.class, s.from.b, s.to.b)
			touched = append(touched, s.from.t)
		}
	}
	slices.Sort(touched)
	for _, t := range slices.Compact(touched) {
		tb.refresh(int(t))
	}
	return true
}

// simpleNegative returns a negative simple cycle of the negative closed walk (nil if the
// walk is not negative): a repeated node splits the walk in two closed walks, one of which
// is negative.
func simpleNegative(walk []fStep) []fStep {
	total := 0
	for _, s := range walk {
		total += s.cost
	}
	if total >= 0 {
		return nil
	}
	for {
		cut := false
	scan:
		for j, s := range walk {
			for i := range j {
				if walk[i].from != s.from {
					continue
				}
				sub, cost := walk[i:j], 0
				for _, x := range sub {
					cost += x.cost
				}
				if cost < 0 {
					return sub
				}
				walk = append(walk[:i:i], walk[j:]...)
				cut = true
				break scan
			}
		}
		if !cut {
			return walk
		}
	}
}

// chain returns the moves of a shortest chain in topic t from local broker a to c.
func (tb *topicBalancer) chain(t int, a, c int32) []fStep {
	tp := &tb.tops[t]
	if m := len(tp.brokers); cap(tb.from) < m {
		tb.from, tb.via = make([]int32, m), make([]int32, m)
	}
	from, via := tb.from[:len(tp.brokers)], tb.via[:len(tp.brokers)]
	for i := range from {
		from[i] = -1
	}
	from[a] = a
	queue := []int32{a}
	for q := 0; q < len(queue) && from[c] < 0; q++ {
		x := queue[q]
		for _, mk := range tp.memb[tp.membOff[x]:tp.membOff[x+1]] {
			cl := &tb.cls[mk[0]]
			if len(cl.held[mk[1]]) == 0 {
				continue
			}
			for _, y := range cl.local {
				if from[y] < 0 {
					from[y], via[y] = x, mk[0]
					queue = append(queue, y)
				}
			}
		}
	}
	var steps []fStep
	for y := c; y != a; y = from[y] {
		steps = append(steps, fStep{from: fNode{int32(t), from[y]}, to: fNode{int32(t), y}, class: via[y]})
	}
	slices.Reverse(steps)
	return steps
}

// move moves one item of class ci (its last on a) from its topic's local broker a to c.
func (tb *topicBalancer) move(ci int32, a, c int32) {
	cl := &tb.cls[ci]
	tp := &tb.tops[cl.topic]
	ka, kc := slices.Index(cl.local, a), slices.Index(cl.local, c)
	h := cl.held[ka]
	it := h[len(h)-1]
	cl.held[ka] = h[:len(h)-1]
	if len(h) == 1 || len(cl.held[kc]) == 0 {
		tp.stale = true
	}
	cl.held[kc] = append(cl.held[kc], it)
	tb.choice[it] = cl.members[kc]
	tp.count[a]--
	tp.count[c]++
	tp.changed = append(tp.changed, a, c)
	tb.load[cl.members[ka]]--
	tb.load[cl.members[kc]]++
}
