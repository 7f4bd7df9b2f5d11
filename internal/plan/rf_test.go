package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// rfSnap builds a snapshot with the given live brokers (id → rack) and topics; topic
// "gone" is missing.
func rfSnap(brokers map[int32]string, topics map[string][]model.Partition) *model.Snapshot {
	s := &model.Snapshot{
		Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{},
		Missing: map[string]error{"gone": errors.New("UNKNOWN_TOPIC_OR_PARTITION")},
	}
	for id, rack := range brokers {
		s.Brokers[id] = model.Broker{ID: id, Rack: rack}
	}
	for name, ps := range topics {
		for i := range ps {
			ps[i].TopicPartition = model.TopicPartition{Topic: name, Partition: int32(i)}
		}
		s.Topics[name] = ps
	}
	return s
}

// norack returns brokers 1..n without racks.
func norack(n int32) map[int32]string {
	m := map[int32]string{}
	for id := int32(1); id <= n; id++ {
		m[id] = ""
	}
	return m
}

// insync is a partition whose replicas are all in sync, led by the head.
func insync(replicas ...int32) model.Partition {
	return part(replicas, slices.Clone(replicas), replicas[0])
}

func led(p model.Partition, leader int32) model.Partition {
	p.Leader = leader
	return p
}

func isr(p model.Partition, isr ...int32) model.Partition {
	p.ISR = isr
	return p
}

func same(topic string, p int32, before, after []int32, leader int32) Change {
	return ch(topic, p, before, after, leader, leader)
}

func ids(v ...int32) []int32 { return v }

func TestReplicationFactor(t *testing.T) {
	racks3 := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	for _, tc := range []struct {
		name    string
		snap    *model.Snapshot
		req     RFRequest
		changes []Change
		noop    []model.TopicPartition
		blocked []model.TopicPartition
		skipped []string // "topic-partition: reason prefix"
		reject  string
	}{
		// Raise.
		{
			name: "raise appends, keeping the order and the leader",
			snap: rfSnap(norack(4), map[string][]model.Partition{"t": {
				led(insync(3, 1), 1), led(insync(3, 1), 1),
			}}),
			req: RFRequest{Topic: "t", Factor: 3},
			changes: []Change{
				same("t", 0, ids(3, 1), ids(3, 1, 2), 1),
				same("t", 1, ids(3, 1), ids(3, 1, 4), 1),
			},
		},
		{
			name: "raise: a broker near its capacity bound gets nothing that does not fit",
			snap: rfSnap(norack(4), map[string][]model.Partition{"t": {
				led(insync(3, 1), 1), led(insync(3, 1), 1),
			}}),
			req: RFRequest{Topic: "t", Factor: 3, Capacity: Capacity{
				Total: map[int32]int64{2: 1000, 4: 1000}, Used: map[int32]int64{2: 770, 4: 100},
				Size: func(model.TopicPartition) int64 { return 40 }, Threshold: 0.8,
			}},
			// Without the bound, one new replica would go to 2 and one to 4.
			changes: []Change{
				same("t", 0, ids(3, 1), ids(3, 1, 4), 1),
				same("t", 1, ids(3, 1), ids(3, 1, 4), 1),
			},
		},
		{
			name: "raise that cannot fit the capacity is rejected with brokers and bytes",
			snap: rfSnap(norack(3), map[string][]model.Partition{"t": {led(insync(3, 1), 1)}}),
			req: RFRequest{Topic: "t", Factor: 3, Capacity: Capacity{
				Total: map[int32]int64{2: 1000}, Used: map[int32]int64{2: 790},
				Size: func(model.TopicPartition) int64 { return 40 }, Threshold: 0.8,
			}},
			reject: "the change does not fit the brokers' capacity: broker 2: 830 bytes planned (790 in use), above its bound of 800 (80% of 1000)",
		},
		{
			name: "a new replica goes to a rack without one, even on a busier broker",
			snap: rfSnap(map[int32]string{1: "a", 2: "a", 5: "a", 3: "b"}, map[string][]model.Partition{
				"t": {insync(1, 2)},
				"o": {insync(3), insync(3), insync(3)},
			}),
			req:     RFRequest{Topic: "t", Factor: 3},
			changes: []Change{same("t", 0, ids(1, 2), ids(1, 2, 3), 1)},
		},
		{
			name: "raise by two: one replica per rack while a rack has none",
			snap: rfSnap(racks3, map[string][]model.Partition{"t": {insync(1), insync(2, 1)}}),
			req:  RFRequest{Topic: "t", Factor: 3},
			changes: []Change{
				same("t", 0, ids(1), ids(1, 3, 5), 1),
				same("t", 1, ids(2, 1), ids(2, 1, 4), 2),
			},
		},
		{
			name: "beyond one replica per rack, the racks with the fewest",
			snap: rfSnap(racks3, map[string][]model.Partition{"t": {insync(1, 3, 5)}}),
			req:  RFRequest{Topic: "t", Factor: 5},
			changes: []Change{
				same("t", 0, ids(1, 3, 5), ids(1, 3, 5, 2, 4), 1),
			},
		},
		{
			name: "balance counts the replicas of every topic",
			snap: rfSnap(norack(4), map[string][]model.Partition{
				"t": {insync(1, 2)},
				"o": {insync(3), insync(3)},
			}),
			req:     RFRequest{Topic: "t", Factor: 3},
			changes: []Change{same("t", 0, ids(1, 2), ids(1, 2, 4), 1)},
		},
		{
			name:    "ties go to the lowest broker id",
			snap:    rfSnap(norack(4), map[string][]model.Partition{"t": {insync(1)}}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1), ids(1, 2), 1)},
		},
		{
			// Greedy (partition order, both having two candidates) gives t-0 broker 1 (a tie
			// with 3, to the lower id), then t-1 broker 1 too (a tie with 2): counts 3, 2, 1.
			// The repair pass moves t-0's new replica to broker 3: 2, 2, 2.
			name: "the repair pass beats the greedy one",
			snap: rfSnap(norack(3), map[string][]model.Partition{
				"t": {insync(2), insync(3)},
				"o": {insync(1), insync(2)},
			}),
			req: RFRequest{Topic: "t", Factor: 2},
			changes: []Change{
				same("t", 0, ids(2), ids(2, 3), 2),
				same("t", 1, ids(3), ids(3, 1), 3),
			},
		},
		{
			name: `brokers without a rack share the rack ""`,
			snap: rfSnap(map[int32]string{1: "a", 2: "a", 3: "", 4: ""}, map[string][]model.Partition{
				"t": {insync(3)},
				"o": {insync(1, 2), insync(1, 2)},
			}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(3), ids(3, 1), 3)},
		},
		{
			name: "brokers that are not live are never chosen and count in no rack",
			snap: rfSnap(map[int32]string{1: "a", 2: "b", 3: "b", 4: "a"}, map[string][]model.Partition{
				"t": {isr(led(insync(9, 1), 1), 1)},
				"o": {insync(4), insync(4)},
			}),
			req:     RFRequest{Topic: "t", Factor: 3},
			changes: []Change{same("t", 0, ids(9, 1), ids(9, 1, 2), 1)},
		},
		// Lower.
		{
			name:    "lower removes out-of-sync replicas first",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"t": {isr(insync(1, 2, 3), 1, 3)}}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1, 2, 3), ids(1, 3), 1)},
		},
		{
			name:    "lower never removes the leader",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"t": {led(insync(1, 2, 3), 3)}}),
			req:     RFRequest{Topic: "t", Factor: 1},
			changes: []Change{same("t", 0, ids(1, 2, 3), ids(3), 3)},
		},
		{
			name:    "replicas on brokers that are not live go first, then out-of-sync ones",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"t": {isr(insync(1, 2, 9, 3), 1, 3)}}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1, 2, 9, 3), ids(1, 3), 1)},
		},
		{
			name: "lower keeps the racks diverse before balancing",
			snap: rfSnap(map[int32]string{1: "a", 2: "a", 3: "b"}, map[string][]model.Partition{
				"t": {insync(1, 2, 3)},
				"o": {insync(3), insync(3)},
			}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1, 2, 3), ids(1, 3), 1)},
		},
		{
			name: "lower then removes from the most loaded broker",
			snap: rfSnap(norack(4), map[string][]model.Partition{
				"t": {insync(1, 2, 3)},
				"o": {insync(2), insync(2)},
			}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1, 2, 3), ids(1, 3), 1)},
		},
		{
			name:    "lower then removes from the tail, the rest keeping their order",
			snap:    rfSnap(norack(4), map[string][]model.Partition{"t": {led(insync(4, 1, 3, 2), 3)}}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(4, 1, 3, 2), ids(4, 3), 3)},
		},
		{
			name:    "lower counts the replicas it removes",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1, 2, 3), insync(1, 2, 3)}}),
			req:     RFRequest{Topic: "t", Factor: 2},
			changes: []Change{same("t", 0, ids(1, 2, 3), ids(1, 2), 1), same("t", 1, ids(1, 2, 3), ids(1, 3), 1)},
		},
		// Per partition.
		{
			name: "every partition at the factor: noop",
			snap: rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1, 2), insync(2, 3)}}),
			req:  RFRequest{Topic: "t", Factor: 2},
			noop: []model.TopicPartition{stp("t", 0), stp("t", 1)},
		},
		{
			name: "irregular topic: raise, lower, noop, blocked and skipped at once",
			snap: rfSnap(norack(4), map[string][]model.Partition{"t": {
				insync(1, 2),
				insync(3),
				insync(1, 2, 3),
				reassigning(insync(1, 2, 3), 4),
				led(insync(4), -1),
			}}),
			req: RFRequest{Topic: "t", Factor: 2},
			changes: []Change{
				same("t", 1, ids(3), ids(3, 4), 3),
				same("t", 2, ids(1, 2, 3), ids(1, 2), 1),
			},
			noop:    []model.TopicPartition{stp("t", 0)},
			blocked: []model.TopicPartition{stp("t", 3)},
			skipped: []string{"t-4: no leader: cannot change from 1 to 2 replicas"},
		},
		{
			name:    "only the named partitions",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1), insync(2), insync(3)}}),
			req:     RFRequest{Topic: "t", Partitions: []int32{2, 0}, Factor: 2},
			changes: []Change{same("t", 0, ids(1), ids(1, 2), 1), same("t", 2, ids(3), ids(3, 1), 3)},
		},
		{
			name:    "an internal topic when allowed",
			snap:    rfSnap(norack(3), map[string][]model.Partition{"__consumer_offsets": {insync(1)}}),
			req:     RFRequest{Topic: "__consumer_offsets", Factor: 2, AllowInternal: true},
			changes: []Change{same("__consumer_offsets", 0, ids(1), ids(1, 2), 1)},
		},
		// Refused.
		{
			name:   "factor below 1",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1, 2)}}),
			req:    RFRequest{Topic: "t", Factor: 0},
			reject: "replication factor 0 is below 1",
		},
		{
			name:   "factor above the live brokers",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1, 2, 9)}}),
			req:    RFRequest{Topic: "t", Factor: 4},
			reject: "replication factor 4 is above the 3 live brokers",
		},
		{
			name:   "factor below min.insync.replicas",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1, 2, 3)}}),
			req:    RFRequest{Topic: "t", Factor: 1, MinISR: 2},
			reject: `replication factor 1 is below min.insync.replicas 2 of topic "t"`,
		},
		{
			name:   "__consumer_offsets",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"__consumer_offsets": {insync(1)}}),
			req:    RFRequest{Topic: "__consumer_offsets", Factor: 2},
			reject: `topic "__consumer_offsets" is internal`,
		},
		{
			name:   "__transaction_state",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"__transaction_state": {insync(1)}}),
			req:    RFRequest{Topic: "__transaction_state", Factor: 2},
			reject: `topic "__transaction_state" is internal`,
		},
		{
			name:   "any name starting with __",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"__schemas": {insync(1)}}),
			req:    RFRequest{Topic: "__schemas", Factor: 2},
			reject: `topic "__schemas" is internal`,
		},
		{
			name:   "unknown topic",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1)}}),
			req:    RFRequest{Topic: "gone", Factor: 2},
			reject: `topic "gone" does not exist (UNKNOWN_TOPIC_OR_PARTITION)`,
		},
		{
			name:   "topic not read",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1)}}),
			req:    RFRequest{Topic: "nope", Factor: 2},
			reject: `topic "nope" was not read`,
		},
		{
			name:   "unknown partition",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1)}}),
			req:    RFRequest{Topic: "t", Partitions: []int32{0, 1}, Factor: 2},
			reject: `partition 1 of topic "t" does not exist (the topic has 1 partitions)`,
		},
		{
			name:   "partition named twice",
			snap:   rfSnap(norack(3), map[string][]model.Partition{"t": {insync(1)}}),
			req:    RFRequest{Topic: "t", Partitions: []int32{0, 0}, Factor: 2},
			reject: "partitions [0 0] lists a partition twice",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := checkPlan(t, tc.snap, tc.reject, func() (Plan, error) { return ReplicationFactor(tc.snap, tc.req) })
			if !ok {
				return
			}
			if !slices.EqualFunc(got.Changes, tc.changes, changeEqual) {
				t.Errorf("changes =\n%s\nwant\n%s", fmtChanges(got.Changes), fmtChanges(tc.changes))
			}
			if !slices.Equal(got.Noop, tc.noop) {
				t.Errorf("noop = %v, want %v", got.Noop, tc.noop)
			}
			if !slices.Equal(got.Blocked, tc.blocked) {
				t.Errorf("blocked = %v, want %v", got.Blocked, tc.blocked)
			}
			var skipped []string
			for _, s := range got.Skipped {
				skipped = append(skipped, s.TopicPartition.String()+": "+s.Reason)
				if s.Code != SkipNoLeader {
					t.Errorf("skip code %q", s.Code)
				}
			}
			if len(skipped) != len(tc.skipped) {
				t.Fatalf("skipped = %q, want %q", skipped, tc.skipped)
			}
			for i := range skipped {
				if !strings.HasPrefix(skipped[i], tc.skipped[i]) {
					t.Errorf("skipped[%d] = %q, want prefix %q", i, skipped[i], tc.skipped[i])
				}
			}
			if len(got.Elections()) != 0 {
				t.Errorf("elections %v: leadership must not move", got.Elections())
			}
		})
	}
}

// TestRFRandom checks the rules of ReplicationFactor on many random irregular clusters,
// and compares the counts it ends with to a brute force over every choice rule 1 allows.
func TestRFRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2026))
	var cases, raised, brute, repaired int
	for i := range 3000 {
		s, req := randomRFCase(r)
		name := fmt.Sprintf("case %d (%+v)", i, req)
		before := copySnapshot(s)
		got, err := ReplicationFactor(s, req)
		if !reflect.DeepEqual(before, s) {
			t.Fatalf("%s: planning modified the snapshot", name)
		}
		if want := rfExpectReject(s, req); want != "" || err != nil {
			var re *RejectError
			if want == "" || !errors.As(err, &re) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: err = %v, want a rejection containing %q", name, err, want)
			}
			continue
		}
		cases++
		again, _ := ReplicationFactor(s, req)
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: two plans of the same input differ", name)
		}
		raised += checkRFRules(t, name, s, req, got)
		// Renumbering brokers in the same order gives the same plan.
		const scale = 1_000_003
		sparse, err := ReplicationFactor(renumber(s, scale), req)
		if err != nil {
			t.Fatalf("%s: renumbered: %v", name, err)
		}
		if want := renumberPlan(got, scale); !slices.EqualFunc(sparse.Changes, want.Changes, changeEqual) {
			t.Fatalf("%s: renumbered brokers give another plan:\n%s\nwant\n%s", name, fmtChanges(sparse.Changes), fmtChanges(want.Changes))
		}
		if n := checkRFOptimal(t, name, s, got); n > 0 {
			brute++
			if greedyOnlyWorse(s, req, got) {
				repaired++
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if cases < 2000 || raised < 2000 || brute < 1000 || repaired < 10 {
		t.Errorf("%d cases planned, %d partitions raised, %d brute-forced, %d where the repair pass mattered: the generator is too weak", cases, raised, brute, repaired)
	}
	t.Logf("%d cases planned, %d partitions raised, %d compared with the brute force, %d improved by the repair pass", cases, raised, brute, repaired)
}

// randomRFCase is an irregular small cluster: some brokers gone (still in replica lists),
// no racks, a few racks, or racks on only some brokers; partitions of mixed lengths, with
// out-of-sync replicas, without leader or under reassignment now and then.
func randomRFCase(r *rand.Rand) (*model.Snapshot, RFRequest) {
	nb := 2 + r.IntN(7) // broker ids 1..nb+2: the last two and some others are gone
	racks := r.IntN(4)  // 0: no racks
	mixed := racks > 0 && r.IntN(5) == 0
	brokers := map[int32]string{}
	for id := int32(1); id <= int32(nb); id++ {
		if r.IntN(10) == 0 {
			continue
		}
		rack := ""
		if racks > 0 && !(mixed && r.IntN(3) == 0) {
			rack = fmt.Sprintf("r%d", r.IntN(racks))
		}
		brokers[id] = rack
	}
	topics := map[string][]model.Partition{}
	for ti := range 1 + r.IntN(3) {
		ps := make([]model.Partition, 1+r.IntN(6))
		base := 1 + r.IntN(min(nb, 4))
		for pi := range ps {
			n := base
			if r.IntN(4) == 0 { // expanded or hand-assigned at another factor
				n = 1 + r.IntN(min(nb+2, 5))
			}
			p := model.Partition{Leader: -1}
			for _, k := range r.Perm(nb + 2)[:n] {
				p.Replicas = append(p.Replicas, int32(k+1))
			}
			for _, id := range p.Replicas {
				if _, live := brokers[id]; live && r.IntN(6) > 0 {
					p.ISR = append(p.ISR, id)
				}
			}
			if len(p.ISR) > 0 && r.IntN(10) > 0 {
				p.Leader = p.ISR[r.IntN(len(p.ISR))]
			}
			if r.IntN(15) == 0 {
				p.Adding = []int32{int32(1 + r.IntN(nb))}
			}
			ps[pi] = p
		}
		topics[fmt.Sprintf("t%d", ti)] = ps
	}
	s := rfSnap(brokers, topics)
	req := RFRequest{Topic: "t0", Factor: 1 + r.IntN(max(len(brokers), 1)), MinISR: r.IntN(3)}
	if r.IntN(20) == 0 {
		req.Factor = len(brokers) + 1
	}
	if r.IntN(5) == 0 {
		for id := range int32(len(topics["t0"])) {
			if r.IntN(2) == 0 {
				req.Partitions = append(req.Partitions, id)
			}
		}
	}
	return s, req
}

func rfExpectReject(s *model.Snapshot, req RFRequest) string {
	switch {
	case req.Factor < 1:
		return "is below 1"
	case req.Factor > len(s.Brokers):
		return "live brokers"
	case req.Factor < req.MinISR:
		return "min.insync.replicas"
	}
	return ""
}

// checkRFRules checks every selected partition against the rules; it returns how many
// partitions were raised.
func checkRFRules(t *testing.T, name string, s *model.Snapshot, req RFRequest, got Plan) int {
	t.Helper()
	changes := map[model.TopicPartition]Change{}
	for _, c := range got.Changes {
		changes[c.TopicPartition] = c
	}
	if !slices.IsSortedFunc(tpsOf(got.Changes), compareTP) {
		t.Errorf("%s: changes not in partition order", name)
	}
	ps := s.Topics[req.Topic]
	selected := req.Partitions
	if selected == nil {
		for i := range ps {
			selected = append(selected, int32(i))
		}
	}
	live := func(id int32) bool { _, ok := s.Brokers[id]; return ok }
	raised, listed := 0, 0
	for _, id := range selected {
		p := ps[id]
		tp := p.TopicPartition
		c, changed := changes[tp]
		isNoop, isBlocked := slices.Contains(got.Noop, tp), slices.Contains(got.Blocked, tp)
		isSkipped := slices.ContainsFunc(got.Skipped, func(sk Skip) bool { return sk.TopicPartition == tp })
		if btoi(changed)+btoi(isNoop)+btoi(isBlocked)+btoi(isSkipped) != 1 {
			t.Errorf("%s: %s is in %d of changes, noop, blocked and skipped", name, tp, btoi(changed)+btoi(isNoop)+btoi(isBlocked)+btoi(isSkipped))
			continue
		}
		listed++
		switch {
		case p.Reassigning():
			if !isBlocked {
				t.Errorf("%s: %s under reassignment is not blocked", name, tp)
			}
			continue
		case len(p.Replicas) == req.Factor:
			if !isNoop {
				t.Errorf("%s: %s at the factor is not a noop", name, tp)
			}
			continue
		case p.Leader < 0:
			if !isSkipped {
				t.Errorf("%s: %s without leader is not skipped", name, tp)
			}
			continue
		case !changed:
			t.Errorf("%s: %s not changed", name, tp)
			continue
		}
		before, after := c.ReplicasBefore, c.ReplicasAfter
		if !slices.Equal(before, p.Replicas) || c.LeaderBefore != p.Leader || c.LeaderAfter != p.Leader {
			t.Errorf("%s: %s: change %v leader %d→%d, snapshot %v leader %d", name, tp, before, c.LeaderBefore, c.LeaderAfter, p.Replicas, p.Leader)
		}
		if len(after) != req.Factor || len(slices.Compact(slices.Sorted(slices.Values(after)))) != len(after) {
			t.Errorf("%s: %s: %v is not %d distinct brokers", name, tp, after, req.Factor)
		}
		if len(after) > len(before) { // raise
			raised++
			added := after[len(before):]
			if !slices.Equal(after[:len(before)], before) {
				t.Errorf("%s: %s: %v does not start with %v", name, tp, after, before)
			}
			for _, b := range added {
				if !live(b) || slices.Contains(before, b) {
					t.Errorf("%s: %s: added %d is not live or already a replica", name, tp, b)
				}
			}
			if !fillsFewest(s, before, added) {
				t.Errorf("%s: %s: %v → %v breaks rule 1 (racks %v)", name, tp, before, after, rackNames(s, after))
			}
			// The statement of rule 1: while a rack with live brokers has no replica
			// of the partition, the new replicas are on distinct racks that had none.
			counts := map[string]int{}
			for _, b := range before {
				if br, ok := s.Brokers[b]; ok {
					counts[br.Rack]++
				}
			}
			emptyLeft := false
			for _, br := range s.Brokers {
				if !slices.Contains(after, br.ID) && rfRackCount(s, after, br.Rack) == 0 {
					emptyLeft = true
				}
			}
			if emptyLeft {
				seen := map[string]bool{}
				for _, b := range added {
					rk := s.Brokers[b].Rack
					if counts[rk] > 0 || seen[rk] {
						t.Errorf("%s: %s: %v → %v puts a new replica in rack %q that has one while a rack has none", name, tp, before, after, rk)
					}
					seen[rk] = true
				}
			}
			continue
		}
		// Lower: a subsequence, with the leader, out-of-sync and gone replicas first.
		k := 0
		for _, b := range before {
			if k < len(after) && after[k] == b {
				k++
			}
		}
		if k != len(after) {
			t.Errorf("%s: %s: %v is not a subsequence of %v", name, tp, after, before)
		}
		if slices.Contains(before, p.Leader) && !slices.Contains(after, p.Leader) {
			t.Errorf("%s: %s: the leader %d was removed", name, tp, p.Leader)
		}
		removedInSync, keptBad := false, false
		for _, b := range before {
			bad := !live(b) || !p.InSync(b)
			kept := slices.Contains(after, b)
			if !kept && !bad {
				removedInSync = true
			}
			if kept && bad && b != p.Leader {
				keptBad = true
			}
		}
		if removedInSync && keptBad {
			t.Errorf("%s: %s: %v → %v (isr %v) removed an in-sync replica before an out-of-sync one", name, tp, before, after, p.ISR)
		}
	}
	if n := len(got.Changes) + len(got.Noop) + len(got.Blocked) + len(got.Skipped); n != listed || n != len(selected) {
		t.Errorf("%s: plan lists %d partitions, %d selected", name, n, len(selected))
	}
	return raised
}

func rfRackCount(s *model.Snapshot, replicas []int32, rack string) int {
	n := 0
	for _, b := range replicas {
		if br, ok := s.Brokers[b]; ok && br.Rack == rack {
			n++
		}
	}
	return n
}

func rackNames(s *model.Snapshot, replicas []int32) []string {
	var out []string
	for _, b := range replicas {
		if br, ok := s.Brokers[b]; ok {
			out = append(out, br.Rack)
		} else {
			out = append(out, "?")
		}
	}
	return out
}

// rfLoads counts the replicas on each live broker (ascending ids) with the plan's changes
// applied to the partitions for which keep says so.
func rfLoads(s *model.Snapshot, p Plan, keep func(c Change) bool) ([]int32, []int) {
	var brokers []int32
	for id := range s.Brokers {
		brokers = append(brokers, id)
	}
	slices.Sort(brokers)
	load := make([]int, len(brokers))
	after := map[model.TopicPartition][]int32{}
	for _, c := range p.Changes {
		if keep(c) {
			after[c.TopicPartition] = c.ReplicasAfter
		}
	}
	for _, ps := range s.Topics {
		for _, part := range ps {
			r, ok := after[part.TopicPartition]
			if !ok {
				r = part.Replicas
			}
			for _, b := range r {
				if k, found := slices.BinarySearch(brokers, b); found {
					load[k]++
				}
			}
		}
	}
	return brokers, load
}

// checkRFOptimal compares the counts after the plan with the best that any choice of new
// replicas allowed by rule 1 gives (trims as planned), when few enough to enumerate. It
// returns how many raised partitions it compared (0: none).
func checkRFOptimal(t *testing.T, name string, s *model.Snapshot, got Plan) int {
	t.Helper()
	isRaise := func(c Change) bool { return len(c.ReplicasAfter) > len(c.ReplicasBefore) }
	brokers, base := rfLoads(s, got, func(c Change) bool { return !isRaise(c) })
	_, planned := rfLoads(s, got, func(Change) bool { return true })
	var sets [][][]int // per raised partition, its allowed sets of new brokers (positions)
	size := 1
	for _, c := range got.Changes {
		if !isRaise(c) {
			continue
		}
		delta := len(c.ReplicasAfter) - len(c.ReplicasBefore)
		var free []int32
		for _, b := range brokers {
			if !slices.Contains(c.ReplicasBefore, b) {
				free = append(free, b)
			}
		}
		var options [][]int
		var walk func(from int, pick []int32)
		walk = func(from int, pick []int32) {
			if len(pick) == delta {
				if fillsFewest(s, c.ReplicasBefore, pick) {
					var o []int
					for _, b := range pick {
						k, _ := slices.BinarySearch(brokers, b)
						o = append(o, k)
					}
					options = append(options, o)
				}
				return
			}
			for k := from; k < len(free); k++ {
				walk(k+1, append(pick, free[k]))
			}
		}
		walk(0, nil)
		sets = append(sets, options)
		size *= len(options)
		if size > 20_000 {
			return 0
		}
	}
	if len(sets) == 0 {
		return 0
	}
	load := slices.Clone(base)
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
	return len(sets)
}

// greedyOnlyWorse reports whether the greedy pass alone would have ended with counts
// worse than the plan's.
func greedyOnlyWorse(s *model.Snapshot, req RFRequest, got Plan) bool {
	parts := s.Topics[req.Topic]
	ids, _ := rfPartitions(parts, req)
	c := newRFCluster(s)
	var wants []rfWant
	for k, id := range ids {
		p := &parts[id]
		switch {
		case p.Reassigning() || len(p.Replicas) == req.Factor || p.Leader < 0:
		case len(p.Replicas) > req.Factor:
			c.trim(p, len(p.Replicas)-req.Factor)
		default:
			wants = append(wants, rfWant{p: p, pos: k, old: p.Replicas, add: req.Factor - len(p.Replicas), prefer: -1})
		}
	}
	if len(wants) == 0 {
		return false
	}
	ra := newRFRaiser(c, wants)
	ra.greedy()
	_, planned := rfLoads(s, got, func(Change) bool { return true })
	return slices.Compare(sortedDesc(c.load), sortedDesc(planned)) > 0
}

// TestRFAgainstReferences compares, on mid-size synthetic clusters with a history, the
// planner with Kafka's --generate and the seed's "next broker" rule: ours must copy the
// least data (Δ per partition) and end with the smallest spread of replica counts.
func TestRFAgainstReferences(t *testing.T) {
	for _, sc := range []struct {
		name     string
		spec     synthSpec
		from, to int
	}{
		{"3to4", synthSpec{Brokers: 15, Early: 12, Racks: 3, Partitions: 3000, RF: 3, Others: 8, Seed: 1}, 3, 4},
		{"2to3", synthSpec{Brokers: 15, Early: 12, Racks: 3, Partitions: 3000, RF: 2, Others: 8, Seed: 2}, 2, 3},
		{"3to5", synthSpec{Brokers: 10, Early: 8, Racks: 4, Partitions: 2000, RF: 3, Others: 5, Seed: 3}, 3, 5},
	} {
		t.Run(sc.name, func(t *testing.T) {
			s := synthCluster(sc.spec)
			ours, err := oursAssignment(s, "events", sc.to)
			if err != nil {
				t.Fatal(err)
			}
			o := measureRF(s, "events", sc.to, ours)
			g := measureRF(s, "events", sc.to, kafkaGenerate(s, "events", sc.to, rand.New(rand.NewPCG(9, 9))))
			n := measureRF(s, "events", sc.to, seedNextBroker(s, "events", sc.to))
			t.Logf("spread before %d", o.before)
			for _, row := range []struct {
				name string
				m    rfOutcome
			}{{"ours", o}, {"kafka-generate", g}, {"seed-next-broker", n}} {
				t.Logf("%-17s moved/min %.3f  spread %3d  rack-short %4d  rule-1 broken %4d", row.name, float64(row.m.moved)/float64(row.m.min), row.m.spread, row.m.rackShort, row.m.lowDiversity)
			}
			if o.moved != o.min {
				t.Errorf("ours moved %d replicas, the least is %d", o.moved, o.min)
			}
			if o.spread > g.spread || o.spread > n.spread {
				t.Errorf("spread: ours %d, kafka-generate %d, seed %d", o.spread, g.spread, n.spread)
			}
			if o.lowDiversity != 0 {
				t.Errorf("ours broke rule 1 on %d partitions", o.lowDiversity)
			}
		})
	}
}

// goldenRFCluster is a small realistic cluster: brokers 1–6 on racks eu-1a, eu-1b, eu-1c
// (two each, ids in blocks), broker 7 added later to eu-1a, broker 8 decommissioned but
// still listed by one partition.
//
//   - orders, RF 2: created with 8 partitions on brokers 1–6 (Kafka's assignment), grown to
//     12 after broker 7 came (Kafka's expansion), partition 3 typed by hand on one rack;
//   - payments, RF 4 (raised by hand once): an out-of-sync replica, a replica on broker 8,
//     one partition under reassignment, one without leader;
//   - audit, RF 3: Kafka's assignment from another start, skewing the counts.
func goldenRFCluster() *model.Snapshot {
	s := &model.Snapshot{Controller: 1, Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	for id, rack := range map[int32]string{1: "eu-1a", 2: "eu-1a", 3: "eu-1b", 4: "eu-1b", 5: "eu-1c", 6: "eu-1c", 7: "eu-1a"} {
		s.Brokers[id] = model.Broker{ID: id, Rack: rack}
	}
	all := sortedBrokers(s)
	add := func(name string, a [][]int32) []model.Partition {
		ps := make([]model.Partition, len(a))
		for i, r := range a {
			ps[i] = model.Partition{TopicPartition: stp(name, int32(i)), Replicas: r, ISR: slices.Clone(r), Leader: r[0]}
		}
		s.Topics[name] = ps
		return ps
	}
	orders := kafkaAssign(all[:6], 8, 2, 0, 0, nil)
	orders = append(orders, kafkaAddPartitions(orders, all, 4)...)
	orders[3] = []int32{2, 1}
	add("orders", orders)
	pay := add("payments", [][]int32{{1, 3, 5, 2}, {3, 5, 1, 4}, {5, 1, 3, 6}, {2, 4, 6, 8}, {4, 6, 2, 7}, {6, 2, 4, 1}})
	pay[1].ISR = []int32{3, 5, 1}                             // 4 fell behind
	pay[3].ISR = []int32{2, 4, 6}                             // 8 is gone
	pay[4].Adding = []int32{7}                                // under reassignment
	pay[5].ISR, pay[5].Leader = []int32{6}, -1                // no leader
	pay[2].Leader = 3                                         // led by 3, not its head
	add("audit", kafkaAssign(all, 10, 3, 4, 0, nil))          // fixed start: deterministic
	s.Topics["orders"][5].ISR = s.Topics["orders"][5].ISR[:1] // a follower behind
	return s
}

type goldenRF struct {
	Request struct {
		Topic         string  `json:"topic"`
		Partitions    []int32 `json:"partitions,omitempty"`
		Factor        int     `json:"factor"`
		MinISR        int     `json:"min_isr"`
		AllowInternal bool    `json:"allow_internal,omitempty"`
	} `json:"request"`
	// Replicas counts the replicas on each live broker, over every topic, before and after.
	Replicas []goldenRFBroker `json:"replicas"`
	// Copies is the number of replicas the plan creates (each copies the partition's data).
	Copies int  `json:"copies"`
	Plan   Plan `json:"plan"`
}

type goldenRFBroker struct {
	Broker int32  `json:"broker"`
	Rack   string `json:"rack"`
	Before int    `json:"before"`
	After  int    `json:"after"`
}

func TestRFGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  RFRequest
	}{
		{"rf-raise", RFRequest{Topic: "orders", Factor: 3, MinISR: 2}},
		{"rf-lower", RFRequest{Topic: "payments", Factor: 2, MinISR: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goldenRFCluster()
			p, err := ReplicationFactor(s, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenRF
			g.Request.Topic, g.Request.Partitions, g.Request.Factor = tc.req.Topic, tc.req.Partitions, tc.req.Factor
			g.Request.MinISR, g.Request.AllowInternal = tc.req.MinISR, tc.req.AllowInternal
			brokers, before := rfLoads(s, p, func(Change) bool { return false })
			_, after := rfLoads(s, p, func(Change) bool { return true })
			for k, id := range brokers {
				g.Replicas = append(g.Replicas, goldenRFBroker{id, s.Brokers[id].Rack, before[k], after[k]})
			}
			for _, c := range p.Changes {
				for _, b := range c.ReplicasAfter {
					g.Copies += btoi(!slices.Contains(c.ReplicasBefore, b))
				}
			}
			g.Plan = p
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/plan -run RFGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("plan differs from %s (rerun with -update if intended):\n%s", path, got)
			}
		})
	}
}
