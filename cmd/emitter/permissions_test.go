package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
	"github.com/kafkamender/kafkamender/internal/worker"
)

// securityDocServer starts a nats-server with JetStream and the authorization of
// docs/security.md, as it is written there, or as edit changes it.
func securityDocServer(t *testing.T, workerPassword, emitterPassword string, edit ...func(string) string) (*server.Server, *testenv.Violations) {
	t.Helper()
	root, err := stack.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	authz, err := stack.DocumentedNATSAuthorization(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NATS_WORKER_PASSWORD", workerPassword)
	t.Setenv("NATS_EMITTER_PASSWORD", emitterPassword)
	t.Setenv("NATS_ALERTING_PASSWORD", "alerting-secret-1")
	for _, e := range edit {
		authz = e(authz)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	text := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream {store_dir: %q}\n%s", t.TempDir(), authz)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("docs/security.md's authorization: %v", err)
	}
	opts.NoSigs = true
	v := &testenv.Violations{}
	return testenv.StartNATSServer(t, opts, v), v
}

// The permissions docs/security.md gives the worker and the emitter are enough for
// everything they do, and no more than they say: a worker that sets up its streams,
// consumers and buckets, takes events, locks, journals and publishes results; an emitter
// that publishes and waits; the Alertmanager webhook. The server logs no violation; the
// emitter cannot publish a result nor delete a stream, nor can the worker.
func TestDocumentedNATSPermissions(t *testing.T) {
	const workerPW, emitterPW = "worker-secret-1", "emitter-secret-1"
	s, v := securityDocServer(t, workerPW, emitterPW)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close) // after the worker stops

	cfg, err := config.ParseEnv(fmt.Appendf(nil, `
worker: {id: permissions-test}
http: {listen: "127.0.0.1:0"}
nats: {url: %q, user: kafkamender-worker}
lock: {backend: nats}
alertmanager: {rules: [{alertname: KafkaBrokerOverloaded, type: broker-overloaded, fields: {broker: broker_id}}]}
guardrails: {max_operations_per_hour: 100}
clusters: {local: {bootstrap_servers: [%q]}}
`, s.ClientURL(), kc.ListenAddrs()[0]), []string{"KAFKAMENDER_NATS_PASSWORD=" + workerPW})
	if err != nil {
		t.Fatal(err)
	}
	w := runWorker(t, cfg, v)

	// The emitter: an event that the worker handles (a noop: broker 0 leads orders-0),
	// its stored result, an event of a cluster nobody serves (rejected by the worker's
	// sweep of events no consumer takes).
	emitterVars := map[string]string{"NATS_URL": s.ClientURL(), "NATS_USER": "kafkamender-emitter", "NATS_PASSWORD": emitterPW}
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"preferred-leader", "--cluster", "local", "--topic", "orders", "--partition", "0", "--broker", "0", "--id", "perm-1", "--wait", "--timeout", "30s"}, exitOK},
		{[]string{"result", "--id", "perm-1"}, exitOK},
		{[]string{"broker-overloaded", "--cluster", "nobody", "--broker", "1", "--id", "perm-2", "--wait", "--timeout", "30s"}, exitFailure},
	} {
		e, stdout, stderr := testEnv(emitterVars)
		if code := run(t.Context(), tt.args, e); code != tt.want {
			t.Errorf("emitter %v: exit %d, want %d\n%s%s", tt.args, code, tt.want, stdout, stderr)
		}
	}

	// A pause through the worker's control consumer: an event of the cluster waits (its
	// progress says why, /readyz and the metric show the pause), and runs on resume.
	pauseWorld(t, w.Addr(), emitterVars)

	// The plans awaiting approval, read with the emitter's read-only permissions; an
	// approval the worker rejects (no approval.approvers configured).
	plansWorld(t, s.ClientURL(), workerPW, emitterVars)

	// A result too large for one message, stored by the worker (parts, then the head),
	// read whole by the emitter.
	quietWorker, err := nats.Connect(s.ClientURL(), nats.UserInfo("kafkamender-worker", workerPW))
	if err != nil {
		t.Fatal(err)
	}
	defer quietWorker.Close()
	results, err := pipeline.NewResults(t.Context(), quietWorker)
	if err != nil {
		t.Fatal(err)
	}
	large := answerLarge(nil)
	large.ID, large.Type, large.Cluster, large.Worker = "perm-7", "replica-change-requested", "local", "permissions-test"
	if _, ok, err := results.Publish(t.Context(), &large); err != nil || !ok || large.Truncated == nil {
		t.Fatalf("publish a large result: %v %v", ok, err)
	}
	e, stdout, stderr := testEnv(emitterVars)
	if code := run(t.Context(), []string{"result", "--id", "perm-7", "-o", "json"}, e); code != exitOK || !bytes.Contains(stdout.Bytes(), []byte(`"partition":99`)) ||
		bytes.Contains(stdout.Bytes(), []byte(`"truncated"`)) {
		t.Errorf("emitter result of a large result: exit %d, %d bytes\n%s", code, stdout.Len(), stderr)
	}

	// The Alertmanager webhook publishes on the worker's connection.
	body, _ := json.Marshal(map[string]any{"version": "4", "groupKey": `{}:{alertname="KafkaBrokerOverloaded"}`, "status": "firing",
		"receiver": "kafkamender", "alerts": []map[string]any{{
			"status": "firing", "fingerprint": alertmanager.Fingerprint(map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": "local", "broker_id": "0"}),
			"startsAt": "2026-12-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
			"labels": map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": "local", "broker_id": "0"}}}})
	resp, err := http.Post("http://"+w.Addr()+"/v1/alertmanager", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), "kafkamender.events.local.broker-overloaded") {
		t.Errorf("webhook: %s %s", resp.Status, out)
	}

	// What the handlers do to the buckets that a noop does not: journal writes, a lock
	// that another holder waits for (a watch), the cool-down records.
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}) // the violations below are expected
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("kafkamender-worker", workerPW), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	exerciseBuckets(t, js)

	time.Sleep(500 * time.Millisecond) // the server logs asynchronously
	if got := v.Take(); len(got) > 0 {
		t.Errorf("permission violations:\n%s", strings.Join(got, "\n"))
	}

	// And no more than that.
	emitter, err := nats.Connect(s.ClientURL(), nats.UserInfo("kafkamender-emitter", emitterPW), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer emitter.Close()
	for who, conn := range map[string]*nats.Conn{"emitter": emitter, "worker": nc} {
		if _, err := conn.Request("$JS.API.STREAM.DELETE.KAFKAMENDER_EVENTS", nil, 500*time.Millisecond); err == nil {
			t.Errorf("the %s deleted the events stream", who)
		}
	}
	if err := emitter.Publish("kafkamender.results.perm-1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = emitter.Flush()
	time.Sleep(500 * time.Millisecond)
	got := strings.Join(v.Take(), "\n")
	for _, want := range []string{
		`"$G/user:kafkamender-emitter" - Publish Violation - Subject "$JS.API.STREAM.DELETE.KAFKAMENDER_EVENTS"`,
		`"$G/user:kafkamender-worker" - Publish Violation - Subject "$JS.API.STREAM.DELETE.KAFKAMENDER_EVENTS"`,
		`"$G/user:kafkamender-emitter" - Publish Violation - Subject "kafkamender.results.perm-1"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no violation %s in:\n%s", want, got)
		}
	}
}

// exerciseBuckets does what the handlers do to the key-value buckets, with the worker's
// permissions: the journal (journal.Store), a NATS lock with a waiter (locks.KVLocker),
// the cool-down records (a put, a get and a filtered key list, as handlers.coolDown).
func exerciseBuckets(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	alive := func() error { return nil }

	j := journal.New(js)
	op, err := j.Begin(ctx, alive, nil, journal.Entry{Event: "perm-3", Type: "broker-overloaded", Cluster: "perm"})
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	op.Entry.Step = journal.StepDone
	if err := op.Save(ctx); err != nil {
		t.Fatalf("journal save: %v", err)
	}
	if _, err := j.Get(ctx, "perm"); err != nil {
		t.Fatalf("journal get: %v", err)
	}
	if _, err := j.List(ctx); err != nil {
		t.Fatalf("journal list: %v", err)
	}
	if err := op.Close(ctx); err != nil {
		t.Fatalf("journal close: %v", err)
	}
	// An entry too large for one message: chunks written, then purged by the next writes.
	big := journal.Entry{Event: "perm-6", Type: "broker-overloaded", Cluster: "perm-big", Changes: make([]plan.Change, 12000)}
	for i := range big.Changes {
		big.Changes[i] = plan.Change{TopicPartition: model.TopicPartition{Topic: fmt.Sprintf("orders-%03d", i/100), Partition: int32(i % 100)},
			ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 3, 1}, LeaderBefore: 1, LeaderAfter: 2}
	}
	op, err = j.Begin(ctx, alive, nil, big)
	if err != nil {
		t.Fatalf("journal, a large entry: %v", err)
	}
	op.Entry.Step = journal.StepDone
	if err := op.Save(ctx); err != nil {
		t.Fatalf("journal save, a large entry: %v", err)
	}
	if r, err := j.Get(ctx, "perm-big"); err != nil || len(r.Changes) != 12000 {
		t.Fatalf("journal get, a large entry: %v", err)
	}
	if err := op.Close(ctx); err != nil {
		t.Fatalf("journal close, a large entry: %v", err)
	}
	kvStream, err := js.Stream(ctx, "KV_"+journal.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := kvStream.Info(ctx, jetstream.WithSubjectFilter("$KV."+journal.Bucket+".perm-big.chunks.>")); err != nil || len(info.State.Subjects) != 0 {
		t.Errorf("journal chunks left: %v %v", info.State.Subjects, err)
	}

	l, err := locks.NewKV(js, locks.KVConfig{Worker: "permissions-test", Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.Acquire(ctx, "perm", "perm-4")
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if _, err := l.Acquire(ctx, "perm", "perm-5", locks.WithWait(300*time.Millisecond)); !errors.Is(err, locks.ErrBusy) {
		t.Errorf("second acquire: %v, want busy after waiting", err)
	}
	if _, err := l.Holder(ctx, "perm"); err != nil {
		t.Errorf("holder: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}

	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.OverloadedBucket, History: 1, TTL: time.Hour})
	if err != nil {
		t.Fatalf("cool-down bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "perm.3", []byte("{}")); err != nil {
		t.Fatalf("cool-down put: %v", err)
	}
	if _, err := kv.Get(ctx, "perm.3"); err != nil {
		t.Fatalf("cool-down get: %v", err)
	}
	keys, err := kv.ListKeysFiltered(ctx, "perm.*")
	if err != nil {
		t.Fatalf("cool-down keys: %v", err)
	}
	for range keys.Keys() {
	}

	// guardrails.max_operations_per_hour: the record of a cluster's operations, created
	// and updated by revision (handlers' opLog).
	ops, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.GuardrailsBucket, History: 1, TTL: guardrails.Window})
	if err != nil {
		t.Fatalf("guardrails bucket: %v", err)
	}
	rev, err := ops.Create(ctx, "perm", []byte("[]"))
	if err != nil {
		t.Fatalf("guardrails create: %v", err)
	}
	if _, err := ops.Get(ctx, "perm"); err != nil {
		t.Fatalf("guardrails get: %v", err)
	}
	if _, err := ops.Update(ctx, "perm", []byte(`[{"event":"perm-8"}]`), rev); err != nil {
		t.Fatalf("guardrails update: %v", err)
	}
}

// pauseWorld pauses the cluster local with the emitter, publishes an event that must wait,
// checks that it waits, says why and that the worker shows the pause, then resumes.
func pauseWorld(t *testing.T, addr string, emitterVars map[string]string) {
	t.Helper()
	emit := func(want int, args ...string) {
		t.Helper()
		e, stdout, stderr := testEnv(emitterVars)
		if code := run(t.Context(), args, e); code != want {
			t.Fatalf("emitter %v: exit %d, want %d\n%s%s", args, code, want, stdout, stderr)
		}
	}
	nc, err := nats.Connect(emitterVars["NATS_URL"], nats.UserInfo(emitterVars["NATS_USER"], emitterVars["NATS_PASSWORD"]))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	heldWhy := make(chan string, 100)
	sub, err := nc.Subscribe(events.ProgressSubject("perm-held"), func(m *nats.Msg) {
		var p events.Progress
		if json.Unmarshal(m.Data, &p) == nil && p.Paused != "" {
			heldWhy <- p.Paused
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	emit(exitOK, "pause", "--cluster", "local", "--reason", "permissions test", "--id", "perm-pause", "--wait", "--timeout", "30s")
	emit(exitOK, "preferred-leader", "--cluster", "local", "--topic", "orders", "--partition", "0", "--broker", "0", "--id", "perm-held")
	select {
	case why := <-heldWhy:
		if !strings.Contains(why, "permissions test") || !strings.Contains(why, "perm-pause") {
			t.Errorf("held event's progress: %q", why)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no progress of the held event")
	}
	body := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if r := body("/readyz"); !strings.Contains(r, `"paused"`) || !strings.Contains(r, "permissions test") {
		t.Errorf("/readyz does not show the pause:\n%s", r)
	}
	if m := body("/metrics"); !strings.Contains(m, `kafkamender_cluster_paused{cluster="local"} 1`) {
		t.Errorf("metrics do not show the pause")
	}
	// emitter status, with the emitter's read-only permissions.
	e, stdout, stderr := testEnv(emitterVars)
	if code := run(t.Context(), []string{"status", "--cluster", "local", "-o", "json"}, e); code != exitOK {
		t.Fatalf("emitter status: exit %d\n%s", code, stderr)
	}
	var st []clusterStatus
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil || len(st) != 1 || st[0].Paused == nil || st[0].Paused.Reason != "permissions test" ||
		st[0].Out != 1 || st[0].InFlight != nil || !strings.HasPrefix(st[0].Lock.Location, "nats kv ") {
		t.Errorf("emitter status of the paused cluster (%v): %s", err, stdout)
	}
	e, stdout, stderr = testEnv(emitterVars)
	if code := run(t.Context(), []string{"status"}, e); code != exitOK || !strings.Contains(stdout.String(), "cluster local\n  paused:     yes: cluster local paused by") {
		t.Errorf("emitter status: exit %d\n%s%s", code, stdout, stderr)
	}
	e, stdout, _ = testEnv(emitterVars)
	if code := run(t.Context(), []string{"result", "--id", "perm-held"}, e); code == exitOK {
		t.Fatalf("the held event has a result while paused:\n%s", stdout)
	}
	// An event cancelled while it waits never runs (the requests' bucket, under the
	// worker's permissions).
	emit(exitOK, "preferred-leader", "--cluster", "local", "--topic", "orders", "--partition", "0", "--broker", "0", "--id", "perm-cancelled")
	emit(exitOK, "cancel", "--cluster", "local", "--id", "perm-cancelled", "--cancel-id", "perm-cancel", "--wait", "--timeout", "60s")
	emit(exitOK, "resume", "--cluster", "local", "--id", "perm-resume", "--wait", "--timeout", "30s")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e, stdout, _ := testEnv(emitterVars)
		run(t.Context(), []string{"result", "--id", "perm-cancelled", "-o", "json"}, e)
		var res events.Result
		if json.Unmarshal(stdout.Bytes(), &res) == nil && res.Status != "" {
			if res.Status != events.StatusCancelled {
				t.Errorf("the cancelled event's result: %s %q", res.Status, res.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled event has no result after the resume")
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e, _, _ := testEnv(emitterVars)
		if run(t.Context(), []string{"result", "--id", "perm-held"}, e) == exitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held event has no result after the resume")
		}
	}
}

// plansWorld stores a plan awaiting approval as a worker does, and reads it with the
// emitter (plans, plan show, status), which then approves it: the worker, whose
// configuration lists no approvers, rejects the approval.
func plansWorld(t *testing.T, url, workerPW string, emitterVars map[string]string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("kafkamender-worker", workerPW))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := storedPlan("local", "perm-planned", approval.Awaiting)
	p.CreatedAt, p.ExpiresAt = time.Now().UTC(), time.Now().UTC().Add(time.Hour)
	if _, created, err := approval.NewStore(js).Create(t.Context(), p); err != nil || !created {
		t.Fatalf("store a plan: %v %v", created, err)
	}
	emit := func(want int, args ...string) string {
		t.Helper()
		e, stdout, stderr := testEnv(emitterVars)
		if code := run(t.Context(), args, e); code != want {
			t.Fatalf("emitter %v: exit %d, want %d\n%s%s", args, code, want, stdout, stderr)
		}
		return stdout.String() + stderr.String()
	}
	if out := emit(exitOK, "plans", "--all"); !strings.Contains(out, p.ID) {
		t.Errorf("emitter plans:\n%s", out)
	}
	if out := emit(exitOK, "plan", "show", "--id", p.ID); !strings.Contains(out, "plan "+p.ID+": awaiting approval") {
		t.Errorf("emitter plan show:\n%s", out)
	}
	emit(exitFailure, "plan", "show", "--id", "plan-unknown", "--cluster", "local")
	if out := emit(exitOK, "status", "--cluster", "local"); !strings.Contains(out, "approval:   1 plan awaiting: "+p.ID) {
		t.Errorf("emitter status:\n%s", out)
	}
	if out := emit(exitFailure, "approve", "--id", p.ID, "--approve-id", "perm-approve", "--wait", "--timeout", "30s"); !strings.Contains(out, "may not approve or deny plans") {
		t.Errorf("emitter approve, by a source the worker does not allow:\n%s", out)
	}
}

// runWorker runs a worker with cfg until the test ends, and waits until it is ready
// (v: the server's violations, shown if it never is).
func runWorker(t *testing.T, cfg *config.Config, v *testenv.Violations) *worker.Worker {
	t.Helper()
	w, err := worker.New(cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	ready := func() bool {
		if w.Addr() == "" {
			return false
		}
		resp, err := http.Get("http://" + w.Addr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(20 * time.Second); !ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready; violations: %q", v.Take())
		}
	}
	return w
}
