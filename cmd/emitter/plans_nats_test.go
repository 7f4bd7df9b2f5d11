package main

// These tests run a nats-server inside the test process (no outside server): the plans'
// bucket as the workers keep it, read by plans, plan show, status, approve and deny; and
// --wait through the interim results of a plan awaiting approval.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// emit runs the emitter with args against url, and wants exit status want; it returns
// stdout and stderr.
func emit(t *testing.T, url string, want int, args ...string) (string, string) {
	t.Helper()
	e, stdout, stderr := testEnv(map[string]string{"NATS_URL": url})
	if code := run(t.Context(), args, e); code != want {
		t.Fatalf("emitter %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
	}
	return stdout.String(), stderr.String()
}

func wantContains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// storedPlan is a plan as a worker stores it, made at the emitter's time in the tests
// (fixedNow).
func storedPlan(cluster, event string, state approval.State) *approval.Plan {
	now := fixedNow.Truncate(time.Second)
	p := &approval.Plan{ID: approval.PlanID(cluster, event), Cluster: cluster, Event: event, Type: events.TypeReplicaChangeRequested,
		Source: "test", Request: json.RawMessage(`{}`), Strategy: "api",
		Changes: []events.Change{
			{TopicPartition: tp("orders", 0), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1},
			{TopicPartition: tp("orders", 1), ReplicasBefore: []int32{2, 3}, ReplicasAfter: []int32{3, 2, 1}, LeaderBefore: 2, LeaderAfter: 3},
		},
		Size: approval.Size{Partitions: 2, Bytes: 5 << 20, LeadersMoved: 1}, Why: "2 partitions touched, over 1",
		PlannedBy: "worker-a", CreatedAt: now, ExpiresAt: now.Add(time.Hour), State: state}
	if state != approval.Awaiting {
		p.DecidedBy, p.DecidedEvent, p.DecidedAt, p.DecidedWhy = "emitter/bob@box", "d-1", now, "not now"
	}
	return p
}

func TestPlansFromNATS(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	// The fleet's consumer of cluster local, for status.
	stream, err := js.Stream(t.Context(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: pipeline.ClusterConsumer(pipeline.DefaultConsumer, "local"),
		FilterSubject: events.Subject("local", events.TypeBrokerOverloaded), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}

	// No bucket: no plan, which is no error; nothing to show or answer.
	stdout, _ := emit(t, url, exitOK, "plans")
	if want := "no plan awaits approval (bucket KAFKAMENDER_PLANS does not exist: no plan has waited for approval on this NATS server)\n"; stdout != want {
		t.Errorf("plans without a bucket: %q, want %q", stdout, want)
	}
	if stdout, _ := emit(t, url, exitOK, "plans", "--all", "-o", "json"); stdout != "[]\n" {
		t.Errorf("plans -o json without a bucket: %q", stdout)
	}
	_, stderr := emit(t, url, exitFailure, "plan", "show", "--id", "plan-x")
	wantContains(t, "plan show without a bucket", stderr,
		"emitter plan show: no plan plan-x on any cluster: bucket KAFKAMENDER_PLANS does not exist (no plan has waited for approval on this NATS server)")
	_, stderr = emit(t, url, exitFailure, "approve", "--id", "plan-x")
	wantContains(t, "approve without a bucket", stderr, "emitter approve: no plan plan-x on any cluster: bucket KAFKAMENDER_PLANS does not exist")
	stdout, _ = emit(t, url, exitOK, "status")
	wantContains(t, "status without a bucket", stdout, "cluster local\n", "  approval:   none awaiting\n")

	// The plans, as a worker stores them.
	store := approval.NewStore(js)
	waits, denied, other := storedPlan("local", "ev-1", approval.Awaiting), storedPlan("local", "ev-2", approval.Denied), storedPlan("other", "ev-3", approval.Awaiting)
	other.CreatedAt = other.CreatedAt.Add(time.Second)
	for _, p := range []*approval.Plan{waits, denied, other} {
		if _, created, err := store.Create(t.Context(), p); err != nil || !created {
			t.Fatalf("store plan %s: %v %v", p.ID, created, err)
		}
	}

	stdout, _ = emit(t, url, exitOK, "plans")
	wantContains(t, "plans", stdout, "PLAN ", " EXPIRES\n", waits.ID+"  local    ev-1", other.ID+"  other    ev-3", "awaiting", "5.0 MiB", "2 partitions touched, over 1", "(in 59m)")
	if strings.Contains(stdout, denied.ID) {
		t.Errorf("plans lists a denied plan:\n%s", stdout)
	}
	if strings.Index(stdout, waits.ID) > strings.Index(stdout, other.ID) {
		t.Errorf("plans: not oldest first:\n%s", stdout)
	}
	stdout, _ = emit(t, url, exitOK, "plans", "--cluster", "local")
	if !strings.Contains(stdout, waits.ID) || strings.Contains(stdout, other.ID) || strings.Contains(stdout, denied.ID) {
		t.Errorf("plans --cluster local:\n%s", stdout)
	}
	stdout, _ = emit(t, url, exitOK, "plans", "--cluster", "nowhere")
	if stdout != "no plan awaits approval on cluster nowhere\n" {
		t.Errorf("plans of a cluster without plans: %q", stdout)
	}
	stdout, _ = emit(t, url, exitOK, "plans", "--all")
	wantContains(t, "plans --all", stdout, " EXPIRES / DECIDED\n", denied.ID, "denied", "by emitter/bob@box at ")
	stdout, _ = emit(t, url, exitOK, "plans", "-o", "json")
	var listed []approval.Plan
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil || len(listed) != 2 || listed[0].ID != waits.ID || listed[1].ID != other.ID ||
		len(listed[0].Changes) != 2 {
		t.Errorf("plans -o json (%v):\n%s", err, stdout)
	}

	stdout, _ = emit(t, url, exitOK, "plan", "show", "--id", waits.ID)
	wantContains(t, "plan show", stdout, "plan "+waits.ID+": awaiting approval\n", "cluster:     local\n", "event:       ev-1\n",
		"orders-1   2,3 → 3,2,1              2 → 3\n", "totals: 2 partitions, 5.0 MiB to copy, 1 leader moved\n",
		"approve:     emitter approve --cluster local --id "+waits.ID)
	stdout, _ = emit(t, url, exitOK, "plan", "show", "--id", denied.ID, "--cluster", "local", "-o", "json")
	var shown approval.Plan
	if err := json.Unmarshal([]byte(stdout), &shown); err != nil || shown.ID != denied.ID || shown.State != approval.Denied {
		t.Errorf("plan show -o json (%v):\n%s", err, stdout)
	}
	_, stderr = emit(t, url, exitFailure, "plan", "show", "--id", waits.ID, "--cluster", "other")
	wantContains(t, "plan show on the wrong cluster", stderr, "emitter plan show: no plan "+waits.ID+" on cluster other in bucket KAFKAMENDER_PLANS")
	_, stderr = emit(t, url, exitFailure, "plan", "show", "--id", "plan-unknown")
	wantContains(t, "plan show of an unknown plan", stderr, "no plan plan-unknown on any cluster in bucket KAFKAMENDER_PLANS")

	stdout, _ = emit(t, url, exitOK, "status", "--cluster", "local", "-o", "json")
	var st []clusterStatus
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || len(st) != 1 || !slices.Equal(st[0].PlansAwaiting, []string{waits.ID}) {
		t.Errorf("status -o json (%v):\n%s", err, stdout)
	}
	stdout, _ = emit(t, url, exitOK, "status")
	wantContains(t, "status", stdout, "  approval:   1 plan awaiting: "+waits.ID+" (emitter plans --cluster local)\n")

	// approve and deny read the plan: its cluster, and whether it still waits.
	_, stderr = emit(t, url, exitFailure, "approve", "--id", denied.ID)
	wantContains(t, "approve of a denied plan", stderr, "emitter approve: plan "+denied.ID+" of event ev-2 on cluster local was denied by emitter/bob@box at ",
		"(event d-1) already: nothing to approve")
	_, stderr = emit(t, url, exitFailure, "deny", "--id", waits.ID, "--cluster", "other", "--reason", "no")
	wantContains(t, "deny on the wrong cluster", stderr, "emitter deny: no plan "+waits.ID+" on cluster other in bucket KAFKAMENDER_PLANS")
	stdout, stderr = emit(t, url, exitOK, "approve", "--id", waits.ID, "--print")
	wantContains(t, "approve --print without --cluster", stderr, "plan "+waits.ID+": event ev-1 (replica-change-requested) on cluster local, 2 partitions, "+
		"5.0 MiB to copy, 1 leader moved; awaiting approval\n", "--print: event generated-id not published to kafkamender.events.local.plan-approved\n")
	wantContains(t, "approve --print without --cluster", stdout, `"type": "plan-approved"`, `"plan_id": "`+waits.ID+`"`)

	// approve --wait: the approval's own result, and the progress of the plan's event.
	sub, err := nc.Subscribe(events.Subject("local", events.TypePlanApproved), func(m *nats.Msg) {
		ev, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{})
		if err != nil {
			t.Errorf("a worker would reject the approval: %v", err)
			return
		}
		pd := ev.Payload.(*events.PlanDecision)
		go func() {
			_ = nc.Publish(events.ProgressSubject("ev-1"), []byte(`{"id":"ev-1","partitions_total":2,"partitions_done":1}`))
			time.Sleep(100 * time.Millisecond)
			raw, _ := json.Marshal(events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Status: events.StatusSucceeded, PlanID: pd.PlanID,
				Note: "approved plan " + pd.PlanID + " of event ev-1, which ran it", Changes: waits.Changes, Skipped: []events.Skip{}})
			if _, err := js.Publish(context.Background(), events.ResultSubject(ev.ID), raw); err != nil {
				t.Errorf("publish the approval's result: %v", err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	stdout, stderr = emit(t, url, exitOK, "approve", "--id", waits.ID, "--approve-id", "ap-1", "--reason", "INC-7", "--wait", "--timeout", "10s")
	wantContains(t, "approve --wait", stderr, "event ap-1 published to stream KAFKAMENDER_EVENTS", "progress: 1/2 partitions\n")
	wantContains(t, "approve --wait", stdout, "event ap-1: succeeded\n", "approved plan "+waits.ID+" of event ev-1")

	// A wait without the interim result (the event was published before, or its interim
	// result was missed) reads the event's plan.
	emit(t, url, exitOK, preferredArgs(url, "local", "ev-1")...)
	_, stderr = emit(t, url, exitNoReply, preferredArgs(url, "local", "ev-1", "--wait", "--timeout", "1s")...)
	wantContains(t, "--wait of an event published before", stderr, "event ev-1 was published before and has no result yet\n",
		"event ev-1: awaiting approval: plan "+waits.ID+" (2 partitions touched, over 1), expires ",
		"emitter preferred-leader: no final result for event ev-1 after 1s: it waits for approval of plan "+waits.ID+" (expires ")
	_, stderr = emit(t, url, exitNoReply, preferredArgs(url, "other", "ev-3", "--wait", "--timeout", "1s")...)
	wantContains(t, "--wait that missed the interim result", stderr,
		"emitter preferred-leader: no final result for event ev-3 after 1s: it waits for approval of plan "+other.ID+" (expires ",
		"Approve it with: emitter approve --cluster other --id "+other.ID+"\n")
}

// An event whose plan waits for approval: --wait says so, waits on through approved, and
// prints the final result; a wait that ends before says the event waits for approval.
func TestWaitThroughApproval(t *testing.T) {
	url := startNATS(t)
	nc, js := connectJS(t, url)
	ensureStreams(t, js)
	interim := func(id string, status events.Status) {
		res := events.Result{ID: id, Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: status, PlanID: "plan-" + id,
			ExpiresAt: time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC), Changes: []events.Change{}, Skipped: []events.Skip{},
			Note: "the plan waits for approval (2 partitions touched, over 1): send plan-approved or plan-denied with plan_id plan-" + id + " before …"}
		raw, _ := json.Marshal(res)
		// As a worker announces it: never stored (no stream has that name).
		if err := nc.PublishMsg(&nats.Msg{Subject: events.ResultSubject(id), Data: raw,
			Header: nats.Header{jetstream.ExpectedStreamHeader: []string{"kafkamender.replay.not-stored"}}}); err != nil {
			t.Error(err)
		}
	}
	sub, err := nc.Subscribe(events.Subject("local", events.TypeReplicaChangeRequested), func(m *nats.Msg) {
		ev, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{})
		if err != nil {
			t.Errorf("a worker would reject the event: %v", err)
			return
		}
		go func() {
			interim(ev.ID, events.StatusAwaitingApproval)
			if ev.ID == "never-answered" {
				return
			}
			time.Sleep(100 * time.Millisecond)
			interim(ev.ID, events.StatusApproved)
			time.Sleep(100 * time.Millisecond)
			res := answerPreferred(ev)
			res.ID, res.Type, res.Cluster, res.PlanID = ev.ID, ev.Type, ev.Cluster, "plan-"+ev.ID
			raw, _ := json.Marshal(res)
			if _, err := js.Publish(context.Background(), events.ResultSubject(ev.ID), raw); err != nil {
				t.Errorf("publish the result: %v", err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	stdout, stderr := emit(t, url, exitOK, preferredArgs(url, "local", "answered", "--wait", "--timeout", "10s")...)
	wantContains(t, "--wait through approval", stderr,
		"event answered: awaiting approval: plan plan-answered (2 partitions touched, over 1), expires 2026-12-04T19:00:00Z; "+
			"approve: emitter approve --cluster local --id plan-answered\n",
		"event answered: plan plan-answered approved; it runs now\n")
	if !strings.HasPrefix(stdout, "event answered: succeeded\n") {
		t.Errorf("stdout is not the final result:\n%s", stdout)
	}
	waitStored(t, js, "answered")
	if stored := storedResult(t, url, "answered"); !strings.Contains(string(stored), `"status":"succeeded"`) {
		t.Errorf("stored result: %s", stored)
	}

	stdout, stderr = emit(t, url, exitNoReply, preferredArgs(url, "local", "never-answered", "--wait", "--timeout", "1s")...)
	want := fmt.Sprintf("emitter preferred-leader: no final result for event never-answered after 1s: it waits for approval of plan plan-never-answered (expires 2026-12-04T19:00:00Z)\n" +
		"Approve it with: emitter approve --cluster local --id plan-never-answered\n" +
		"or deny it with: emitter deny --cluster local --id plan-never-answered --reason WORDS\n" +
		"Look for its result later with: emitter result --id never-answered\n")
	if !strings.HasSuffix(stderr, want) || stdout != "" {
		t.Errorf("stderr does not end with\n%s\n%s\nstdout %q", want, stderr, stdout)
	}
}
