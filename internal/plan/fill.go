package plan

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/model"
)

// FillRequest asks for replicas and leadership to move onto Brokers: brokers just added
// to the cluster, or empty ones (broker-added).
type FillRequest struct {
	Brokers []int32
	// Topics, when given, limits the plan to these topics: only their replicas count and
	// only they move (spread a topic onto the new brokers). Nil: every topic.
	Topics    []string
	Protected Protected
	// Capacity bounds the bytes each broker may be planned to hold (zero: not checked).
	Capacity Capacity
}

// Fill plans moving onto req.Brokers (the new brokers) the fewest replicas, then the
// fewest preferred leaderships, that bring the counts per live broker within 1 of even,
// never reducing any partition's rack spread. The counts are over every topic (the
// snapshot should hold them all), or over req.Topics.
//
// Replicas. One at a time, a replica moves from the most loaded old broker (then the
// lowest id) to the least loaded new broker (then the lowest id), as long as the two
// differ by 2 or more; it takes the place of the replica it replaces in the assigned
// replicas, so a preferred leader moves with it. A move is allowed when the new broker is
// no replica of the partition yet, the partition keeps its rack spread (the new broker is
// in the old one's rack, or the old one is not alone in its rack and the new one's rack
// has no replica of the partition), and the new broker stays within its capacity bound.
// The old broker gives a replica it leads (heads) when the new broker has fewer preferred
// leaderships than the even share and the old one more, otherwise one it does not lead.
// Each move lowers the highest count of an old broker that has one to give, so no move is
// wasted: the replicas moved are exactly what the new brokers gain.
//
// Leaders. Then, while an old broker heads 2 or more partitions more than a new broker of
// which it is a replica (in sync already, or a replica this plan adds: the election
// waits for its copy), they swap places in one of them, the new broker heading the
// fewest first, with the old broker heading the most. No data moves.
//
// Within 1 of even is not always reachable by moves onto the new brokers (an old broker
// below even cannot gain; racks may forbid): the plan then stops where no allowed move is
// left, and the caller reports the counts.
//
// Partitions under reassignment, without a leader, with a replica on a broker that is not
// live, or of a protected topic are left alone (their replicas still count) and are not
// listed. Rejected (*RejectError): no broker named, one named twice, or one that is not
// live.
func Fill(s *model.Snapshot, req FillRequest) (Plan, error) {
	if len(req.Brokers) == 0 {
		return Plan{}, reject("no broker to fill")
	}
	fresh := slices.Clone(req.Brokers)
	slices.Sort(fresh)
	if len(slices.Compact(fresh)) != len(req.Brokers) {
		return Plan{}, reject("brokers %v lists a broker twice", req.Brokers)
	}
	for _, b := range fresh {
		if _, ok := s.Brokers[b]; !ok {
			return Plan{}, reject("broker %d is not in the cluster's metadata: it is not live", b)
		}
	}
	f := newFiller(s, fresh, req)
	f.replicas()
	f.leaders()
	return f.plan(), nil
}

// filler is Fill's state: partitions flattened (topics sorted), their planned replicas,
// and the counts per live broker (dense numbers, id order).
type filler struct {
	s      *model.Snapshot
	ids    []int32
	index  brokerIndex
	rackOf []int32
	isNew  []bool
	load   []int // replicas per broker
	lead   []int // preferred leaderships (heads) per broker
	parts  []*model.Partition
	ar     [][]int32 // planned replicas (ids); shared with the snapshot until changed
	moved  []bool
	// lists[(u·racks+r)·2+h] are the partitions where broker u is a replica that may move
	// to rack r, heading the replicas (h = 1) or not (h = 0); stale entries are dropped
	// when met.
	lists  [][]int32
	nracks int
	cap    Capacity
	held   []int64 // bytes per broker, when capacity is bounded
	leadQ  int     // the even share of preferred leaderships, rounded down
}

func newFiller(s *model.Snapshot, fresh []int32, req FillRequest) *filler {
	ids := slices.Sorted(maps.Keys(s.Brokers))
	var names []string
	for _, b := range s.Brokers {
		names = append(names, b.Rack)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	f := &filler{s: s, ids: ids, index: newBrokerIndex(ids), rackOf: make([]int32, len(ids)), isNew: make([]bool, len(ids)),
		load: make([]int, len(ids)), lead: make([]int, len(ids)), nracks: len(names), cap: req.Capacity}
	for d, id := range ids {
		r, _ := slices.BinarySearch(names, s.Brokers[id].Rack)
		f.rackOf[d] = int32(r)
		_, f.isNew[d] = slices.BinarySearch(fresh, id)
	}
	f.lists = make([][]int32, len(ids)*f.nracks*2)
	totalLead := 0
	for _, topic := range slices.Sorted(maps.Keys(s.Topics)) {
		if req.Topics != nil && !slices.Contains(req.Topics, topic) {
			continue
		}
		ps := s.Topics[topic]
		_, protected := req.Protected.match(topic)
		for k := range ps {
			p := &ps[k]
			movable := !protected && !p.Reassigning() && p.Leader >= 0
			for j, r := range p.Replicas {
				d, ok := f.index.get(r)
				if !ok {
					movable = false
					continue
				}
				f.load[d]++
				if j == 0 {
					f.lead[d]++
					totalLead++
				}
			}
			if !movable {
				continue
			}
			i := int32(len(f.parts))
			f.parts = append(f.parts, p)
			for j, r := range p.Replicas {
				d, _ := f.index.get(r)
				if f.isNew[d] {
					continue
				}
				h := 0
				if j == 0 {
					h = 1
				}
				for rk := range f.nracks {
					l := f.list(d, int32(rk), h)
					*l = append(*l, i)
				}
			}
		}
	}
	f.ar = make([][]int32, len(f.parts))
	for i, p := range f.parts {
		f.ar[i] = p.Replicas
	}
	f.moved = make([]bool, len(f.parts))
	f.leadQ = totalLead / len(ids)
	if len(f.cap.Total) > 0 && f.cap.Size != nil {
		f.held = make([]int64, len(ids))
		for d, id := range ids {
			f.held[d] = f.cap.Used[id]
		}
	}
	return f
}

func (f *filler) list(u, r int32, h int) *[]int32 {
	return &f.lists[(int(u)*f.nracks+int(r))*2+h]
}

// fits reports whether broker a has room for partition i's replica (and its size).
func (f *filler) fits(a int32, i int32) (int64, bool) {
	if f.held == nil {
		return 0, true
	}
	n := f.cap.Size(f.parts[i].TopicPartition)
	l, ok := f.cap.limit(f.ids[a])
	return n, !ok || f.held[a]+n <= l
}

// rackKeeps reports whether moving partition i's replica from u to a keeps its rack
// spread.
func (f *filler) rackKeeps(i int32, u, a int32) bool {
	ru, ra := f.rackOf[u], f.rackOf[a]
	if ru == ra {
		return true
	}
	alone, present := true, false
	for _, r := range f.ar[i] {
		d, _ := f.index.get(r)
		if d != u && f.rackOf[d] == ru {
			alone = false
		}
		if f.rackOf[d] == ra {
			present = true
		}
	}
	return !alone || !present
}

// take finds a partition whose replica on u may move to a, heading its replicas or not
// (h), and moves it; false when none is left.
func (f *filler) take(u, a int32, h int) bool {
	l := f.list(u, f.rackOf[a], h)
	budget := len(*l) // entries put back (valid but not for a) before giving up
	for len(*l) > 0 && budget > 0 {
		i := (*l)[0]
		*l = (*l)[1:]
		at := slices.Index(f.ar[i], f.ids[u])
		if at < 0 || (at == 0) != (h == 1) || !f.rackKeeps(i, u, a) {
			continue // stale for good
		}
		size, room := f.fits(a, i)
		if slices.Contains(f.ar[i], f.ids[a]) || !room {
			*l = append(*l, i) // another new broker may take it
			budget--
			continue
		}
		if !f.moved[i] {
			f.ar[i] = slices.Clone(f.ar[i])
			f.moved[i] = true
		}
		f.ar[i][at] = f.ids[a]
		f.load[u]--
		f.load[a]++
		if at == 0 {
			f.lead[u]--
			f.lead[a]++
		}
		if f.held != nil {
			f.held[a] += size
		}
		return true
	}
	return false
}

// replicas moves replicas onto the new brokers (see Fill).
func (f *filler) replicas() {
	var news, olds []int32
	for d := range int32(len(f.ids)) {
		if f.isNew[d] {
			news = append(news, d)
		} else {
			olds = append(olds, d)
		}
	}
	stuck := make([]bool, len(f.ids))
	for {
		a := int32(-1)
		for _, d := range news {
			if !stuck[d] && (a < 0 || f.load[d] < f.load[a]) {
				a = d
			}
		}
		if a < 0 {
			return
		}
		slices.SortFunc(olds, func(x, y int32) int {
			if c := cmp.Compare(f.load[y], f.load[x]); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		done := false
		for _, u := range olds {
			if f.load[u]-f.load[a] < 2 {
				break
			}
			h := 0
			if f.lead[a] < f.leadQ && f.lead[u] > f.leadQ {
				h = 1
			}
			if f.take(u, a, h) || f.take(u, a, 1-h) {
				done = true
				break
			}
		}
		if !done {
			stuck[a] = true
		}
	}
}

// leadItem is a partition whose head led key partitions when it was pushed.
type leadItem struct {
	i   int32
	key int
}

// leadHeap orders partitions by how many preferred leaderships their head has, most first.
type leadHeap []leadItem

func (h leadHeap) Len() int { return len(h) }
func (h leadHeap) Less(i, j int) bool {
	return h[i].key > h[j].key || h[i].key == h[j].key && h[i].i < h[j].i
}
func (h leadHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *leadHeap) Push(x any)   { *h = append(*h, x.(leadItem)) }
func (h *leadHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// leaders swaps new brokers to the head of partitions they are replicas of (see Fill),
// the new broker heading the fewest first, from the old broker heading the most.
func (f *filler) leaders() {
	headLead := func(i int32) (int32, int) {
		x, _ := f.index.get(f.ar[i][0])
		return x, f.lead[x]
	}
	heaps := map[int32]*leadHeap{}
	for a := range int32(len(f.ids)) {
		if f.isNew[a] {
			heaps[a] = &leadHeap{}
		}
	}
	for i := range int32(len(f.parts)) {
		ar := f.ar[i]
		x, n := headLead(i)
		if f.isNew[x] {
			continue
		}
		for _, r := range ar[1:] {
			a, _ := f.index.get(r)
			if f.isNew[a] && (f.moved[i] || f.parts[i].InSync(r)) {
				// A replica this plan adds is in sync once copied; an old one must be now.
				*heaps[a] = append(*heaps[a], leadItem{i, n})
			}
		}
	}
	for _, h := range heaps {
		heap.Init(h)
	}
	for {
		a := int32(-1)
		for d, h := range heaps {
			if h.Len() > 0 && (a < 0 || f.lead[d] < f.lead[a] || f.lead[d] == f.lead[a] && d < a) {
				a = d
			}
		}
		if a < 0 {
			return
		}
		h := heaps[a]
		it := heap.Pop(h).(leadItem)
		x, n := headLead(it.i)
		switch {
		case f.isNew[x] || !slices.Contains(f.ar[it.i], f.ids[a]):
			// Another new broker heads it now.
		case n != it.key:
			heap.Push(h, leadItem{it.i, n}) // its head led more when pushed: look again
		case n-f.lead[a] < 2:
			*h = (*h)[:0] // no old broker heads 2 more than a any more
		default:
			if !f.moved[it.i] {
				f.ar[it.i] = slices.Clone(f.ar[it.i])
				f.moved[it.i] = true
			}
			at := slices.Index(f.ar[it.i], f.ids[a])
			f.ar[it.i][0], f.ar[it.i][at] = f.ar[it.i][at], f.ar[it.i][0]
			f.lead[x]--
			f.lead[a]++
		}
	}
}

// plan lists the changed partitions in topic and partition order.
func (f *filler) plan() Plan {
	var plan Plan
	for i, p := range f.parts {
		if !f.moved[i] || slices.Equal(f.ar[i], p.Replicas) {
			continue
		}
		leader := p.Leader
		if f.ar[i][0] != p.Replicas[0] {
			leader = f.ar[i][0]
		}
		plan.Changes = append(plan.Changes, Change{TopicPartition: p.TopicPartition, ReplicasBefore: slices.Clone(p.Replicas),
			ReplicasAfter: f.ar[i], LeaderBefore: p.Leader, LeaderAfter: leader})
	}
	return plan
}

// Counts returns the replicas and preferred leaderships per live broker after the plan
// (ascending ids), of the given topics (nil: every topic), for reports: "replicas per
// broker 98–100, leaders 33–34".
func Counts(s *model.Snapshot, p Plan, topics []string) (ids []int32, replicas, leaders []int) {
	ids = slices.Sorted(maps.Keys(s.Brokers))
	replicas, leaders = make([]int, len(ids)), make([]int, len(ids))
	after := make(map[model.TopicPartition][]int32, len(p.Changes))
	for _, c := range p.Changes {
		after[c.TopicPartition] = c.ReplicasAfter
	}
	for topic, ps := range s.Topics {
		if topics != nil && !slices.Contains(topics, topic) {
			continue
		}
		for _, part := range ps {
			r, ok := after[part.TopicPartition]
			if !ok {
				r = part.Replicas
			}
			for j, b := range r {
				if k, ok := slices.BinarySearch(ids, b); ok {
					replicas[k]++
					if j == 0 {
						leaders[k]++
					}
				}
			}
		}
	}
	return ids, replicas, leaders
}

// Spread describes counts per broker: "97–100 (broker 4: 97)".
func Spread(ids []int32, counts []int) string {
	if len(counts) == 0 {
		return "none"
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	var low []string
	for k, n := range counts {
		if n == lo && hi-lo > 1 {
			low = append(low, fmt.Sprintf("broker %d: %d", ids[k], n))
		}
	}
	if len(low) == 0 {
		return fmt.Sprintf("%d–%d", lo, hi)
	}
	return fmt.Sprintf("%d–%d (%s)", lo, hi, strings.Join(low, ", "))
}
