package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// local is the local stack's cluster: brokers 1, 2 in rack r1 and 3, 4 in r2.
func localRacks() map[int32]string { return map[int32]string{1: "r1", 2: "r1", 3: "r2", 4: "r2"} }

// without returns brokers without the given ones (failed brokers are absent from the
// metadata).
func without(brokers map[int32]string, gone ...int32) map[int32]string {
	out := maps.Clone(brokers)
	for _, b := range gone {
		delete(out, b)
	}
	return out
}

func TestVacate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		brokers map[int32]string
		topics  map[string][]model.Partition
		req     VacateRequest
		reject  string
		want    Plan
	}{
		{
			name:    "failed broker: the replacement goes to the rack of the replica it replaces",
			brokers: without(localRacks(), 4),
			topics: map[string][]model.Partition{"t": {
				led(isr(insync(4, 1), 1), 1), // led by 1 since 4 failed
				insync(1, 2),                 // untouched
				isr(insync(2, 4), 2),
			}},
			req: VacateRequest{Brokers: ids(4), Racks: map[int32]string{4: "r2"}},
			want: Plan{Changes: []Change{
				ch("t", 0, ids(4, 1), ids(1, 3), 1, 1),
				ch("t", 2, ids(2, 4), ids(2, 3), 2, 2),
			}},
		},
		{
			name:    "failed broker of an unknown rack: the spread is still kept",
			brokers: without(localRacks(), 4),
			topics:  map[string][]model.Partition{"t": {led(isr(insync(4, 1), 1), 1)}},
			req:     VacateRequest{Brokers: ids(4)},
			want:    Plan{Changes: []Change{ch("t", 0, ids(4, 1), ids(1, 3), 1, 1)}},
		},
		{
			name:    "drain: the same rack, spread evenly",
			brokers: localRacks(),
			topics: map[string][]model.Partition{"t": {
				led(insync(3, 1), 1), led(insync(3, 2), 2), led(insync(1, 3), 1), led(insync(2, 3, 4), 2),
			}},
			req: VacateRequest{Brokers: ids(3)},
			want: Plan{Changes: []Change{
				ch("t", 0, ids(3, 1), ids(1, 4), 1, 1),
				ch("t", 1, ids(3, 2), ids(2, 4), 2, 2),
				ch("t", 2, ids(1, 3), ids(1, 4), 1, 1),
				// 4 already holds a replica: rack r1 is the only choice left.
				{TopicPartition: tpOf("t", 3), ReplicasBefore: ids(2, 3, 4), ReplicasAfter: ids(2, 4, 1), LeaderBefore: 2, LeaderAfter: 2},
			}},
		},
		{
			name:    "three replicas on two racks: the full rack takes it",
			brokers: without(localRacks(), 4),
			topics:  map[string][]model.Partition{"t": {isr(insync(1, 3, 4), 1, 3)}},
			req:     VacateRequest{Brokers: ids(4), Racks: map[int32]string{4: "r2"}},
			want:    Plan{Changes: []Change{ch("t", 0, ids(1, 3, 4), ids(1, 3, 2), 1, 1)}},
		},
		{
			name:    "rack spread that cannot be kept is said",
			brokers: map[int32]string{1: "r1", 2: "r1", 3: "r2"},
			topics:  map[string][]model.Partition{"t": {led(insync(3, 1), 1)}},
			req:     VacateRequest{Brokers: ids(3)},
			want: Plan{Changes: []Change{{TopicPartition: tpOf("t", 0), ReplicasBefore: ids(3, 1), ReplicasAfter: ids(1, 2), LeaderBefore: 1, LeaderAfter: 1,
				Note: `rack spread 2 → 1 (racks [r1 r2] → [r1]): no live broker outside its replicas is left in rack "r2"`}}},
		},
		{
			name:    "a drained leader hands over to the first kept in-sync replica",
			brokers: norack(4),
			topics: map[string][]model.Partition{"t": {
				insync(1, 2, 3),
				isr(insync(1, 2, 3), 1, 3),
				isr(insync(1, 2), 1),
			}},
			req: VacateRequest{Brokers: ids(1)},
			want: Plan{
				Changes: []Change{ // t-1 first: one replica is left in sync
					ch("t", 1, ids(1, 2, 3), ids(2, 3, 4), 1, 3),
					ch("t", 0, ids(1, 2, 3), ids(2, 3, 4), 1, 2),
				},
				Skipped: []Skip{{TopicPartition: tpOf("t", 2), Code: SkipNoCandidate,
					Reason: "broker 1 leads it and no other replica is in sync to take over (replicas [1 2], isr [1])"}},
			},
		},
		{
			name:    "no spare broker, no leader, reassigning, protected",
			brokers: without(norack(4), 4),
			topics: map[string][]model.Partition{
				"t": {
					isr(insync(1, 2, 3, 4), 1, 2, 3),
					{Replicas: ids(4, 1), Leader: -1},
					func() model.Partition { p := isr(insync(4, 1), 1); p.Adding = ids(2); return p }(),
				},
				"keep": {isr(insync(4, 1), 1)},
			},
			req: VacateRequest{Brokers: ids(4), Protected: func(topic string) (string, bool) { return "ke*", topic == "keep" }},
			want: Plan{
				Blocked: []model.TopicPartition{tpOf("t", 2)},
				Skipped: []Skip{
					protectedSkip(tpOf("keep", 0), "ke*"),
					{TopicPartition: tpOf("t", 0), Code: SkipNoSpare, Reason: "1 replicas on [4] to recreate, but only 0 live brokers are not replicas already (replicas [1 2 3 4])"},
					{TopicPartition: tpOf("t", 1), Code: SkipNoLeader, Reason: "no leader: its replicas on [4] cannot be recreated, a new replica would have nothing to copy from (replicas [4 1], isr [])"},
				},
			},
		},
		{
			name:    "two failed brokers in one partition",
			brokers: without(norack(5), 4, 5),
			topics:  map[string][]model.Partition{"t": {led(isr(insync(4, 5, 1), 1), 1)}},
			req:     VacateRequest{Brokers: ids(5, 4)},
			want:    Plan{Changes: []Change{ch("t", 0, ids(4, 5, 1), ids(1, 2, 3), 1, 1)}},
		},
		{
			name:    "urgency: at or below min.insync.replicas first",
			brokers: without(norack(5), 5),
			topics: map[string][]model.Partition{
				"a": {led(isr(insync(5, 1, 2), 1, 2), 1)},
				"b": {led(isr(insync(5, 1, 2), 1), 1)},
			},
			req: VacateRequest{Brokers: ids(5), MinISR: func(topic string) int { return 2 }},
			want: Plan{Changes: []Change{
				ch("b", 0, ids(5, 1, 2), ids(1, 2, 4), 1, 1),
				ch("a", 0, ids(5, 1, 2), ids(1, 2, 3), 1, 1),
			}},
		},
		{
			name:    "capacity: a broker near its bound gets nothing that does not fit",
			brokers: localRacks(),
			topics:  map[string][]model.Partition{"t": {led(insync(3, 1), 1), led(insync(3, 2), 2)}},
			req: VacateRequest{Brokers: ids(3), Capacity: Capacity{
				Total: map[int32]int64{1: 1000, 2: 1000, 4: 1000}, Used: map[int32]int64{4: 750},
				Size: func(model.TopicPartition) int64 { return 40 }, Threshold: 0.8,
			}},
			// 4 (r2) has room for one: the other keeps its rack spread only if it can, and
			// here it cannot: r2 has no other broker.
			reject: "broker 4: 830 bytes planned (750 in use), above its bound of 800 (80% of 1000)",
		},
		{
			name:    "capacity: moved within the rule",
			brokers: map[int32]string{1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r2"},
			topics:  map[string][]model.Partition{"t": {led(insync(3, 1), 1), led(insync(3, 2), 2)}},
			req: VacateRequest{Brokers: ids(3), Capacity: Capacity{
				Total: map[int32]int64{4: 1000, 5: 1000}, Used: map[int32]int64{4: 780, 5: 100},
				Size: func(model.TopicPartition) int64 { return 40 }, Threshold: 0.8,
			}},
			// Without the bound 4 would take one of them.
			want: Plan{Changes: []Change{ch("t", 0, ids(3, 1), ids(1, 5), 1, 1), ch("t", 1, ids(3, 2), ids(2, 5), 2, 2)}},
		},
		{name: "no broker", brokers: norack(3), req: VacateRequest{}, reject: "no broker to vacate"},
		{name: "twice", brokers: norack(3), req: VacateRequest{Brokers: ids(1, 1)}, reject: "lists a broker twice"},
		{name: "none left", brokers: norack(1), req: VacateRequest{Brokers: ids(1)}, reject: "no live broker is left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rfSnap(tc.brokers, tc.topics)
			got, ok := checkPlan(t, s, tc.reject, func() (Plan, error) { return Vacate(s, tc.req) })
			if !ok {
				return
			}
			if !reflect.DeepEqual(normPlan(got), normPlan(tc.want)) {
				t.Errorf("got\n%s\nskipped %v blocked %v\nwant\n%s\nskipped %v blocked %v",
					fmtChanges(got.Changes), got.Skipped, got.Blocked, fmtChanges(tc.want.Changes), tc.want.Skipped, tc.want.Blocked)
			}
			for _, c := range got.Changes {
				if c.Note != "" {
					t.Logf("%s-%d: %s", c.Topic, c.Partition, c.Note)
				}
			}
		})
	}
}

func tpOf(topic string, p int32) model.TopicPartition {
	return model.TopicPartition{Topic: topic, Partition: p}
}

// normPlan makes empty and nil lists alike.
func normPlan(p Plan) Plan {
	if len(p.Changes) == 0 {
		p.Changes = nil
	}
	if len(p.Skipped) == 0 {
		p.Skipped = nil
	}
	if len(p.Blocked) == 0 {
		p.Blocked = nil
	}
	if len(p.Noop) == 0 {
		p.Noop = nil
	}
	return p
}

// TestVacateRandom checks the rules on small irregular clusters and compares the counts
// with a brute force over every choice the rack rules allow.
func TestVacateRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 2026))
	var planned, changed, brute, preferred int
	for i := range 3000 {
		s, req := randomVacateCase(r)
		name := fmt.Sprintf("case %d (vacate %v, racks %v)", i, req.Brokers, req.Racks)
		before := copySnapshot(s)
		got, err := Vacate(s, req)
		if !reflect.DeepEqual(before, s) {
			t.Fatalf("%s: planning modified the snapshot", name)
		}
		if err != nil {
			if left := len(s.Brokers) - countLive(s, req.Brokers); left > 0 {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		planned++
		changed += len(got.Changes)
		preferred += checkVacateRules(t, name, s, req, got)
		if checkVacateOptimal(t, name, s, req, got) {
			brute++
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if planned < 2500 || changed < 3000 || brute < 1000 || preferred < 100 {
		t.Errorf("%d cases planned, %d changes, %d brute-forced, %d where the replaced rack was preferred: the generator is too weak", planned, changed, brute, preferred)
	}
	t.Logf("%d cases planned, %d changes, %d compared with the brute force, %d changes kept the replaced replica's rack where rule 1 allowed another", planned, changed, brute, preferred)
}

func countLive(s *model.Snapshot, bs []int32) int {
	n := 0
	for _, b := range bs {
		if _, ok := s.Brokers[b]; ok {
			n++
		}
	}
	return n
}

// randomVacateCase: 3 to 8 brokers, no racks or 2 to 3 racks, partitions of factor 1 to
// 3 with out-of-sync replicas; one or two brokers vacated, failed (absent from the
// snapshot, their rack given or not) or drained (live).
func randomVacateCase(r *rand.Rand) (*model.Snapshot, VacateRequest) {
	nb := 3 + r.IntN(6)
	racks := r.IntN(4)
	if racks == 1 {
		racks = 0
	}
	all := map[int32]string{}
	for id := int32(1); id <= int32(nb); id++ {
		rack := ""
		if racks > 0 {
			rack = fmt.Sprintf("r%d", r.IntN(racks))
		}
		all[id] = rack
	}
	var req VacateRequest
	for _, k := range r.Perm(nb)[:1+r.IntN(2)] {
		req.Brokers = append(req.Brokers, int32(k+1))
	}
	failed := r.IntN(2) == 0
	brokers := all
	if failed {
		brokers = without(all, req.Brokers...)
		if r.IntN(3) > 0 {
			req.Racks = map[int32]string{}
			for _, b := range req.Brokers {
				req.Racks[b] = all[b]
			}
		}
	}
	topics := map[string][]model.Partition{}
	for ti := range 1 + r.IntN(3) {
		ps := make([]model.Partition, 1+r.IntN(6))
		for pi := range ps {
			p := model.Partition{Leader: -1}
			for _, k := range r.Perm(nb)[:1+r.IntN(min(nb, 3))] {
				p.Replicas = append(p.Replicas, int32(k+1))
			}
			for _, id := range p.Replicas {
				if _, live := brokers[id]; live && r.IntN(6) > 0 {
					p.ISR = append(p.ISR, id)
				}
			}
			if len(p.ISR) > 0 && r.IntN(12) > 0 {
				p.Leader = p.ISR[r.IntN(len(p.ISR))]
			}
			ps[pi] = p
		}
		topics[fmt.Sprintf("t%d", ti)] = ps
	}
	if r.IntN(4) == 0 {
		req.MinISR = func(string) int { return 2 }
	}
	return rfSnap(brokers, topics), req
}

// checkVacateRules checks each partition against Vacate's rules; it returns how many
// changes put a new replica in the rack of the replica it replaced while rule 1 allowed
// another rack too.
func checkVacateRules(t *testing.T, name string, s *model.Snapshot, req VacateRequest, got Plan) int {
	t.Helper()
	gone := func(b int32) bool { return slices.Contains(req.Brokers, b) }
	listed := map[model.TopicPartition]bool{}
	for _, c := range got.Changes {
		listed[c.TopicPartition] = true
	}
	for _, sk := range got.Skipped {
		listed[sk.TopicPartition] = true
	}
	for _, b := range got.Blocked {
		listed[b] = true
	}
	for _, ps := range s.Topics {
		for _, p := range ps {
			if slices.ContainsFunc(p.Replicas, gone) != listed[p.TopicPartition] {
				t.Errorf("%s: %s-%d (replicas %v) listed %v", name, p.Topic, p.Partition, p.Replicas, listed[p.TopicPartition])
			}
		}
	}
	preferred := 0
	live := rfSnap(without(brokerRacks(s), req.Brokers...), nil)
	for k, c := range got.Changes {
		p, _ := s.Partition(c.TopicPartition)
		keep := slices.DeleteFunc(slices.Clone(p.Replicas), gone)
		added := c.ReplicasAfter[len(keep):]
		switch {
		case !slices.Equal(c.ReplicasAfter[:len(keep)], keep):
			t.Errorf("%s: %s-%d: %v → %v does not keep %v in order", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter, keep)
		case len(c.ReplicasAfter) != len(p.Replicas):
			t.Errorf("%s: %s-%d: %v → %v changes the factor", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter)
		case len(slices.Compact(slices.Sorted(slices.Values(c.ReplicasAfter)))) != len(c.ReplicasAfter):
			t.Errorf("%s: %s-%d: %v repeats a broker", name, c.Topic, c.Partition, c.ReplicasAfter)
		case slices.ContainsFunc(added, func(b int32) bool { _, ok := live.Brokers[b]; return !ok }):
			t.Errorf("%s: %s-%d: %v adds a broker that is not live or is vacated", name, c.Topic, c.Partition, c.ReplicasAfter)
		case !fillsFewest(live, keep, added):
			t.Errorf("%s: %s-%d: %v → %v breaks the rack rule (racks %v)", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter, rackNames(s, c.ReplicasAfter))
		case c.LeaderAfter != p.Leader && (!gone(p.Leader) || !p.InSync(c.LeaderAfter) || !slices.Contains(keep, c.LeaderAfter)):
			t.Errorf("%s: %s-%d: leader %d → %d", name, c.Topic, c.Partition, p.Leader, c.LeaderAfter)
		}
		if k > 0 && urgency(s, req, got.Changes[k-1]) > urgency(s, req, c) {
			t.Errorf("%s: %s-%d comes after a less urgent partition", name, c.Topic, c.Partition)
		}
		wantNote := rackSpread(s, req.Racks, c.ReplicasAfter) < rackSpread(s, req.Racks, c.ReplicasBefore)
		if wantNote != (c.Note != "") {
			t.Errorf("%s: %s-%d: %v → %v (racks %v → %v): note %q", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter,
				rackNames(s, c.ReplicasBefore), rackNames(s, c.ReplicasAfter), c.Note)
		}
		// The replaced replica's rack, when rule 1 allows it, takes the new replica.
		if rack, ok := vacatedRack(s, req, p, gone); ok && len(added) == 1 {
			allowed := slices.ContainsFunc(slices.Collect(maps.Keys(live.Brokers)), func(b int32) bool {
				return live.Brokers[b].Rack == rack && !slices.Contains(keep, b) && fillsFewest(live, keep, []int32{b})
			})
			other := slices.ContainsFunc(slices.Collect(maps.Keys(live.Brokers)), func(b int32) bool {
				return live.Brokers[b].Rack != rack && !slices.Contains(keep, b) && fillsFewest(live, keep, []int32{b})
			})
			switch in := live.Brokers[added[0]].Rack == rack; {
			case allowed && !in:
				t.Errorf("%s: %s-%d: %v → %v: the new replica is not in rack %q of the replica it replaces", name, c.Topic, c.Partition, c.ReplicasBefore, c.ReplicasAfter, rack)
			case in && other:
				preferred++
			}
		}
	}
	return preferred
}

func brokerRacks(s *model.Snapshot) map[int32]string {
	out := map[int32]string{}
	for id, b := range s.Brokers {
		out[id] = b.Rack
	}
	return out
}

// vacatedRack is the rack of the first vacated replica of p, when known.
func vacatedRack(s *model.Snapshot, req VacateRequest, p model.Partition, gone func(int32) bool) (string, bool) {
	i := slices.IndexFunc(p.Replicas, gone)
	if i < 0 {
		return "", false
	}
	if b, ok := s.Brokers[p.Replicas[i]]; ok {
		return b.Rack, true
	}
	rack, ok := req.Racks[p.Replicas[i]]
	return rack, ok
}

func urgency(s *model.Snapshot, req VacateRequest, c Change) int {
	p, _ := s.Partition(c.TopicPartition)
	n := 0
	for _, b := range p.ISR {
		if _, ok := s.Brokers[b]; ok && !slices.Contains(req.Brokers, b) {
			n++
		}
	}
	m := 1
	if req.MinISR != nil {
		m = req.MinISR(c.Topic)
	}
	return n - m
}

func rackSpread(s *model.Snapshot, racks map[int32]string, replicas []int32) int {
	var seen []string
	for _, b := range replicas {
		name, ok := racks[b]
		if br, live := s.Brokers[b]; live {
			name, ok = br.Rack, true
		}
		if ok && !slices.Contains(seen, name) {
			seen = append(seen, name)
		}
	}
	return len(seen)
}

// checkVacateOptimal compares the replica counts after the plan with the best any choice
// allowed by the rack rules gives (each partition's new replicas in the replaced
// replica's rack as often as rule 1 allows), when few enough to enumerate.
func checkVacateOptimal(t *testing.T, name string, s *model.Snapshot, req VacateRequest, got Plan) bool {
	t.Helper()
	gone := func(b int32) bool { return slices.Contains(req.Brokers, b) }
	live := rfSnap(without(brokerRacks(s), req.Brokers...), nil)
	brokers := slices.Sorted(maps.Keys(live.Brokers))
	var sets [][][]int
	size := 1
	for _, c := range got.Changes {
		p, _ := s.Partition(c.TopicPartition)
		keep := slices.DeleteFunc(slices.Clone(p.Replicas), gone)
		delta := len(c.ReplicasAfter) - len(keep)
		rack, hasRack := vacatedRack(s, req, p, gone)
		var free []int32
		for _, b := range brokers {
			if !slices.Contains(keep, b) {
				free = append(free, b)
			}
		}
		var options [][]int
		var inRack []int
		var walk func(from int, pick []int32)
		walk = func(from int, pick []int32) {
			if len(pick) == delta {
				if fillsFewest(live, keep, pick) {
					var o []int
					n := 0
					for _, b := range pick {
						k, _ := slices.BinarySearch(brokers, b)
						o = append(o, k)
						if hasRack && live.Brokers[b].Rack == rack {
							n++
						}
					}
					options, inRack = append(options, o), append(inRack, n)
				}
				return
			}
			for k := from; k < len(free); k++ {
				walk(k+1, append(pick, free[k]))
			}
		}
		walk(0, nil)
		most := slices.Max(inRack)
		var kept [][]int
		for k, o := range options {
			if inRack[k] == most {
				kept = append(kept, o)
			}
		}
		sets = append(sets, kept)
		size *= len(kept)
		if size > 20_000 {
			return false
		}
	}
	if len(sets) == 0 {
		return false
	}
	// The loads of the live brokers with every change's kept replicas only.
	load := make([]int, len(brokers))
	planned := make([]int, len(brokers))
	after := map[model.TopicPartition]Change{}
	for _, c := range got.Changes {
		after[c.TopicPartition] = c
	}
	for _, ps := range s.Topics {
		for _, p := range ps {
			for _, b := range p.Replicas {
				k, ok := slices.BinarySearch(brokers, b)
				if ok && !gone(b) {
					load[k]++
				}
			}
			if c, ok := after[p.TopicPartition]; ok {
				for _, b := range c.ReplicasAfter {
					k, _ := slices.BinarySearch(brokers, b)
					planned[k]++
				}
				continue
			}
			for _, b := range p.Replicas {
				if k, ok := slices.BinarySearch(brokers, b); ok {
					planned[k]++
				}
			}
		}
	}
	var best []int
	var rec func(i int)
	rec = func(i int) {
		if i == len(sets) {
			if v := sortedDesc(load); best == nil || slices.Compare(v, best) < 0 {
				best = v
			}
			return
		}
		for _, o := range sets[i] {
			for _, k := range o {
				load[k]++
			}
			rec(i + 1)
			for _, k := range o {
				load[k]--
			}
		}
	}
	rec(0)
	if g := sortedDesc(planned); slices.Compare(g, best) != 0 {
		t.Errorf("%s: counts %v (sorted), the best is %v\n%s", name, g, best, fmtChanges(got.Changes))
	}
	return true
}

// TestDrain: leadership first (the shed's swap), then the replicas (Vacate on the cluster
// as the shed leaves it); each change from the state now to the end, DrainStep in between.
func TestDrain(t *testing.T) {
	s := rfSnap(localRacks(), map[string][]model.Partition{"t": {
		insync(3, 1),       // led by 3: 1 takes over, 4 replaces 3
		insync(1, 3),       // 3 follows
		insync(3, 4, 1, 2), // led by 3, no spare broker left
		insync(2, 4),       // untouched
	}})
	got, ok := checkPlan(t, s, "", func() (Plan, error) { return Drain(s, VacateRequest{Brokers: ids(3)}) })
	if !ok {
		return
	}
	want := Plan{
		Changes: []Change{
			ch("t", 0, ids(3, 1), ids(1, 4), 3, 1),
			ch("t", 1, ids(1, 3), ids(1, 4), 1, 1),
			ch("t", 2, ids(3, 4, 1, 2), ids(4, 3, 1, 2), 3, 4), // the shed alone
		},
		Skipped: []Skip{{TopicPartition: tpOf("t", 2), Code: SkipNoSpare,
			Reason: "1 replicas on [3] to recreate, but only 0 live brokers are not replicas already (replicas [3 4 1 2]); its leadership moves to 4"}},
	}
	if !reflect.DeepEqual(normPlan(got), normPlan(want)) {
		t.Fatalf("got\n%s\nskipped %v\nwant\n%s\nskipped %v", fmtChanges(got.Changes), got.Skipped, fmtChanges(want.Changes), want.Skipped)
	}
	if mid := DrainStep(got.Changes[0], 3); !slices.Equal(mid, ids(1, 3)) {
		t.Errorf("DrainStep of %v → %v: %v, want [1 3]", got.Changes[0].ReplicasBefore, got.Changes[0].ReplicasAfter, mid)
	}
	if mid := DrainStep(got.Changes[1], 3); mid != nil {
		t.Errorf("DrainStep of a partition 3 does not head: %v", mid)
	}
	if _, err := Drain(rfSnap(without(localRacks(), 3), nil), VacateRequest{Brokers: ids(3)}); err == nil || !strings.Contains(err.Error(), "not live") {
		t.Errorf("drain of a broker not live: %v", err)
	}
}
