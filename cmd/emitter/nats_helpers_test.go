package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// workerStreams are the streams as a worker sets them up (internal/pipeline,
// Setup), so that a test that creates them leaves what a worker expects: the
// worker's own create-or-update then changes nothing.
var workerStreams = []jetstream.StreamConfig{
	{
		Name:        events.EventsStream,
		Description: "kafkamender requests, consumed once by a worker (work queue)",
		Subjects:    []string{events.EventsSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  10 * time.Minute,
		MaxMsgSize:  events.DefaultMaxBytes + 64<<10,
	},
	{
		Name:        events.ResultsStream,
		Description: "kafkamender results: the audit trail, one subject per event id",
		Subjects:    []string{events.ResultsSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      90 * 24 * time.Hour,
		AllowDirect: true,
	},
}

// ensureStreams creates the workers' streams that do not exist. Existing ones
// are left as they are (they may be shared with running workers and other
// tests), but must capture the same subjects with the same retention.
func ensureStreams(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, cfg := range workerStreams {
		s, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // created meanwhile, by a worker or a test
				s, err = js.Stream(ctx, cfg.Name)
			}
		}
		if err != nil {
			t.Fatalf("stream %s: %v", cfg.Name, err)
		}
		got := s.CachedInfo().Config
		if !slices.Equal(got.Subjects, cfg.Subjects) || got.Retention != cfg.Retention {
			t.Fatalf("stream %s exists with subjects %v and retention %v; workers want %v and %v",
				cfg.Name, got.Subjects, got.Retention, cfg.Subjects, cfg.Retention)
		}
	}
}

// startNATS runs a JetStream-enabled nats-server inside the test process, on a
// free port with its storage in a temporary directory, and returns its URL.
func startNATS(t *testing.T) string {
	t.Helper()
	return testenv.StartNATSServer(t, &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	}, nil).ClientURL()
}

// waitStored waits until the results stream holds a result for id. A waiter on the result
// subject hears a result as it is published, a moment before the stream has stored it, so
// a lookup of the stored result right after --wait returned may find nothing yet.
func waitStored(t *testing.T, js jetstream.JetStream, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := js.Stream(t.Context(), events.ResultsStream)
		if err == nil {
			if _, err = s.GetLastMsgForSubject(t.Context(), events.ResultSubject(id)); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no result of %s stored: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func connectJS(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// As the workers bind it (natsjs): the streams ensureStreams creates get the workers'
	// replicas (three on the stack's NATS cluster, one on a single server), so a worker
	// that comes after finds them as it would have made them.
	return nc, testenv.JetStream(t, nc)
}

// fakeWorker answers the events published on one subject the way a worker
// does, without Kafka: it decodes the event with the workers' decoder,
// publishes a progress report, then stores a result in the results stream.
//
// It listens with a core NATS subscription, so it takes nothing from the
// work-queue stream: a consumer of its own would have to filter on a subject
// that no other consumer's filter overlaps (JetStream refuses overlapping
// consumers on a work-queue stream, error 10100), and while it existed the
// workers' consumer (filter kafkamender.events.>) could not be created.
// Unlike a worker it sees re-published (duplicate) events too; it answers an
// event id once, as the stream would deliver it once.
type fakeWorker struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	delay  time.Duration
	answer func(*events.Event) events.Result

	wg       sync.WaitGroup
	mu       sync.Mutex
	received map[string]int // deliveries by event id
}

func startFakeWorker(t *testing.T, nc *nats.Conn, js jetstream.JetStream, subject string, delay time.Duration,
	answer func(*events.Event) events.Result) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{t: t, nc: nc, js: js, delay: delay, answer: answer, received: map[string]int{}}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		fw.wg.Add(1)
		go func() {
			defer fw.wg.Done()
			fw.handle(m)
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sub.Unsubscribe()
		fw.wg.Wait()
	})
	return fw
}

// deliveries returns how many publishes of id the fake worker saw, once it has seen want
// of them or a second has passed: the emitter may return before the fake worker's
// subscription has handled the last publish.
func (fw *fakeWorker) deliveries(id string, want int) int {
	deadline := time.Now().Add(time.Second)
	for {
		fw.mu.Lock()
		n := fw.received[id]
		fw.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (fw *fakeWorker) handle(m *nats.Msg) {
	ev, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{})
	if err != nil {
		fw.t.Errorf("fake worker: a worker would reject the event: %v\n%s", err, m.Data)
		return
	}
	fw.mu.Lock()
	fw.received[ev.ID]++
	first := fw.received[ev.ID] == 1
	fw.mu.Unlock()
	if !first {
		return
	}
	time.Sleep(fw.delay)
	started := time.Now().UTC()
	_ = fw.nc.Publish(events.ProgressSubject(ev.ID), []byte(`{"id":"`+ev.ID+`","step":"plan","partitions":1}`))
	res := fw.answer(ev)
	res.ID, res.Type, res.Cluster, res.Worker, res.Attempt = ev.ID, ev.Type, ev.Cluster, "fake-worker", 1
	res.StartedAt, res.FinishedAt = started, started.Add(1500*time.Millisecond)
	raw, err := json.Marshal(res)
	if err != nil {
		fw.t.Errorf("fake worker: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(raw) > int(fw.nc.MaxPayload())/2 {
		// Too large for one message: stored as a worker stores it, in parts.
		results, err := pipeline.NewResults(ctx, fw.nc)
		if err == nil {
			_, _, err = results.Publish(ctx, &res)
		}
		if err != nil {
			fw.t.Errorf("fake worker: publish the result of %s: %v", ev.ID, err)
		}
		return
	}
	if _, err := fw.js.Publish(ctx, events.ResultSubject(ev.ID), raw); err != nil {
		fw.t.Errorf("fake worker: publish the result of %s: %v", ev.ID, err)
	}
}

// answerPreferred answers a preferred-leader request as done (or planned, on
// a dry run); a reason of the form "status:<status>" asks for that status.
func answerPreferred(ev *events.Event) events.Result {
	p := ev.Payload.(*events.ReplicaChange)
	status := events.StatusSucceeded
	if p.DryRun {
		status = events.StatusPlanned
	}
	if s, ok := strings.CutPrefix(p.Reason, "status:"); ok {
		status = events.Status(s)
	}
	parts := p.Partitions
	if len(parts) == 0 {
		parts = []int32{0}
	}
	res := events.Result{Status: status, Strategy: "api", Reason: p.Reason}
	if status == events.StatusFailed {
		res.Error = "not controller"
	}
	for _, part := range parts {
		res.Changes = append(res.Changes, events.Change{
			TopicPartition: events.TopicPartition{Topic: p.Topic, Partition: part},
			ReplicasBefore: []int32{1, *p.PreferredLeader}, ReplicasAfter: []int32{*p.PreferredLeader, 1},
			LeaderBefore: 1, LeaderAfter: *p.PreferredLeader,
		})
	}
	res.Skipped = []events.Skip{}
	return res
}
