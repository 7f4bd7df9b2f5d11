package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// largeResult is a result of a shed of n partitions: about 120 bytes a change.
func largeResult(id, worker string, n int) *events.Result {
	res := &events.Result{ID: id, Type: evType, Cluster: cluster, Status: events.StatusPartial, Strategy: "api",
		Attempt: 1, Worker: worker, StartedAt: time.Now().UTC(), Reason: "shed",
		Changes: make([]events.Change, n), Skipped: []events.Skip{{TopicPartition: events.TopicPartition{Topic: "x", Partition: 1}, Reason: "not in sync", Code: "not_in_sync"}},
		Noop: []events.TopicPartition{{Topic: "y", Partition: 2}}}
	for i := range res.Changes {
		res.Changes[i] = events.Change{TopicPartition: events.TopicPartition{Topic: fmt.Sprintf("orders-%03d", i/100), Partition: int32(i % 100)},
			ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 1, LeaderAfter: 2}
	}
	return res
}

// wholeJSON is res encoded whole (never as its head), for comparisons.
func wholeJSON(t *testing.T, res *events.Result) string {
	t.Helper()
	w := *res
	w.Truncated, w.Replayed = nil, false
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// resultsStream returns the results stream, for ReadResult/ReadWhole.
func (e *env) resultsStream() jetstream.Stream {
	e.t.Helper()
	s, err := e.js.Stream(e.t.Context(), events.ResultsStream)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// partSubjects lists the subjects of result parts of id the stream holds.
func (e *env) partSubjects(id string) []string {
	e.t.Helper()
	info, err := e.resultsStream().Info(e.t.Context(), jetstream.WithSubjectFilter(events.ResultSubject(id)+".parts.>"))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for s := range info.State.Subjects {
		out = append(out, s)
	}
	return out
}

// A result of 25,000 changes, too large for one message at NATS's default limits, is
// stored (parts, then the head, atomically first-writer-wins), read back whole by
// Earlier, ReadResult and a waiter on the subject; a second publisher loses cleanly and is
// told the stored result, whole.
func TestLargeResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if e.nc.MaxPayload() != 1<<20 {
		t.Fatalf("max_payload %d, want the default 1 MiB", e.nc.MaxPayload())
	}
	e.setup(config(t))
	ctx := t.Context()
	results, err := pipeline.NewResults(ctx, e.nc)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.nc.SubscribeSync(events.ResultSubject("ev-big"))
	if err != nil {
		t.Fatal(err)
	}

	first := largeResult("ev-big", "w1", 25000)
	first.FinishedAt = time.Time{}
	stored, published, err := results.Publish(ctx, first)
	if err != nil || !published || stored != first {
		t.Fatalf("publish = %v, %v; want itself, published", published, err)
	}
	if first.FinishedAt.IsZero() || first.Truncated == nil || first.Truncated.Changes != 25000 || first.Truncated.Parts < 3 {
		t.Fatalf("publish did not complete the result or say where it is: %+v", first.Truncated)
	}
	want := wholeJSON(t, first)

	// What the subject carries is the head: a valid result, lists cut, saying where the
	// rest is; a waiter reads the whole from the stream.
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var head events.Result
	if err := json.Unmarshal(m.Data, &head); err != nil {
		t.Fatal(err)
	}
	if len(m.Data) > events.HeadBytes+8<<10 || head.Status != events.StatusPartial || head.Worker != "w1" || head.FinishedAt.IsZero() ||
		len(head.Changes) == 0 || len(head.Changes) >= 25000 || !reflect.DeepEqual(head.Truncated, first.Truncated) {
		t.Fatalf("head of %d bytes: %d changes, truncated %+v", len(m.Data), len(head.Changes), head.Truncated)
	}
	got, raw, err := pipeline.ReadWhole(ctx, e.resultsStream(), m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != want || wholeJSON(t, got) != want || !reflect.DeepEqual(got.Truncated, first.Truncated) {
		t.Fatalf("the waiter read %d bytes, %d changes; want the whole result of %d bytes", len(raw), len(got.Changes), len(want))
	}

	// A second publisher loses, and is told the stored result whole.
	second := largeResult("ev-big", "w2", 25000)
	stored, published, err = results.Publish(ctx, second)
	if err != nil || published || wholeJSON(t, stored) != want {
		t.Fatalf("second publish = worker %s, %v, %v; want the first's whole result, not published", stored.Worker, published, err)
	}
	// The first again (its acknowledgement lost): it is the stored one.
	if _, published, err = results.Publish(ctx, first); err != nil || !published {
		t.Fatalf("publish of the stored result again = %v, %v; want published", published, err)
	}
	earlier, ok, err := results.Earlier(ctx, "ev-big")
	if err != nil || !ok || wholeJSON(t, earlier) != want {
		t.Fatalf("Earlier = %v, %v", ok, err)
	}
	if got, raw, err := pipeline.ReadResult(ctx, e.resultsStream(), "ev-big"); err != nil || got == nil || string(raw) != want {
		t.Fatalf("ReadResult = %v", err)
	}
	if n, _ := e.stored("ev-big"); n != 1 {
		t.Fatalf("%d results stored; want 1", n)
	}
	if parts := e.partSubjects("ev-big"); len(parts) != first.Truncated.Parts {
		t.Fatalf("parts stored: %v; want the %d of the one result (the losers saw it stored first)", parts, first.Truncated.Parts)
	}

	// Re-encoded, a result read whole is its head again: what a replay publishes.
	again, err := json.Marshal(earlier)
	if err != nil || string(again) != string(m.Data) {
		t.Fatalf("a result read whole encodes as %d bytes, not as its head of %d", len(again), len(m.Data))
	}
}

// Workers racing to publish large results of one event: one wins, every one is told its
// result whole.
func TestLargeResultRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setup(config(t))
	ctx := t.Context()
	results, err := pipeline.NewResults(ctx, e.nc)
	if err != nil {
		t.Fatal(err)
	}
	const racers = 4
	var wg sync.WaitGroup
	got := make([]*events.Result, racers)
	won := make([]bool, racers)
	for i := range racers {
		wg.Go(func() {
			var err error
			got[i], won[i], err = results.Publish(ctx, largeResult("ev-race", fmt.Sprintf("w%d", i), 10000))
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range racers {
		if won[i] {
			winners++
		}
		if got[i] == nil || wholeJSON(t, got[i]) != wholeJSON(t, got[0]) || len(got[i].Changes) != 10000 {
			t.Fatalf("racer %d was told another result than racer 0", i)
		}
	}
	if winners != 1 {
		t.Fatalf("%d racers published; want 1", winners)
	}
	if n, _ := e.stored("ev-race"); n != 1 {
		t.Fatalf("%d results stored; want 1", n)
	}
}

// An event whose stored result is large, delivered again: the replay on the subject is
// the stored head, marked replayed, and reads whole.
func TestReplayOfLargeResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := config(t)
	e.setup(cfg)
	ctx := t.Context()
	results, err := pipeline.NewResults(ctx, e.nc)
	if err != nil {
		t.Fatal(err)
	}
	orig := largeResult("ev-big-again", "earlier", 25000)
	if _, _, err := results.Publish(ctx, orig); err != nil {
		t.Fatal(err)
	}
	storedHead, err := e.resultsStream().GetLastMsgForSubject(ctx, events.ResultSubject("ev-big-again"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.nc.SubscribeSync(events.ResultSubject("ev-big-again"))
	if err != nil {
		t.Fatal(err)
	}
	var n calls
	e.start(e.nc, cfg, func(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
		n.inc()
		return &events.Result{Status: events.StatusSucceeded}, nil
	})
	e.publish("ev-big-again")

	m, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var replayHead, head map[string]json.RawMessage
	_ = json.Unmarshal(m.Data, &replayHead)
	_ = json.Unmarshal(storedHead.Data, &head)
	if string(replayHead["replayed"]) != "true" {
		t.Fatalf("the replay is not marked replayed: %.300s", m.Data)
	}
	delete(replayHead, "replayed")
	if !reflect.DeepEqual(replayHead, head) {
		t.Fatalf("the replay's head differs from the stored head:\n%.500s\n%.500s", m.Data, storedHead.Data)
	}
	got, _, err := pipeline.ReadWhole(ctx, e.resultsStream(), m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Replayed || wholeJSON(t, got) != wholeJSON(t, orig) {
		t.Fatalf("the replay read whole: replayed %t, %d changes", got.Replayed, len(got.Changes))
	}
	e.waitSettled()
	if c, _ := e.stored("ev-big-again"); c != 1 {
		t.Fatalf("%d results stored; want the original only", c)
	}
	if n.get() != 0 {
		t.Fatalf("handler ran %d times for an event with a result", n.get())
	}
}

// What a result of 25,000 changes costs at NATS's default limits: the time to publish it
// (parts and head) and to read it back whole, and the bytes the stream holds for it.
func BenchmarkLargeResult(b *testing.B) {
	_, nc := testenv.InProcessNATS(b)
	ctx := context.Background()
	cfg := pipeline.Config{Worker: "w1", Clusters: []string{cluster}, Logger: zap.NewNop()}
	p, err := pipeline.New(nc, nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Setup(ctx); err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	results, err := pipeline.NewResults(ctx, nc)
	if err != nil {
		b.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.ResultsStream)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(largeResult("x", "w", 25000))
	var ids []string
	b.Run("publish", func(b *testing.B) {
		before, _ := stream.Info(ctx)
		n := 0
		for b.Loop() {
			id := fmt.Sprintf("bench-%d", len(ids))
			ids = append(ids, id)
			if _, ok, err := results.Publish(ctx, largeResult(id, "w", 25000)); err != nil || !ok {
				b.Fatal(ok, err)
			}
			n++
		}
		after, _ := stream.Info(ctx)
		b.ReportMetric(float64(len(raw)), "result-bytes")
		b.ReportMetric(float64(after.State.Bytes-before.State.Bytes)/float64(n), "stored-bytes/result")
		b.ReportMetric(float64(after.State.Msgs-before.State.Msgs)/float64(n), "msgs/result")
	})
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if res, _, err := pipeline.ReadResult(ctx, stream, ids[0]); err != nil || len(res.Changes) != 25000 {
				b.Fatal(err)
			}
		}
	})
}

// A worker's results are read from the results stream's leader (a message get), never by
// a direct get a replica a write behind may answer: with direct gets refused, a result
// (one message, or a head and its parts) is read back at once, and a missing one reads as
// missing, with no request refused. A user allowed the direct get only (the permissions
// documented before leader reads) still reads: its first read waits for the refused
// message get to time out, then every read is a direct get (one violation logged).
func TestResultsAreReadFromTheStreamLeader(t *testing.T) {
	v := &testenv.Violations{}
	user := func(name string, deny string) *server.User {
		p := &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}
		if deny != "" {
			p.Publish.Deny = []string{deny}
		}
		return &server.User{Username: name, Password: "p", Permissions: p}
	}
	srv := testenv.StartNATSServer(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{user("admin", ""), user("leader-only", "$JS.API.DIRECT.GET.>"), user("direct-only", "$JS.API.STREAM.MSG.GET.>")}}, v)
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(name, "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx := t.Context()
	p, err := pipeline.New(connect("admin"), nil, config(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user       string
		violations int
	}{{"leader-only", 0}, {"direct-only", 1}} {
		t.Run(tc.user, func(t *testing.T) {
			v.Take()
			results, err := pipeline.NewResults(ctx, connect(tc.user))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := results.Earlier(ctx, "ev-none-"+tc.user); ok || err != nil {
				t.Fatalf("Earlier of an event with no result = %v, %v; want none stored", ok, err)
			}
			for i := range 20 {
				res := largeResult(fmt.Sprintf("ev-%s-%d", tc.user, i), "w1", 10)
				if i == 0 {
					res = largeResult(res.ID, "w1", 25000) // a head and its parts
				}
				if _, published, err := results.Publish(ctx, res); err != nil || !published {
					t.Fatalf("publish %s = %v, %v", res.ID, published, err)
				}
				got, ok, err := results.Earlier(ctx, res.ID)
				if err != nil || !ok || wholeJSON(t, got) != wholeJSON(t, res) {
					t.Fatalf("Earlier of %s, read at once = %v, %v", res.ID, ok, err)
				}
			}
			testenv.Eventually(t, 5*time.Second, func() error {
				if got := v.Lines(); len(got) != tc.violations {
					return fmt.Errorf("violations logged: %q; want %d", got, tc.violations)
				}
				return nil
			})
		})
	}
}
