package alertmanager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// rig is a bridge publishing to an in-process nats-server with the events stream.
type rig struct {
	t   *testing.T
	srv *server.Server
	js  jetstream.JetStream
	h   http.Handler
	reg *prometheus.Registry
}

func newRig(t *testing.T, maxBytes int64) *rig {
	return newRigWith(t, func(am *config.Alertmanager) {
		if maxBytes > 0 {
			am.MaxBytes = maxBytes
		}
	})
}

// newRigWith is newRig with the bridge's configuration changed by change.
func newRigWith(t *testing.T, change func(*config.Alertmanager)) *rig {
	t.Helper()
	srv, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The streams as the workers create them (no consumers: no clusters).
	pl, err := pipeline.New(nc, nil, pipeline.Config{Worker: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`nats: {url: "nats://127.0.0.1:4222"}
lock: {backend: nats}
clusters:
  local: {bootstrap_servers: ["127.0.0.1:19092"]}
alertmanager:
  rules:
    - alertname: KafkaBrokerOverloaded
      type: broker-overloaded
      fields: {broker: broker_id}
    - alertname: KafkaPartitionLeaderSkew
      labels: {severity: page}
      type: replica-change-requested
      fields: {topic: topic, partitions: partitions, preferred_leader: broker_id}
`))
	if err != nil {
		t.Fatal(err)
	}
	change(&cfg.Alertmanager)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := alertmanager.New(cfg.Alertmanager, cfg.ClusterNames(), js, zaptest.NewLogger(t), m)
	return &rig{t: t, srv: srv, js: js, h: b, reg: reg}
}

// post sends a payload and returns the status and body.
func (r *rig) post(body string) (int, string) {
	r.t.Helper()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, alertmanager.Path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// storedEvent returns the last event stored on subject, as the worker's decoder reads it
// (which must take it as it is), and its message.
func (r *rig) storedEvent(subject string) (*events.Event, *jetstream.RawStreamMsg) {
	r.t.Helper()
	s, err := r.js.Stream(r.t.Context(), events.EventsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(r.t.Context(), subject)
	if err != nil {
		r.t.Fatal(err)
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{Clusters: []string{"local"}})
	if err != nil {
		r.t.Fatalf("the worker would reject the event: %v\n%s", err, m.Data)
	}
	return ev, m
}

func (r *rig) stored() uint64 {
	r.t.Helper()
	return testenv.StreamMsgs(r.t, r.js, events.EventsStream)
}

// notification is a webhook payload of one alert, with the fingerprint Alertmanager
// computes from its labels.
func notification(status, alertname string, labels map[string]string) string {
	return notificationOf(status, alert(alertname, labels, ""))
}

// alert is one alert of a notification; fingerprint "" is that of its labels.
func alert(alertname string, labels map[string]string, fingerprint string) map[string]any {
	l := map[string]string{"alertname": alertname}
	for k, v := range labels {
		l[k] = v
	}
	if fingerprint == "" {
		fingerprint = alertmanager.Fingerprint(l)
	}
	return map[string]any{"labels": l, "annotations": map[string]string{"summary": "cpu 97% on broker 3"},
		"startsAt": "2026-12-01T10:00:00.123Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": fingerprint}
}

// notificationOf is a webhook payload of alerts, each with status.
func notificationOf(status string, alerts ...map[string]any) string {
	for _, a := range alerts {
		a["status"] = status
	}
	n := map[string]any{"version": "4", "groupKey": "{}:{}", "status": status, "receiver": "kafkamender", "alerts": alerts}
	raw, _ := json.Marshal(n)
	return string(raw)
}

func TestFiringAlertBecomesOneEvent(t *testing.T) {
	r := newRig(t, 0)
	body := notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"})
	code, out := r.post(body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, out)
	}
	var resp alertmanager.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Published) != 1 || resp.Published[0].Duplicate || resp.Published[0].Subject != "kafkamender.events.local.broker-overloaded" {
		t.Fatalf("response %s", out)
	}
	id := resp.Published[0].ID
	ev, m := r.storedEvent(resp.Published[0].Subject)
	p := ev.Payload.(*events.BrokerOverloaded)
	if ev.ID != id || *p.Broker != 3 || p.Reason != "alertmanager: cpu 97% on broker 3" || ev.Source != "alertmanager" {
		t.Errorf("event %+v, payload %+v", ev.Envelope, p)
	}
	if m.Header.Get(jetstream.MsgIDHeader) != id {
		t.Errorf("message id %q, want the event id %q", m.Header.Get(jetstream.MsgIDHeader), id)
	}

	// Alertmanager notifies again while the alert fires: the same event, not stored again.
	code, out = r.post(body)
	if code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) || !strings.Contains(out, id) {
		t.Fatalf("repeated notification: %d %s", code, out)
	}
	// Resolved: nothing.
	code, out = r.post(notification("resolved", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"}))
	if code != http.StatusOK || !strings.Contains(out, `"resolved":1`) || !strings.Contains(out, `"published":[]`) {
		t.Fatalf("resolved: %d %s", code, out)
	}
	// No rule: counted, not an error.
	code, out = r.post(notification("firing", "DiskFull", map[string]string{"cluster": "local"}))
	if code != http.StatusOK || !strings.Contains(out, `"unmatched":1`) {
		t.Fatalf("unmatched: %d %s", code, out)
	}
	// A rule's label matcher: the same alertname without severity=page matches nothing.
	code, out = r.post(notification("firing", "KafkaPartitionLeaderSkew", map[string]string{"cluster": "local", "topic": "orders", "partitions": "0,2", "broker_id": "2"}))
	if code != http.StatusOK || !strings.Contains(out, `"unmatched":1`) {
		t.Fatalf("label matcher: %d %s", code, out)
	}
	code, out = r.post(notification("firing", "KafkaPartitionLeaderSkew", map[string]string{"cluster": "local", "topic": "orders", "partitions": "0,2", "broker_id": "2", "severity": "page"}))
	if code != http.StatusOK || !strings.Contains(out, "replica-change-requested") {
		t.Fatalf("list field: %d %s", code, out)
	}
	if n := r.stored(); n != 2 {
		t.Errorf("%d events stored, want 2", n)
	}
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(`
# HELP kafkamender_alertmanager_alerts_total Alerts received on POST /v1/alertmanager, by outcome: published, duplicate, resolved, unmatched, invalid.
# TYPE kafkamender_alertmanager_alerts_total counter
kafkamender_alertmanager_alerts_total{outcome="duplicate"} 1
kafkamender_alertmanager_alerts_total{outcome="invalid"} 0
kafkamender_alertmanager_alerts_total{outcome="published"} 2
kafkamender_alertmanager_alerts_total{outcome="resolved"} 1
kafkamender_alertmanager_alerts_total{outcome="unmatched"} 2
`), "kafkamender_alertmanager_alerts_total"); err != nil {
		t.Error(err)
	}
}

func TestBadPayloads(t *testing.T) {
	r := newRig(t, 2048)
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"not json", "{", http.StatusBadRequest, "payload"},
		{"not an object", "[1]", http.StatusBadRequest, "payload"},
		{"wrong version", `{"version":"3","alerts":[]}`, http.StatusBadRequest, `version "3"`},
		{"bad status", `{"version":"4","alerts":[{"status":"pending","labels":{"alertname":"X"}}]}`, http.StatusBadRequest, "alerts[0].status"},
		{"no alertname", `{"version":"4","alerts":[{"status":"firing","labels":{},"startsAt":"2026-12-01T10:00:00Z","fingerprint":"ab"}]}`, http.StatusBadRequest, "no alertname"},
		{"too big", `{"version":"4","alerts":[` + strings.Repeat(" ", 4096) + `]}`, http.StatusRequestEntityTooLarge, "over 2048 bytes"},
	} {
		code, out := r.post(tc.body)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %q; want %d containing %q", tc.name, code, out, tc.code, tc.want)
		}
	}
	// A label that does not fit its field: reported, nothing published.
	code, out := r.post(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "three"}))
	if code != http.StatusOK || !strings.Contains(out, `label \"broker_id\" (for broker): \"three\" is not an integer`) {
		t.Errorf("invalid label: %d %s", code, out)
	}
	code, out = r.post(notification("firing", "KafkaBrokerOverloaded", map[string]string{"broker_id": "3"}))
	if code != http.StatusOK || !strings.Contains(out, `cluster label \"cluster\"`) {
		t.Errorf("no cluster label: %d %s", code, out)
	}
	code, out = r.post(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": strings.Repeat("c", 65), "broker_id": "3"}))
	if code != http.StatusOK || !strings.Contains(out, `65 characters, over the limit of 64`) {
		t.Errorf("cluster label over the limit: %d %s", code, out)
	}
	if n := r.stored(); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
	// NATS down: 503, so that Alertmanager sends it again.
	r.srv.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, alertmanager.Path,
		strings.NewReader(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"}))).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("NATS down: %d %s; want 503", rec.Code, rec.Body)
	}
}

// A fingerprint makes the event id: one too long for an event id is refused (Alertmanager's
// own have 16 characters), before it is compared with its labels'.
func TestFingerprintMakesAValidID(t *testing.T) {
	for _, tc := range []struct {
		fingerprint, want string
	}{
		{strings.Repeat("f", 105), "alerts[0].fingerprint: \"" + strings.Repeat("f", 105) + "\" is not the fingerprint of its labels"}, // am-<105>-<19 digits>: 128, long enough
		{strings.Repeat("f", 106), "alerts[0].fingerprint: 106 characters: the event id made of it would be over the limit of 128"},
	} {
		_, err := alertmanager.Decode([]byte(notificationOf("firing", alert("X", nil, tc.fingerprint))))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%d characters: err = %v, want %q", len(tc.fingerprint), err, tc.want)
		}
	}
	if !events.ValidID(alertmanager.ID(alertmanager.Alert{Fingerprint: strings.Repeat("f", 105), StartsAt: time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.UTC)})) {
		t.Error("an id of 128 characters is not valid")
	}
}

// An alert's summary becomes the event's reason as one line within the limit of a reason:
// the worker would reject a reason with a newline, or over 1024 characters.
func TestSummaryBecomesAValidReason(t *testing.T) {
	r := newRig(t, 0)
	summary := "cpu 97% on broker 3\nsee the runbook:\t" + strings.Repeat("x", 2000)
	body := strings.Replace(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"}),
		`"cpu 97% on broker 3"`, strconv.Quote(summary), 1)
	code, out := r.post(body)
	var resp alertmanager.Response
	if err := json.Unmarshal([]byte(out), &resp); code != http.StatusOK || err != nil || len(resp.Published) != 1 {
		t.Fatalf("%d %s", code, out)
	}
	ev, _ := r.storedEvent(resp.Published[0].Subject)
	reason := ev.Payload.(*events.BrokerOverloaded).Reason
	if want := "alertmanager: cpu 97% on broker 3 see the runbook: xxx"; !strings.HasPrefix(reason, want) || utf8.RuneCountInString(reason) != events.MaxTextLength {
		t.Errorf("reason %.80q… of %d characters, want %q… of %d", reason, utf8.RuneCountInString(reason), want, events.MaxTextLength)
	}
}
