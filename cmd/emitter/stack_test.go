package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// TestStackPreferredLeaderWait runs preferred-leader --wait against the NATS
// server of the local stack, with a fake worker answering for a cluster name
// of its own. It shares the workers' streams (creating them as a worker would
// when they are missing) and removes only its own messages.
func TestStackPreferredLeaderWait(t *testing.T) {
	testenv.Get(t) // the stack is up, and stays up while the test runs
	nc, js := connectJS(t, stack.NATSURL)
	ensureStreams(t, js)

	cluster := testenv.Name(t, "c")
	if !events.ValidToken(cluster) {
		t.Fatalf("testenv.Name gave %q, not a subject token", cluster)
	}
	subject := events.Subject(cluster, events.TypeReplicaChangeRequested)
	skipIfWorkersConsume(t, js, subject)
	id := testenv.Name(t, "ev")
	t.Cleanup(func() { removeTestMessages(t, js, subject, id) })
	fw := startFakeWorker(t, nc, js, subject, 0, answerPreferred)

	args := []string{"preferred-leader", "--nats-url", stack.NATSURL, "--cluster", cluster, "--topic", "orders",
		"--broker", "3", "--partitions", "0,2", "--strategy", "api", "--reason", "integration test",
		"--id", id, "--wait", "--timeout", "30s"}

	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), args, e); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	t.Logf("first run, stderr:\n%sstdout:\n%s", stderr, stdout)
	for _, want := range []string{"event " + id + " published to stream KAFKAMENDER_EVENTS at sequence ",
		`progress: {"id":"` + id + `","step":"plan","partitions":1}`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, want := range []string{"event " + id + ": succeeded\n", "cluster:              " + cluster + "\n",
		"orders-0   1,3              3,1             1              3\n", "orders-2   1,3              3,1             1              3\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	// The same id again: stored once, answered once; the result comes from
	// stream KAFKAMENDER_RESULTS.
	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), append(args, "-o", "json"), e); code != exitOK {
		t.Fatalf("second run: exit %d; stderr:\n%s", code, stderr)
	}
	t.Logf("second run, stderr:\n%sstdout:\n%s", stderr, stdout)
	for _, want := range []string{"(duplicate id: not stored again)", "event " + id + " was published before: its stored result follows"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("second run: stderr lacks %q:\n%s", want, stderr)
		}
	}
	var res events.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("second run: stdout is not a result: %v\n%s", err, stdout)
	}
	if res.ID != id || res.Status != events.StatusSucceeded || res.Cluster != cluster || len(res.Changes) != 2 {
		t.Errorf("second run: result %+v", res)
	}
	if n := fw.deliveries(id, 2); n != 2 {
		t.Errorf("fake worker saw %d publishes, want 2", n)
	}

	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", stack.NATSURL, "--id", id, "-o", "json"}, e); code != exitOK {
		t.Fatalf("result: exit %d; stderr:\n%s", code, stderr)
	}
	if got := strings.TrimSpace(stdout.String()); !strings.Contains(got, `"id":"`+id+`"`) {
		t.Errorf("result: stdout %s", got)
	}
	e, _, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", stack.NATSURL, "--id", id + "-unknown"}, e); code != exitNoStore {
		t.Errorf("result of an unknown id: exit %d, want %d; stderr:\n%s", code, exitNoStore, stderr)
	}
}

// skipIfWorkersConsume skips the test when a worker is pulling events on
// subject: it would take the test's event too (and reject it: the cluster is
// unknown to it), racing the fake worker.
func skipIfWorkersConsume(t *testing.T, js jetstream.JetStream, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		filters := info.Config.FilterSubjects
		if info.Config.FilterSubject != "" {
			filters = append(filters, info.Config.FilterSubject)
		}
		if info.NumWaiting > 0 && (len(filters) == 0 || slices.ContainsFunc(filters, func(f string) bool { return events.SubjectMatches(f, subject) })) {
			t.Skipf("consumer %s of %s has %d pull requests waiting: a worker is running and would race the fake worker",
				info.Name, events.EventsStream, info.NumWaiting)
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
}

// removeTestMessages removes what the test stored in the shared streams: its
// events (no worker consumes them) and its results (not an audit trail).
func removeTestMessages(t *testing.T, js jetstream.JetStream, eventSubject, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for stream, subject := range map[string]string{
		events.EventsStream:  eventSubject,
		events.ResultsStream: events.ResultSubject(id),
	} {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			err = s.Purge(ctx, jetstream.WithPurgeSubject(subject))
		}
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("remove %s from stream %s: %v", subject, stream, err)
		}
	}
}
