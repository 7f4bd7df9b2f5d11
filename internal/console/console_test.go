package console

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

const (
	opToken     = "operator-token-for-tests-0123"
	viewerToken = "viewer-token-for-tests-456789"
)

type rig struct {
	s      *Server
	srv    *httptest.Server
	nc     *nats.Conn
	stream jetstream.Stream
}

// newRig serves a console on an in-process NATS server with the events stream, as a
// worker has it.
func newRig(t *testing.T, mutate func(*Config)) *rig {
	t.Helper()
	_, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: events.EventsStream, Subjects: []string{events.EventsSubjects}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Console: config.Console{Enabled: true, OperatorToken: opToken, ViewerToken: viewerToken,
			SessionTTL: time.Hour},
		Consumer:  "kafkamender-workers",
		Approvers: []string{"*"},
		Tick:      50 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, nc, js)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &rig{s: s, srv: srv, nc: nc, stream: stream}
}

// client is a browser: it keeps cookies and does not follow redirects.
func (r *rig) client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (r *rig) do(t *testing.T, c *http.Client, method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(t.Context(), method, r.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// csrf is the CSRF token the client's cookie jar holds (set by any page).
func (r *rig) csrf(t *testing.T, c *http.Client) string {
	t.Helper()
	u, _ := url.Parse(r.srv.URL + Prefix)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == csrfCookie {
			return ck.Value
		}
	}
	t.Fatal("no CSRF cookie")
	return ""
}

// published is the number of events the stream holds.
func (r *rig) published(t *testing.T) uint64 {
	t.Helper()
	info, err := r.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// signIn signs c in with tok through the login page.
func (r *rig) signIn(t *testing.T, c *http.Client, tok string) {
	t.Helper()
	r.do(t, c, "GET", "/ui/login", nil, nil)
	resp, body := r.do(t, c, "POST", "/ui/login", url.Values{"token": {tok}, "csrf": {r.csrf(t, c)}, "next": {"/ui/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d\n%s", resp.StatusCode, body)
	}
}

func TestUnauthenticatedGets401AndChangesNothing(t *testing.T) {
	r := newRig(t, nil)
	c := r.client(t)
	for _, p := range []string{"/ui/", "/ui/plans", "/ui/audit", "/ui/dead", "/ui/events/x", "/ui/live"} {
		if resp, _ := r.do(t, c, "GET", p, nil, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s: %d, want 401", p, resp.StatusCode)
		}
	}
	r.do(t, c, "GET", "/ui/login", nil, nil) // a CSRF cookie, which is no credential
	for _, a := range []string{"pause", "resume", "cancel", "approve", "deny"} {
		form := url.Values{"cluster": {"local"}, "reason": {"x"}, "event": {"e1"}, "plan": {"p1"}, "csrf": {r.csrf(t, c)}}
		if resp, _ := r.do(t, c, "POST", "/ui/actions/"+a, form, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s: %d, want 401", a, resp.StatusCode)
		}
	}
	for _, h := range []string{"Bearer wrong-token-wrong-token", "Basic b3BlcmF0b3I6eA==", "Bearer " + opToken + "x"} {
		if resp, _ := r.do(t, c, "POST", "/ui/actions/pause", url.Values{"cluster": {"local"}, "reason": {"x"}}, map[string]string{"Authorization": h}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST pause with %q: %d, want 401", h, resp.StatusCode)
		}
	}
	if resp, _ := r.do(t, c, "POST", "/ui/login", url.Values{"token": {"not-the-token-not-the-token"}, "csrf": {r.csrf(t, c)}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign in with a wrong token: %d, want 401", resp.StatusCode)
	}
	if n := r.published(t); n != 0 {
		t.Errorf("%d events published", n)
	}
}

func TestOperatorActsViewerOnlySees(t *testing.T) {
	r := newRig(t, nil)
	op := r.client(t)
	r.signIn(t, op, opToken)
	if resp, body := r.do(t, op, "GET", "/ui/", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "operator") {
		t.Fatalf("clusters page as the operator: %d\n%s", resp.StatusCode, body)
	}
	// A pause: published with the console's source, and the page of its event follows.
	resp, body := r.do(t, op, "POST", "/ui/actions/pause", url.Values{"cluster": {"local"}, "reason": {"incident 42"}, "until": {"2h"}, "csrf": {r.csrf(t, op)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/events/") {
		t.Fatalf("pause: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	msg, err := r.stream.GetLastMsgForSubject(t.Context(), events.Subject("local", events.TypeClusterPause))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Decode(msg.Subject, nil, msg.Data, events.DecodeOptions{})
	if err != nil {
		t.Fatalf("the published pause does not decode: %v", err)
	}
	var data events.ClusterPause
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if ev.Source != "console/operator-token" || data.Reason != "incident 42" || data.Until == "" || msg.Header.Get(jetstream.MsgIDHeader) != ev.ID {
		t.Errorf("published %+v %+v (msg id %s)", ev.Envelope, data, msg.Header.Get(jetstream.MsgIDHeader))
	}
	// A pause without a reason is refused and publishes nothing.
	before := r.published(t)
	if resp, _ := r.do(t, op, "POST", "/ui/actions/pause", url.Values{"cluster": {"local"}, "csrf": {r.csrf(t, op)}}, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("pause without a reason: %d, want 400", resp.StatusCode)
	}
	if resp, _ := r.do(t, op, "POST", "/ui/actions/pause", url.Values{"cluster": {"a b"}, "reason": {"x"}, "csrf": {r.csrf(t, op)}}, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("pause of a bad cluster name: %d, want 400", resp.StatusCode)
	}
	if resp, _ := r.do(t, op, "POST", "/ui/actions/approve", url.Values{"cluster": {"local"}, "plan": {"nope"}, "csrf": {r.csrf(t, op)}}, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("approve of no plan: %d, want 400", resp.StatusCode)
	}
	// Forged: no CSRF token, a wrong one, another site.
	for name, h := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no csrf":      {url.Values{"cluster": {"local"}, "reason": {"x"}}, nil},
		"wrong csrf":   {url.Values{"cluster": {"local"}, "reason": {"x"}, "csrf": {strings.Repeat("0", 32)}}, nil},
		"cross origin": {url.Values{"cluster": {"local"}, "reason": {"x"}, "csrf": {r.csrf(t, op)}}, map[string]string{"Origin": "https://evil.example"}},
		"cross site":   {url.Values{"cluster": {"local"}, "reason": {"x"}, "csrf": {r.csrf(t, op)}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		if resp, _ := r.do(t, op, "POST", "/ui/actions/pause", h.form, h.header); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	// The viewer sees pages without buttons, and its actions are refused.
	viewer := r.client(t)
	r.signIn(t, viewer, viewerToken)
	resp, body = r.do(t, viewer, "GET", "/ui/", nil, nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "/ui/actions/") {
		t.Errorf("clusters page as the viewer: %d, with action forms: %v", resp.StatusCode, strings.Contains(body, "/ui/actions/"))
	}
	if resp, _ := r.do(t, viewer, "POST", "/ui/actions/resume", url.Values{"cluster": {"local"}, "csrf": {r.csrf(t, viewer)}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("resume as the viewer: %d, want 403", resp.StatusCode)
	}
	if resp, _ := r.do(t, viewer, "POST", "/ui/actions/resume", url.Values{"cluster": {"local"}}, map[string]string{"Authorization": "Bearer " + viewerToken}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("resume with the viewer token: %d, want 403", resp.StatusCode)
	}
	if n := r.published(t); n != before {
		t.Errorf("refused requests published %d events", n-before)
	}
	// A bearer token needs no CSRF token: browsers never send the header by themselves.
	if resp, body := r.do(t, r.client(t), "POST", "/ui/actions/resume", url.Values{"cluster": {"local"}}, map[string]string{"Authorization": "Bearer " + opToken}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("resume with the operator token: %d\n%s", resp.StatusCode, body)
	}
}

func TestSessionCookie(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	a := newAuth(Config{Console: config.Console{OperatorToken: opToken, ViewerToken: viewerToken, SessionTTL: time.Hour}, Now: func() time.Time { return now }})
	v, _ := a.newSession(identity{User: operatorTokenUser, Role: Operator})
	if id, err := a.readSession(v); err != nil || id.Role != Operator {
		t.Fatalf("read own session: %+v %v", id, err)
	}
	// Tampered: another role, another signature.
	enc, sig, _ := strings.Cut(v, ".")
	for _, bad := range []string{enc + "." + strings.Repeat("0", len(sig)), "Mnx2aWV3ZXItdG9rZW58OTk5OTk5OTk5OQ." + sig, v + "x", "", "."} {
		if _, err := a.readSession(bad); err == nil {
			t.Errorf("session %q accepted", bad)
		}
	}
	// Another fleet's tokens: its cookies are not ours.
	other := newAuth(Config{Console: config.Console{OperatorToken: opToken + "-rotated", ViewerToken: viewerToken, SessionTTL: time.Hour}, Now: a.now})
	if _, err := other.readSession(v); err == nil {
		t.Error("a session signed before the token changed is accepted")
	}
	now = now.Add(time.Hour)
	if _, err := a.readSession(v); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired session: %v", err)
	}
}

func TestProxyIdentity(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.Console = config.Console{Enabled: true, SessionTTL: time.Hour, Proxy: config.ConsoleProxy{UserHeader: "X-Forwarded-User",
			GroupsHeader: "X-Forwarded-Groups", Operators: []string{"alice", "group:kafka-oncall"}}}
	})
	c := r.client(t)
	for _, tc := range []struct {
		user, groups string
		status       int
	}{
		{"alice", "", http.StatusSeeOther},
		{"bob", "staff, kafka-oncall", http.StatusSeeOther},
		{"carol", "staff", http.StatusForbidden},
		{"mallory<script>", "", http.StatusUnauthorized},
		{strings.Repeat("a", 200), "", http.StatusUnauthorized},
	} {
		h := map[string]string{"X-Forwarded-User": tc.user, "X-Forwarded-Groups": tc.groups}
		r.do(t, c, "GET", "/ui/login", nil, nil)
		form := url.Values{"cluster": {"local"}, "reason": {"x"}, "csrf": {r.csrf(t, c)}}
		resp, body := r.do(t, c, "POST", "/ui/actions/pause", form, h)
		if resp.StatusCode != tc.status {
			t.Errorf("user %.20q groups %q: %d, want %d\n%.300s", tc.user, tc.groups, resp.StatusCode, tc.status, body)
		}
	}
	msg, err := r.stream.GetLastMsgForSubject(context.Background(), events.Subject("local", events.TypeClusterPause))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.Envelope
	if err := json.Unmarshal(msg.Data, &ev); err != nil || ev.Source != "console/bob" {
		t.Errorf("source %q, want console/bob (%v)", ev.Source, err)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/plans": "/ui/plans", "https://evil.example/": "/ui/", "//evil.example": "/ui/", "/ui/login": "/ui/",
		"/ui/\\evil": "/ui/", "": "/ui/", "/metrics": "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every page renders what NATS holds: a cluster with a plan awaiting approval, a result.
func TestPagesRender(t *testing.T) {
	r := newRig(t, nil)
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := r.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "kafkamender-workers_local",
		FilterSubject: "kafkamender.events.local.>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.ResultsStream, Subjects: []string{events.ResultsSubjects}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	res := events.Result{ID: "ev-1", Type: events.TypeReplicaChangeRequested, Cluster: "local", Status: events.StatusSucceeded,
		Worker: "w-1", Attempt: 1, StartedAt: now.Add(-time.Minute), FinishedAt: now,
		Changes: []events.Change{{TopicPartition: events.TopicPartition{Topic: "orders", Partition: 0}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}, LeaderBefore: 1, LeaderAfter: 1}}}
	raw, _ := json.Marshal(res)
	if _, err := js.Publish(ctx, events.ResultSubject("ev-1"), raw); err != nil {
		t.Fatal(err)
	}
	plan := &approval.Plan{ID: approval.PlanID("local", "ev-2"), Cluster: "local", Event: "ev-2", Type: events.TypeReplicaChangeRequested,
		Source: "emitter/x", Request: json.RawMessage(`{}`), Changes: res.Changes, Size: approval.Size{Partitions: 1, Bytes: 1 << 20},
		Why: "1 partitions, over 0", PlannedBy: "w-1", CreatedAt: now, ExpiresAt: now.Add(time.Hour), State: approval.Awaiting}
	if _, _, err := approval.NewStore(js).Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	// The journal's revisions of ev-1: its story.
	jkv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.JournalBucket, History: 16})
	if err != nil {
		t.Fatal(err)
	}
	envBody, _ := json.Marshal(events.NewEnvelope(events.TypeReplicaChangeRequested, "ev-1", "emitter/test", json.RawMessage(`{}`), now.Add(-2*time.Minute), 0))
	request, _ := json.Marshal(pipeline.RawEvent{Subject: events.Subject("local", events.TypeReplicaChangeRequested), Data: envBody})
	for i, step := range []journal.Step{journal.StepPlanned, journal.StepCopying, journal.StepCopying, journal.StepDone, journal.StepClosed} {
		en, _ := json.Marshal(journal.Entry{Event: "ev-1", Type: events.TypeReplicaChangeRequested, Cluster: "local", Request: request,
			Worker: "w-1", Attempt: 1, Step: step, Started: now.Add(-time.Minute), Updated: now.Add(time.Duration(i-5) * time.Second)})
		if _, err := jkv.Put(ctx, "local", en); err != nil {
			t.Fatal(err)
		}
	}
	c := r.client(t)
	r.signIn(t, c, opToken)
	for path, want := range map[string][]string{
		"/ui/":                                {"local", plan.ID, "ev-1", "Pause"},
		"/ui/plans":                           {plan.ID, "1 partitions, 1.0 MiB to copy"},
		"/ui/plans/local/" + plan.ID:          {"orders-0", "[1,2] → [1,2,3]", "this worker cannot read the cluster", `id="approve"`, `id="deny"`},
		"/ui/audit?cluster=local":             {"ev-1", "succeeded"},
		"/ui/audit?status=failed":             {"0 results"},
		"/ui/audit?since=nonsense":            {"since &#34;nonsense&#34;"},
		"/ui/events/ev-1":                     {"succeeded", "orders-0", "finished succeeded"},
		"/ui/events/ev-2?cluster=local":       {"no result yet", plan.ID, "waits for approval"},
		"/ui/dead":                            {"Dead letters"},
		"/ui/plans/local/" + "nope":           {"Not found"},
		"/ui/events/" + url.PathEscape("a b"): {"Not found"},
	} {
		resp, body := r.do(t, c, "GET", path, nil, nil)
		if resp.StatusCode != http.StatusOK && !strings.Contains(strings.Join(want, ""), "Not found") {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q:\n%s", path, w, body)
			}
		}
		if n := strings.Count(body, "step copying"); strings.HasPrefix(path, "/ui/events/ev-1") && n != 1 {
			t.Errorf("GET %s: the step written twice in a row is told %d times, want once", path, n)
		}
	}
}

// The live stream pushes the clusters' state, and ends when the console closes (the
// worker's HTTP server shuts down without waiting for it).
func TestLiveStream(t *testing.T) {
	r := newRig(t, nil)
	req, err := http.NewRequestWithContext(t.Context(), "GET", r.srv.URL+"/ui/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("GET /ui/live: %d %s", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "event: state" {
			break
		}
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	r.s.Close()
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil {
		t.Errorf("the stream ended with %v, want its end", err)
	}
}
