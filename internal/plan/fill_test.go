package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

func TestFill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers map[int32]string
		topics  map[string][]model.Partition
		req     FillRequest
		reject  string
		want    Plan
	}{
		{
			name:    "a new broker takes its share of replicas and leaders",
			brokers: norack(3),
			topics: map[string][]model.Partition{"t": {
				insync(1, 2), insync(2, 1), insync(1, 2), insync(2, 1), insync(1, 2), insync(2, 1),
			}},
			// 12 replicas on 3 brokers: 4 each; 6 leaders: 2 each.
			req: FillRequest{Brokers: ids(3)},
			want: Plan{Changes: []Change{
				ch("t", 0, ids(1, 2), ids(3, 2), 1, 3),
				ch("t", 1, ids(2, 1), ids(3, 1), 2, 3),
				ch("t", 2, ids(1, 2), ids(1, 3), 1, 1),
				ch("t", 3, ids(2, 1), ids(2, 3), 2, 2),
			}},
		},
		{
			name:    "racks: a replica alone in its rack moves only within it",
			brokers: map[int32]string{1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r1"},
			topics: map[string][]model.Partition{"t": {
				insync(1, 3), insync(3, 1), insync(2, 4), insync(4, 2), insync(1, 4), insync(3, 2),
			}},
			req: FillRequest{Brokers: ids(5)},
			want: Plan{Changes: []Change{
				ch("t", 0, ids(1, 3), ids(5, 3), 1, 5),
				ch("t", 3, ids(4, 2), ids(4, 5), 4, 4),
			}},
		},
		{
			name:    "left alone: reassigning, no leader, a replica on a dead broker, protected",
			brokers: norack(3),
			topics: map[string][]model.Partition{
				"t": {
					func() model.Partition { p := insync(1, 2); p.Adding = ids(2); return p }(),
					{Replicas: ids(1, 2), Leader: -1},
					insync(1, 9),
					insync(2, 1),
				},
				"keep": {insync(1, 2), insync(1, 2)},
			},
			req: FillRequest{Brokers: ids(3), Protected: func(topic string) (string, bool) { return "keep", topic == "keep" }},
			// Broker 1 holds the most: it gives the one replica it may (not the leader it
			// would rather give: it leads only partitions left alone).
			want: Plan{Changes: []Change{ch("t", 3, ids(2, 1), ids(2, 3), 2, 2)}},
		},
		{
			name:    "leadership only: the new broker is a replica already",
			brokers: norack(3),
			topics: map[string][]model.Partition{"t": {
				insync(1, 2, 3), insync(1, 2, 3), insync(1, 3, 2), insync(2, 3, 1), insync(2, 1, 3), insync(1, 2, 3),
			}},
			req: FillRequest{Brokers: ids(3)},
			want: Plan{Changes: []Change{
				ch("t", 0, ids(1, 2, 3), ids(3, 2, 1), 1, 3),
				ch("t", 1, ids(1, 2, 3), ids(3, 2, 1), 1, 3),
			}},
		},
		{
			name:    "capacity: nothing above the bound",
			brokers: norack(3),
			topics:  map[string][]model.Partition{"t": {insync(1, 2), insync(2, 1), insync(1, 2), insync(2, 1)}},
			req: FillRequest{Brokers: ids(3), Capacity: Capacity{Total: map[int32]int64{3: 100}, Used: map[int32]int64{3: 10},
				Size: func(model.TopicPartition) int64 { return 40 }, Threshold: 0.8}},
			want: Plan{Changes: []Change{ch("t", 0, ids(1, 2), ids(3, 2), 1, 3)}},
		},
		{
			name:    "topics: only theirs count and move",
			brokers: norack(3),
			topics: map[string][]model.Partition{
				"a": {insync(1, 2), insync(2, 1), insync(1, 2)},
				"b": {insync(3, 1), insync(3, 2), insync(3, 1), insync(3, 2)}, // 3 is busy with b
			},
			// Over a alone: 6 replicas, 2 each; 3 leaders, 1 each.
			req: FillRequest{Brokers: ids(3), Topics: []string{"a"}},
			want: Plan{Changes: []Change{
				ch("a", 0, ids(1, 2), ids(3, 2), 1, 3),
				ch("a", 2, ids(1, 2), ids(1, 3), 1, 1),
			}},
		},
		{name: "no broker", brokers: norack(3), req: FillRequest{}, reject: "no broker to fill"},
		{name: "twice", brokers: norack(3), req: FillRequest{Brokers: ids(3, 3)}, reject: "lists a broker twice"},
		{name: "not live", brokers: norack(3), req: FillRequest{Brokers: ids(4)}, reject: "broker 4 is not in the cluster's metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rfSnap(tc.brokers, tc.topics)
			got, ok := checkPlan(t, s, tc.reject, func() (Plan, error) { return Fill(s, tc.req) })
			if !ok {
				return
			}
			if !reflect.DeepEqual(normPlan(got), normPlan(tc.want)) {
				t.Errorf("got\n%s\nwant\n%s", fmtChanges(got.Changes), fmtChanges(tc.want.Changes))
			}
			ids, replicas, leaders := Counts(s, got, tc.req.Topics)
			t.Logf("replicas per broker %s, leaders %s (brokers %v)", Spread(ids, replicas), Spread(ids, leaders), ids)
		})
	}
}

// TestFillRandom checks Fill's rules on small irregular clusters: only moves onto the new
// brokers, rack spread kept, the fewest moves when even is reached, and no allowed move
// left when it is not.
func TestFillRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 2026))
	var planned, even, stuck, moves, leaderSwaps int
	for i := range 3000 {
		s, req := randomFillCase(r)
		name := fmt.Sprintf("case %d (fill %v)", i, req.Brokers)
		before := copySnapshot(s)
		got, err := Fill(s, req)
		if !reflect.DeepEqual(before, s) {
			t.Fatalf("%s: planning modified the snapshot", name)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := Fill(s, req)
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: two plans of the same input differ", name)
		}
		planned++
		isNew := func(b int32) bool { return slices.Contains(req.Brokers, b) }
		m, sw := checkFillRules(t, name, s, got, isNew)
		moves += m
		leaderSwaps += sw
		ids, replicas, _ := Counts(s, got, nil)
		_, initial, _ := Counts(s, Plan{}, nil)
		if slices.Max(replicas)-slices.Min(replicas) <= 1 {
			even++
			if lb := fillLowerBound(ids, initial, isNew); m != lb {
				t.Errorf("%s: %d replicas moved, the fewest that reach even is %d\n%s", name, m, lb, fmtChanges(got.Changes))
			}
		} else {
			stuck++
			checkNoMoveLeft(t, name, s, got, isNew, replicas, ids)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if even < 1000 || stuck < 300 || moves < 3000 || leaderSwaps < 100 {
		t.Errorf("%d cases, %d reached even, %d stopped short, %d moves, %d leader swaps: the generator is too weak", planned, even, stuck, moves, leaderSwaps)
	}
	t.Logf("%d cases: %d reached even (moves checked against the fewest), %d stopped short with no allowed move left; %d replicas moved, %d leaderships swapped", planned, even, stuck, moves, leaderSwaps)
}

// randomFillCase: 3 to 8 brokers, one or two of them new (empty, or holding a few
// replicas), no racks or 2 to 3 racks, partitions of factor 1 to 3.
func randomFillCase(r *rand.Rand) (*model.Snapshot, FillRequest) {
	nb := 3 + r.IntN(6)
	racks := r.IntN(4)
	if racks == 1 {
		racks = 0
	}
	brokers := map[int32]string{}
	for id := int32(1); id <= int32(nb); id++ {
		rack := ""
		if racks > 0 {
			rack = fmt.Sprintf("r%d", r.IntN(racks))
		}
		brokers[id] = rack
	}
	var req FillRequest
	for _, k := range r.Perm(nb)[:1+r.IntN(2)] {
		req.Brokers = append(req.Brokers, int32(k+1))
	}
	topics := map[string][]model.Partition{}
	for ti := range 1 + r.IntN(3) {
		ps := make([]model.Partition, 2+r.IntN(8))
		for pi := range ps {
			var p model.Partition
			for _, k := range r.Perm(nb)[:1+r.IntN(min(nb, 3))] {
				b := int32(k + 1)
				if slices.Contains(req.Brokers, b) && r.IntN(4) > 0 {
					continue // new brokers hold little
				}
				p.Replicas = append(p.Replicas, b)
			}
			if len(p.Replicas) == 0 {
				p.Replicas = []int32{int32(1 + r.IntN(nb))}
			}
			p.ISR = slices.Clone(p.Replicas)
			if r.IntN(5) == 0 && len(p.ISR) > 1 {
				p.ISR = p.ISR[:len(p.ISR)-1]
			}
			p.Leader = p.ISR[0]
			if r.IntN(20) == 0 {
				p.Leader = -1
			}
			ps[pi] = p
		}
		topics[fmt.Sprintf("t%d", ti)] = ps
	}
	return rfSnap(brokers, topics), req
}

// checkFillRules checks each change; it returns the replicas moved and the leaderships
// swapped without a move.
func checkFillRules(t *testing.T, name string, s *model.Snapshot, got Plan, isNew func(int32) bool) (moves, swaps int) {
	t.Helper()
	for _, c := range got.Changes {
		p, _ := s.Partition(c.TopicPartition)
		added := model.Minus(c.ReplicasAfter, c.ReplicasBefore)
		removed := model.Minus(c.ReplicasBefore, c.ReplicasAfter)
		switch {
		case p.Reassigning() || p.Leader < 0:
			t.Errorf("%s: %s-%d is changed but has to be left alone", name, c.Topic, c.Partition)
		case len(added) != len(removed) || len(c.ReplicasAfter) != len(c.ReplicasBefore):
			t.Errorf("%s: %s-%d: %v → %v changes the factor", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter)
		case slices.ContainsFunc(added, func(b int32) bool { return !isNew(b) }) || slices.ContainsFunc(removed, isNew):
			t.Errorf("%s: %s-%d: %v → %v moves a replica elsewhere than onto a new broker", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter)
		case rackCount(s, c.ReplicasAfter) < rackCount(s, c.ReplicasBefore):
			t.Errorf("%s: %s-%d: %v → %v reduces its rack spread", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter)
		case c.ReplicasAfter[0] != c.ReplicasBefore[0] && !isNew(c.ReplicasAfter[0]):
			t.Errorf("%s: %s-%d: %v → %v hands leadership to an old broker", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter)
		case c.ReplicasAfter[0] != c.ReplicasBefore[0] && c.LeaderAfter != c.ReplicasAfter[0]:
			t.Errorf("%s: %s-%d: new head %d, leader after %d", name, c.Topic, c.Partition, c.ReplicasAfter[0], c.LeaderAfter)
		}
		moves += len(added)
		if len(added) == 0 || c.ReplicasAfter[0] != c.ReplicasBefore[0] && slices.Contains(c.ReplicasBefore, c.ReplicasAfter[0]) {
			swaps++
		}
	}
	return moves, swaps
}

func rackCount(s *model.Snapshot, replicas []int32) int {
	var seen []string
	for _, b := range replicas {
		if br, ok := s.Brokers[b]; ok && !slices.Contains(seen, br.Rack) {
			seen = append(seen, br.Rack)
		}
	}
	return len(seen)
}

// fillLowerBound is the fewest replicas that moves onto the new brokers can move to end
// with every count within 1 of even: every old broker above even gives its excess, less
// the brokers that may keep one more (T mod B of them, new brokers above even first).
func fillLowerBound(ids []int32, counts []int, isNew func(int32) bool) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	q, rem := total/len(counts), total%len(counts)
	lb, above, slots := 0, 0, rem
	for k, n := range counts {
		switch {
		case n <= q:
		case isNew(ids[k]):
			slots-- // a new broker above even keeps what it has: one of the slots
		default:
			lb += n - q
			above++
		}
	}
	return lb - min(max(slots, 0), above)
}

// checkNoMoveLeft: when the plan stops short of even, no old broker 2 or more above a new
// one has a replica it may give it.
func checkNoMoveLeft(t *testing.T, name string, s *model.Snapshot, got Plan, isNew func(int32) bool, counts []int, ids []int32) {
	t.Helper()
	after := map[model.TopicPartition][]int32{}
	for _, c := range got.Changes {
		after[c.TopicPartition] = c.ReplicasAfter
	}
	for ka, a := range ids {
		if !isNew(a) {
			continue
		}
		for ku, u := range ids {
			if isNew(u) || counts[ku]-counts[ka] < 2 {
				continue
			}
			for _, ps := range s.Topics {
				for _, p := range ps {
					ar, ok := after[p.TopicPartition]
					if !ok {
						ar = p.Replicas
					}
					at := slices.Index(ar, u)
					dead := slices.ContainsFunc(ar, func(b int32) bool { _, ok := s.Brokers[b]; return !ok })
					if at < 0 || slices.Contains(ar, a) || p.Reassigning() || p.Leader < 0 || dead {
						continue
					}
					moved := slices.Clone(ar)
					moved[at] = a
					if rackCount(s, moved) >= rackCount(s, ar) {
						t.Errorf("%s: stopped at counts %v (brokers %v) but %s-%d %v could move from %d to %d\n%s", name, counts, ids, p.Topic, p.Partition, ar, u, a, fmtChanges(got.Changes))
						return
					}
				}
			}
		}
	}
}
