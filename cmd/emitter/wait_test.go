package main

// These tests run a nats-server inside the test process (no outside server):
// they check publishing, waiting, the duplicate path and the result command
// against real JetStream behaviour.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
)

func preferredArgs(url, cluster, id string, extra ...string) []string {
	return append([]string{"preferred-leader", "--nats-url", url, "--cluster", cluster, "--topic", "orders",
		"--broker", "2", "--partition", "1", "--id", id}, extra...)
}

func TestWaitForResult(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	fw := startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, answerPreferred)

	// First run: published, the worker answers, the table is printed.
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), preferredArgs(url, "local", "ev-1", "--wait", "--timeout", "10s", "--reason", "hot"), e)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"event ev-1 published to stream KAFKAMENDER_EVENTS at sequence 1\n",
		"waiting up to 10s for the result on kafkamender.results.ev-1\n",
		`progress: {"id":"ev-1","step":"plan","partitions":1}` + "\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	out := stdout.String()
	for _, want := range []string{"event ev-1: succeeded\n", "cluster:              local\n", "worker:               fake-worker\n",
		"duration:             1.5s\n", "reason:               hot\n", "orders-1   1,2              2,1             1              2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(stored:") || strings.Contains(out, "(replayed:") {
		t.Errorf("a fresh result is not marked as earlier:\n%s", out)
	}

	// Second run with the same id: JetStream drops the duplicate, the emitter
	// finds the stored result.
	e, stdout, stderr = testEnv(nil)
	code = run(t.Context(), preferredArgs(url, "local", "ev-1", "--wait", "--timeout", "10s", "-o", "json"), e)
	if code != exitOK {
		t.Fatalf("second run: exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"event ev-1 already in stream KAFKAMENDER_EVENTS at sequence 1 (duplicate id: not stored again)\n",
		"event ev-1 was published before: its stored result follows\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("second run: stderr lacks %q:\n%s", want, stderr)
		}
	}
	stored := storedResult(t, url, "ev-1")
	if got := stdout.String(); got != string(stored)+"\n" {
		t.Errorf("second run: stdout is not the stored result on one line:\n got %q\nwant %q", got, stored)
	}
	if n := fw.deliveries("ev-1", 2); n != 2 {
		t.Errorf("fake worker saw %d publishes of ev-1, want 2 (it answers once)", n)
	}

	// The result command finds it too.
	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", "ev-1"}, e); code != exitOK {
		t.Fatalf("result: exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout.String(), "event ev-1: succeeded\n") || strings.Contains(stdout.String(), "(stored:") {
		t.Errorf("result: stdout:\n%s", stdout)
	}
}

func TestWaitExitStatus(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 0, answerPreferred)

	for _, tt := range []struct {
		extra []string
		want  int
		line  string
	}{
		{[]string{"--dry-run"}, exitOK, "event %s: planned\n"},
		{[]string{"--reason", "status:noop"}, exitOK, "event %s: noop\n"},
		{[]string{"--reason", "status:partial"}, exitFailure, "event %s: partial\n"},
		{[]string{"--reason", "status:failed"}, exitFailure, "error:                not controller\n"},
		{[]string{"--reason", "status:rejected"}, exitFailure, "event %s: rejected\n"},
		{[]string{"--reason", "status:expired"}, exitFailure, "event %s: expired\n"},
	} {
		id := "st-" + strings.NewReplacer(":", "-", "--", "").Replace(strings.Join(tt.extra, "-"))
		e, stdout, stderr := testEnv(nil)
		code := run(t.Context(), preferredArgs(url, "local", id, append(tt.extra, "--wait", "--timeout", "10s")...), e)
		if code != tt.want {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", tt.extra, code, tt.want, stderr)
		}
		line := tt.line
		if strings.Contains(line, "%s") {
			line = strings.ReplaceAll(line, "%s", id)
		}
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("%v: stdout lacks %q:\n%s", tt.extra, line, stdout)
		}

		// The result command maps the stored status the same way.
		waitStored(t, js, id)
		e, _, stderr = testEnv(nil)
		if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", id, "-o", "json"}, e); code != tt.want {
			t.Errorf("result %s: exit %d, want %d; stderr:\n%s", id, code, tt.want, stderr)
		}
	}
}

func TestWaitTimeout(t *testing.T) {
	url := startNATS(t)
	_, js := connectJS(t, url)
	ensureStreams(t, js)

	e, stdout, stderr := testEnv(nil)
	start := time.Now()
	code := run(t.Context(), preferredArgs(url, "local", "slow-1", "--wait", "--timeout", "500ms"), e)
	if code != exitNoReply {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitNoReply, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s with --timeout 500ms", d)
	}
	want := "emitter preferred-leader: no result for event slow-1 after 500ms: is a worker running? the event stays queued\n" +
		"Look for its result later with: emitter result --id slow-1\n"
	if !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr does not end with %q:\n%s", want, stderr)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %s", stdout)
	}

	// The event stays queued.
	s, err := js.Stream(t.Context(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(t.Context(), events.Subject("local", events.TypeReplicaChangeRequested)); err != nil {
		t.Errorf("the event is not in the stream: %v", err)
	}

	// And the result command has nothing to show.
	e, stdout, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", "slow-1"}, e); code != exitNoStore {
		t.Errorf("result: exit %d, want %d", code, exitNoStore)
	}
	if want := "emitter result: no result stored for event slow-1\n"; stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("result: stderr %q, want %q; stdout %q", stderr, want, stdout)
	}
}

func TestWaitInterrupted(t *testing.T) {
	url := startNATS(t)
	_, js := connectJS(t, url)
	ensureStreams(t, js)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond) // as a SIGINT would
	defer cancel()
	e, _, stderr := testEnv(nil)
	if code := run(ctx, preferredArgs(url, "local", "int-1", "--wait", "--timeout", "1m"), e); code != exitNoReply {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitNoReply, stderr)
	}
	if want := "interrupted: no result for event int-1 yet; the event stays queued"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestWaitDuplicateNoResultYet: the id was published before but has no result
// yet (it is still queued): the emitter waits for it.
func TestWaitDuplicateNoResultYet(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)

	e, _, stderr := testEnv(nil)
	if code := run(t.Context(), preferredArgs(url, "local", "dup-1"), e); code != exitOK {
		t.Fatalf("first publish: exit %d; stderr:\n%s", code, stderr)
	}
	// A worker comes, and takes a while.
	startFakeWorker(t, nc, js, events.Subject("local", events.TypeReplicaChangeRequested), 300*time.Millisecond, answerPreferred)

	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), preferredArgs(url, "local", "dup-1", "--wait", "--timeout", "10s", "-o", "json"), e); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if want := "event dup-1 was published before and has no result yet\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	var res events.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.ID != "dup-1" || res.Status != events.StatusSucceeded {
		t.Errorf("stdout %s (%v)", stdout, err)
	}
	if bytes.Count(stdout.Bytes(), []byte("\n")) != 1 {
		t.Errorf("json output is not one line: %q", stdout)
	}
}

// TestNoStreams: against a NATS server without the workers' streams.
func TestNoStreams(t *testing.T) {
	url := startNATS(t)

	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), preferredArgs(url, "local", "x-1", "--wait", "--timeout", "5s"), e); code != exitFailure {
		t.Errorf("preferred-leader: exit %d, want %d", code, exitFailure)
	}
	if want := "no JetStream stream captures kafkamender.events.>: is a worker running?"; !strings.Contains(stderr.String(), want) || stdout.Len() != 0 {
		t.Errorf("stderr lacks %q (or stdout not empty):\n%s%s", want, stderr, stdout)
	}

	e, _, stderr = testEnv(nil)
	if code := run(t.Context(), []string{"result", "--nats-url", url, "--id", "x-1"}, e); code != exitNoStore {
		t.Errorf("result: exit %d, want %d", code, exitNoStore)
	}
	if want := "no result stored for event x-1: stream KAFKAMENDER_RESULTS does not exist"; !strings.Contains(stderr.String(), want) {
		t.Errorf("result: stderr lacks %q:\n%s", want, stderr)
	}
}

// TestPublishWithoutWait: preferred-leader without --wait prints where the
// event went, and exits once it is stored.
func TestPublishWithoutWait(t *testing.T) {
	url := startNATS(t)
	_, js := connectJS(t, url)
	ensureStreams(t, js)

	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), preferredArgs(url, "local", "nw-1", "--dry-run"), e); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if want := "event nw-1 published to stream KAFKAMENDER_EVENTS at sequence 1\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	s, err := js.Stream(t.Context(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get("Nats-Msg-Id"); got != "nw-1" {
		t.Errorf("message id %q, want the event id", got)
	}
	ev, err := events.Decode(msg.Subject, msg.Header, msg.Data, events.DecodeOptions{Clusters: []string{"local"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := ev.Payload.(*events.ReplicaChange); !p.DryRun || *p.PreferredLeader != 2 || p.Topic != "orders" {
		t.Errorf("stored event data: %s", ev.Data)
	}
}

// storedResult reads the raw result of id from the results stream.
func storedResult(t *testing.T, url, id string) []byte {
	t.Helper()
	_, js := connectJS(t, url)
	s, err := js.Stream(t.Context(), events.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(t.Context(), events.ResultSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	return msg.Data
}

// interimJSON is an interim result of event id, as a worker publishes it.
func interimJSON(t *testing.T, id string, status events.Status) []byte {
	t.Helper()
	expires := time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
	res := events.Result{ID: id, Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: status, PlanID: "plan-ab12",
		ExpiresAt: expires, Changes: []events.Change{}, Skipped: []events.Skip{}}
	if status == events.StatusAwaitingApproval {
		res.Note = "the plan waits for approval (3 partitions touched, over 2; the event asks for approval (data.approval)): send plan-approved or " +
			"plan-denied with plan_id plan-ab12 before 2026-12-04T19:00:00Z"
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// An interim result (awaiting_approval, approved) is not the result: waitResult says so
// in a line and waits on, for the final one.
func TestWaitResultInterim(t *testing.T) {
	results := make(chan *nats.Msg, 4)
	results <- &nats.Msg{Data: interimJSON(t, "ev-1", events.StatusAwaitingApproval)}
	results <- &nats.Msg{Data: interimJSON(t, "ev-1", events.StatusApproved)}
	results <- &nats.Msg{Data: []byte(`{"id":"ev-1","status":"succeeded","plan_id":"plan-ab12"}`)}
	var w bytes.Buffer
	got, interim, err := waitResult(t.Context(), &progressPrinter{w: &w}, nil, "ev-1", results, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.result.Status != events.StatusSucceeded || interim == nil || interim.Status != events.StatusApproved {
		t.Errorf("result %+v, last interim %+v", got.result, interim)
	}
	want := "event ev-1: awaiting approval: plan plan-ab12 (3 partitions touched, over 2; the event asks for approval (data.approval)), " +
		"expires 2026-12-04T19:00:00Z; approve: emitter approve --cluster local --id plan-ab12\n" +
		"event ev-1: plan plan-ab12 approved; it runs now\n"
	if w.String() != want {
		t.Errorf("lines:\n%s\nwant\n%s", w.String(), want)
	}

	// No final result before the end: the last interim result is returned with the error.
	results <- &nats.Msg{Data: interimJSON(t, "ev-1", events.StatusAwaitingApproval)}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	w.Reset()
	got, interim, err = waitResult(ctx, &progressPrinter{w: &w}, nil, "ev-1", results, nil, nil)
	if err == nil || got != nil || interim == nil || interim.Status != events.StatusAwaitingApproval {
		t.Fatalf("result %v, interim %v, error %v", got, interim, err)
	}
	if want := "it waits for approval of plan plan-ab12 (expires 2026-12-04T19:00:00Z)\n" +
		"Approve it with: emitter approve --cluster local --id plan-ab12\n" +
		"or deny it with: emitter deny --cluster local --id plan-ab12 --reason WORDS"; stillWaiting(interim) != want {
		t.Errorf("stillWaiting:\n%s\nwant\n%s", stillWaiting(interim), want)
	}
}

func TestInterimLines(t *testing.T) {
	for _, tt := range []struct {
		res         events.Result
		line, still string
	}{
		{events.Result{ID: "e", Status: events.StatusAwaitingApproval, PlanID: "p", Cluster: "c", Note: "something else"},
			"event e: awaiting approval: plan p; approve: emitter approve --cluster c --id p",
			"it waits for approval of plan p\nApprove it with: emitter approve --cluster c --id p\nor deny it with: emitter deny --cluster c --id p --reason WORDS"},
		{events.Result{ID: "e", Status: events.StatusApproved, PlanID: "p"}, "event e: plan p approved; it runs now", "its plan p was approved and runs"},
		{events.Result{ID: "e", Status: "consulting"}, "event e: consulting (an interim result; the final one follows)", ""},
	} {
		if got := interimLine(&tt.res); got != tt.line {
			t.Errorf("interimLine(%s) = %q, want %q", tt.res.Status, got, tt.line)
		}
		if got := stillWaiting(&tt.res); got != tt.still {
			t.Errorf("stillWaiting(%s) = %q, want %q", tt.res.Status, got, tt.still)
		}
	}
	if stillWaiting(nil) != "" {
		t.Error("stillWaiting(nil) says something")
	}
	if _, ok := interimResult([]byte(`{"id":"e","status":"succeeded"}`)); ok {
		t.Error("a final result is taken for an interim one")
	}
	if _, ok := interimResult([]byte(`not json`)); ok {
		t.Error("a message that is not a result is taken for an interim one")
	}
}
