package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/model"
)

// benchCluster builds n partitions (50 topics) on brokers 1..brokers, RF 3, leaders on the
// head of the AR except that broker 7 took the leadership of half the partitions it holds,
// and leads none of a fifth of those it heads. One partition in 50 lost a follower from the
// ISR.
func benchCluster(n, brokers int) *model.Snapshot {
	r := rand.New(rand.NewPCG(1, 100_000))
	s := &model.Snapshot{Brokers: map[int32]model.Broker{}, Topics: map[string][]model.Partition{}, Missing: map[string]error{}}
	for id := 1; id <= brokers; id++ {
		s.Brokers[int32(id)] = model.Broker{ID: int32(id), Rack: fmt.Sprintf("r%d", id%3)}
	}
	const topics = 50
	g := 0
	for ti := range topics {
		name := fmt.Sprintf("topic-%02d", ti)
		ps := make([]model.Partition, n/topics)
		for i := range ps {
			p := model.Partition{TopicPartition: model.TopicPartition{Topic: name, Partition: int32(i)}}
			first := g % brokers // round robin heads
			p.Replicas = []int32{int32(first + 1)}
			for len(p.Replicas) < 3 {
				if id := int32(r.IntN(brokers) + 1); !slices.Contains(p.Replicas, id) {
					p.Replicas = append(p.Replicas, id)
				}
			}
			p.ISR = slices.Clone(p.Replicas)
			if g%50 == 0 {
				p.ISR = p.ISR[:2]
			}
			p.Leader = p.Replicas[0]
			switch {
			case p.Leader == 7 && (g/brokers)%5 == 0:
				p.Leader = p.Replicas[1]
			case slices.Contains(p.ISR, 7) && g%2 == 0:
				p.Leader = 7
			}
			ps[i] = p
			g++
		}
		s.Topics[name] = ps
	}
	return s
}

func BenchmarkShed100k(b *testing.B) {
	s := benchCluster(100_000, 30)
	req := ShedRequest{Broker: 7, DemoteToEnd: true}
	var p Plan
	var err error
	b.ReportAllocs()
	for b.Loop() {
		p, err = Shed(s, req)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(p.Changes)), "changes")
	b.ReportMetric(float64(len(p.Elections())), "elections")
}
