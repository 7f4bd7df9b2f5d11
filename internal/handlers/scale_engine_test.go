package handlers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/scale"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The sizes the issue names, end to end through the worker's pipeline, engine and tasks,
// with NATS at its default limits (an in-process nats-server: 1 MiB max_payload) and the
// lock in NATS key-value: a shed of a broker leading 25,000 partitions, and a
// replication-factor raise of a 10,000-partition topic, each journaled (in chunks),
// applied in batches the controller accepts, verified, and reported in full. Kafka is the
// placement model of package scale (kfake answering metadata, reassignments and elections
// from a model of 100,000 partitions): a broker of the local stack cannot hold 25,000
// partitions (a file open for each; the machine allows 20,000 a process), so the real
// clusters run the same at 10,000 (TestLargeOperations).
func TestScaleOperationsThroughTheEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 partitions: a minute under the race detector")
	}
	shape := scale.Shape100k
	shape.Big = 10_000 // the raised topic
	cl := handlers.ScaleClient(t, handlers.StartScale(t, shape))

	_, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t).Named("scale")
	lk, err := locks.NewKV(js, locks.KVConfig{Worker: "scale", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handlers.New(handlers.Config{
		Clusters: map[string]*handlers.Cluster{"scale": {Name: "scale", Client: cl, Locker: lk, Strategy: kafka.StrategyAPI}},
		JS:       js, Logger: log,
		RF:       config.ReplicationFactor{MaxMovesPerBroker: shape.Big, ThrottleSettle: -1},
		CopyPoll: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := h.Engine(operation.Config{Journal: journal.New(js), Results: pipeline.ResultsOn(js), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pipeline.New(nc, map[string]pipeline.Handler{events.TypeBrokerOverloaded: eng, events.TypeReplicaChangeRequested: eng},
		pipeline.Config{Worker: "scale", Clusters: []string{"scale"}, AckWait: time.Minute, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = pl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testenv.Eventually(t, 30*time.Second, pl.Ready)

	run := func(typ string, data map[string]any) *events.Result {
		t.Helper()
		raw, _ := json.Marshal(data)
		env := events.Envelope{SpecVersion: events.SpecVersion, ID: testenv.Name(t, "ev"), Source: "test", Type: typ,
			Time: time.Now().UTC(), DataContentType: events.ContentTypeJSON, Data: raw}
		body, _ := json.Marshal(env)
		ch := testenv.WatchResults(t, nc, env.ID)
		if _, err := js.Publish(t.Context(), events.Subject("scale", typ), body); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res := testenv.NextResult(t, ch, 5*time.Minute)
		t.Logf("%s: %s, %d changes, %d skipped, in %s", typ, res.Status, len(res.Changes), len(res.Skipped), time.Since(start).Round(time.Millisecond))
		return res
	}

	// Broker 1 leads over 25,000 partitions (the shape skews leadership to it).
	shed := run(events.TypeBrokerOverloaded, map[string]any{"broker": 1})
	if shed.Status != events.StatusSucceeded || len(shed.Changes) < 25_000 || len(shed.Skipped) != 0 || shed.Truncated == nil {
		t.Fatalf("shed: %s (%q), %d changes, %d skipped, truncated %v; want succeeded, 25,000 changes or more, stored in parts",
			shed.Status, shed.Error, len(shed.Changes), len(shed.Skipped), shed.Truncated)
	}
	after, err := kafka.ReadSnapshot(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range shed.Changes {
		if p, _ := after.Partition(ch.TopicPartition); p.Leader == 1 || p.Leader != ch.LeaderAfter {
			t.Fatalf("%s: the result says led by %d, the cluster shows %d", ch.TopicPartition, ch.LeaderAfter, p.Leader)
		}
	}

	rf := run(events.TypeReplicaChangeRequested, map[string]any{"topic": scale.BigTopic, "replication_factor": 4})
	if rf.Status != events.StatusSucceeded || len(rf.Changes) != shape.Big || len(rf.Skipped) != 0 || rf.Truncated == nil {
		t.Fatalf("raise: %s (%q), %d changes, %d skipped, truncated %v", rf.Status, rf.Error, len(rf.Changes), len(rf.Skipped), rf.Truncated)
	}
	if rec, err := journal.New(js).Get(t.Context(), "scale"); err != nil || rec == nil || rec.Open() || len(rec.Left) != shape.Big {
		t.Fatalf("journal after the raise: %+v (%v), want closed with what it left", rec, err)
	}
}
