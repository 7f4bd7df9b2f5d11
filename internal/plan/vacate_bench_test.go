package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// BenchmarkVacate100k plans a failed broker's and a drained broker's replicas on a
// cluster of 30 brokers in 3 racks holding 100,000 partitions of factor 3 (and 20 small
// topics), placed by Kafka's own rack-aware assignment (kafkaBalanced). It reports the
// replicas moved ÷ the least possible (the vacated broker's replicas), the spread (max −
// min) of replicas per live broker of the vacated broker's rack before and after, and the
// partitions whose rack spread shrank.
func BenchmarkVacate100k(b *testing.B) {
	for _, kind := range []string{"failed", "drain"} {
		b.Run(kind, func(b *testing.B) {
			s := kafkaBalanced(30, 7)
			const victim int32 = 7
			req := VacateRequest{Brokers: []int32{victim}}
			if kind == "failed" {
				req.Racks = map[int32]string{victim: s.Brokers[victim].Rack}
				s = withoutBroker(s, victim)
			}
			var p Plan
			var err error
			b.ReportAllocs()
			for b.Loop() {
				if kind == "drain" {
					p, err = Drain(s, req) // its leadership shed, then Vacate
				} else {
					p, err = Vacate(s, req)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			held, moved, shrank := 0, 0, 0
			for _, ps := range s.Topics {
				for _, part := range ps {
					if slices.Contains(part.Replicas, victim) {
						held++
					}
				}
			}
			for _, c := range p.Changes {
				moved += len(model.Minus(c.ReplicasAfter, c.ReplicasBefore))
				if c.Note != "" {
					shrank++
				}
			}
			if held == 0 || moved != held || len(p.Skipped)+len(p.Blocked) > 0 {
				b.Fatalf("%d replicas on broker %d, %d moved, %d skipped, %d blocked", held, victim, moved, len(p.Skipped), len(p.Blocked))
			}
			// Rule 1 sends every replacement to the victim's rack (each partition had one
			// replica per rack): the spread that counts is within that rack.
			rack := func(id int32) bool { return s.Brokers[id].Rack == "rack-a" }
			before, after := liveSpread(s, victim, Plan{}, rack), liveSpread(s, victim, p, rack)
			b.ReportMetric(float64(moved)/float64(held), "moved/min")
			b.ReportMetric(float64(before), "rack-spread-before")
			b.ReportMetric(float64(after), "rack-spread")
			b.ReportMetric(float64(shrank), "rack-shrunk")
			b.ReportMetric(float64(len(p.Changes)), "changes")
		})
	}
}

// withoutBroker is s with broker b gone from its brokers (a failed broker is absent from
// the metadata); the partitions still list it.
func withoutBroker(s *model.Snapshot, b int32) *model.Snapshot {
	out := *s
	out.Brokers = maps.Clone(s.Brokers)
	delete(out.Brokers, b)
	return &out
}

// liveSpread is max − min of the replicas per broker other than gone for which in says
// so, with p applied.
func liveSpread(s *model.Snapshot, gone int32, p Plan, in func(int32) bool) int {
	after := map[model.TopicPartition][]int32{}
	for _, c := range p.Changes {
		after[c.TopicPartition] = c.ReplicasAfter
	}
	load := map[int32]int{}
	for id := range s.Brokers {
		if id != gone && in(id) {
			load[id] = 0
		}
	}
	for _, ps := range s.Topics {
		for _, part := range ps {
			r, ok := after[part.TopicPartition]
			if !ok {
				r = part.Replicas
			}
			for _, id := range r {
				if _, ok := load[id]; ok {
					load[id]++
				}
			}
		}
	}
	v := slices.Collect(maps.Values(load))
	return slices.Max(v) - slices.Min(v)
}

// BenchmarkFill100k plans three empty brokers (one per rack) added to 27 brokers in 3
// racks holding 100,000 partitions of factor 3 (and 20 small topics), each placed by
// Kafka's own rack-aware assignment.
// It reports the replicas moved ÷ the fewest that bring every count within 1 of even,
// the spreads (max − min) of replicas and preferred leaders per broker before and after,
// and the leaderships swapped without a copy.
func BenchmarkFill100k(b *testing.B) {
	s := kafkaBalanced(27, 8)
	var added []int32
	for k, rack := range []string{"rack-a", "rack-b", "rack-c"} {
		id := int32(28 + k)
		s.Brokers[id] = model.Broker{ID: id, Rack: rack}
		added = append(added, id)
	}
	req := FillRequest{Brokers: added}
	var p Plan
	var err error
	b.ReportAllocs()
	for b.Loop() {
		p, err = Fill(s, req)
	}
	if err != nil {
		b.Fatal(err)
	}
	ids, before, leadBefore := Counts(s, Plan{}, nil)
	_, after, leadAfter := Counts(s, p, nil)
	moved, swaps := 0, 0
	for _, c := range p.Changes {
		n := len(model.Minus(c.ReplicasAfter, c.ReplicasBefore))
		moved += n
		if n == 0 {
			swaps++
		}
	}
	isNew := func(id int32) bool { return slices.Contains(added, id) }
	b.ReportMetric(float64(moved)/float64(fillLowerBound(ids, before, isNew)), "moved/min")
	b.ReportMetric(float64(slices.Max(before)-slices.Min(before)), "spread-before")
	b.ReportMetric(float64(slices.Max(after)-slices.Min(after)), "spread")
	b.ReportMetric(float64(slices.Max(leadBefore)-slices.Min(leadBefore)), "leader-spread-before")
	b.ReportMetric(float64(slices.Max(leadAfter)-slices.Min(leadAfter)), "leader-spread")
	b.ReportMetric(float64(swaps), "leader-swaps")
}

// kafkaBalanced is n brokers in 3 racks (alternating) holding topic "events" of 100,000
// partitions of factor 3 and 20 topics of 1 to 200, each placed by Kafka's rack-aware
// assignment from a random start, as kafka-topics --create does.
func kafkaBalanced(n int32, seed uint64) *model.Snapshot {
	s := &model.Snapshot{Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}}
	for id := int32(1); id <= n; id++ {
		s.Brokers[id] = model.Broker{ID: id, Rack: fmt.Sprintf("rack-%c", 'a'+(id-1)%3)}
	}
	rnd := rand.New(rand.NewPCG(seed, seed))
	sizes := []int{100_000}
	for range 20 {
		sizes = append(sizes, 1+rnd.IntN(200))
	}
	for k, size := range sizes {
		name := fmt.Sprintf("other-%d", k)
		if k == 0 {
			name = "events"
		}
		a := kafkaAssign(sortedBrokers(s), size, 3, -1, -1, rnd)
		ps := make([]model.Partition, len(a))
		for i, r := range a {
			ps[i] = model.Partition{TopicPartition: model.TopicPartition{Topic: name, Partition: int32(i)}, Replicas: r, ISR: slices.Clone(r), Leader: r[0]}
		}
		s.Topics[name] = ps
	}
	return s
}
