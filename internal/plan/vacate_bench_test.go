package plan

import (
	"maps"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// BenchmarkVacate100k plans a failed broker's and a drained broker's replicas on a
// synthetic cluster of 30 brokers in 3 racks holding 100,000 partitions of factor 3 (and
// 20 other topics), each grown by Kafka's own assignment and expansion. It reports the
// replicas moved ÷ the least possible (the vacated broker's replicas), the spread (max −
// min) of replicas per live broker before and after, and the partitions whose rack spread
// shrank.
func BenchmarkVacate100k(b *testing.B) {
	spec := synthSpec{Brokers: 30, Early: 24, Racks: 3, Partitions: 100_000, RF: 3, Others: 20, Seed: 7}
	for _, kind := range []string{"failed", "drain"} {
		b.Run(kind, func(b *testing.B) {
			s := synthCluster(spec)
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
				p, err = Vacate(s, req)
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
			before, after := liveSpread(s, victim, Plan{}), liveSpread(s, victim, p)
			b.ReportMetric(float64(moved)/float64(held), "moved/min")
			b.ReportMetric(float64(before), "spread-before")
			b.ReportMetric(float64(after), "spread")
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

// liveSpread is max − min of the replicas per broker other than gone, with p applied.
func liveSpread(s *model.Snapshot, gone int32, p Plan) int {
	after := map[model.TopicPartition][]int32{}
	for _, c := range p.Changes {
		after[c.TopicPartition] = c.ReplicasAfter
	}
	load := map[int32]int{}
	for id := range s.Brokers {
		if id != gone {
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
