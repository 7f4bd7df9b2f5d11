package plan

import (
	"math/rand/v2"
	"testing"
)

// rfScenarios are synthetic clusters of 30 brokers in 3 racks (24 from the start, 6 added
// later) whose topic "events" has 100,000 partitions, built with Kafka's rack-aware
// assignment, grown by Kafka's partition expansion and partly assigned by hand, next to
// 20 other topics with the same kind of history.
var rfScenarios = []struct {
	name     string
	spec     synthSpec
	from, to int
}{
	{"3to4", synthSpec{Brokers: 30, Early: 24, Racks: 3, Partitions: 100_000, RF: 3, Others: 20, Seed: 1}, 3, 4},
	{"2to3", synthSpec{Brokers: 30, Early: 24, Racks: 3, Partitions: 100_000, RF: 2, Others: 20, Seed: 2}, 2, 3},
	{"3to5", synthSpec{Brokers: 30, Early: 24, Racks: 3, Partitions: 100_000, RF: 3, Others: 20, Seed: 3}, 3, 5},
}

// BenchmarkRF compares, per scenario, the replicas each algorithm copies (÷ the least
// possible, Δ per partition) and the spread (max − min) of replicas per broker over the
// whole cluster afterwards:
//
//   - ours: ReplicationFactor;
//   - kafka-generate: kafka-reassign-partitions.sh --generate's assignment of the whole
//     topic at the new factor (random start, as Kafka draws it);
//   - seed-next-broker: the seed's rule, append the broker after the last replica.
//
// rack-short counts partitions on fewer racks than min(factor, racks); rule1-broken those
// whose appended replicas skipped an emptier rack (append-only algorithms only).
func BenchmarkRF(b *testing.B) {
	for _, sc := range rfScenarios {
		s := synthCluster(sc.spec)
		for _, alg := range []struct {
			name string
			run  func(b *testing.B) [][]int32
		}{
			{"ours", func(b *testing.B) [][]int32 {
				a, err := oursAssignment(s, "events", sc.to)
				if err != nil {
					b.Fatal(err)
				}
				return a
			}},
			{"kafka-generate", func(*testing.B) [][]int32 {
				return kafkaGenerate(s, "events", sc.to, rand.New(rand.NewPCG(9, 9)))
			}},
			{"seed-next-broker", func(*testing.B) [][]int32 { return seedNextBroker(s, "events", sc.to) }},
		} {
			b.Run(sc.name+"/"+alg.name, func(b *testing.B) {
				var a [][]int32
				for b.Loop() {
					a = alg.run(b)
				}
				m := measureRF(s, "events", sc.to, a)
				b.ReportMetric(float64(m.moved)/float64(m.min), "moved/min")
				b.ReportMetric(float64(m.spread), "spread")
				b.ReportMetric(float64(m.before), "spread-before")
				b.ReportMetric(float64(m.rackShort), "rack-short")
				b.ReportMetric(float64(m.lowDiversity), "rule1-broken")
			})
		}
	}
}

// BenchmarkRFPlan100k is the time to plan raising 100,000 partitions from 3 to 4 replicas.
func BenchmarkRFPlan100k(b *testing.B) {
	s := synthCluster(rfScenarios[0].spec)
	req := RFRequest{Topic: "events", Factor: 4, MinISR: 2}
	var p Plan
	var err error
	b.ReportAllocs()
	for b.Loop() {
		p, err = ReplicationFactor(s, req)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(p.Changes)), "changes")
}
