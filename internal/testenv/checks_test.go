package testenv_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The checks compare whole results: a result too large for one message reaches
// WatchResults and StoredResult whole, as a small one does.
func TestWatchAndStoredResultsAreWhole(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	ctx := t.Context()
	p, err := pipeline.New(nc, nil, pipeline.Config{Worker: "w1", Clusters: []string{"local"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	results, err := pipeline.NewResults(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 25000} {
		id := fmt.Sprintf("ev-%d", n)
		ch := testenv.WatchResults(t, nc, id)
		res := &events.Result{ID: id, Status: events.StatusSucceeded, Worker: "w1", Changes: make([]events.Change, n)}
		for i := range res.Changes {
			res.Changes[i] = events.Change{TopicPartition: events.TopicPartition{Topic: fmt.Sprintf("t-%03d", i/100), Partition: int32(i % 100)},
				ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}, LeaderBefore: 1, LeaderAfter: 2}
		}
		if _, ok, err := results.Publish(ctx, res); err != nil || !ok {
			t.Fatal(ok, err)
		}
		want := whole(t, res)
		if got := testenv.NextResult(t, ch, 10*time.Second); whole(t, got) != want {
			t.Fatalf("%s: watched %d changes, want %d", id, len(got.Changes), n)
		}
		if got := testenv.StoredResult(t, js, id); whole(t, got) != want {
			t.Fatalf("%s: stored %d changes, want %d", id, len(got.Changes), n)
		}
	}
}

func whole(t *testing.T, res *events.Result) string {
	t.Helper()
	w := *res
	w.Truncated = nil
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
