package alertmanager_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
)

// postWith sends a payload with an Authorization header ("" none).
func (r *rig) postWith(auth, body string) (int, string) {
	r.t.Helper()
	req := httptest.NewRequest(http.MethodPost, alertmanager.Path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// A request without the configured credential gets 401 and publishes nothing; with it,
// the alert is published.
func TestWebhookNeedsItsCredential(t *testing.T) {
	body := notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"})
	for _, tc := range []struct {
		name   string
		set    func(*config.Alertmanager)
		denied []string
		good   string
	}{
		{"bearer token", func(am *config.Alertmanager) { am.BearerToken = "t0ken" },
			[]string{"", "Bearer t0ke", "Bearer t0ken2", "bearer t0ken", "t0ken", basic("x", "t0ken")}, "Bearer t0ken"},
		{"basic authentication", func(am *config.Alertmanager) { am.Username, am.Password = "am", "pw" },
			[]string{"", basic("am", "p"), basic("AM", "pw"), basic("am", "pw2"), "Bearer pw"}, basic("am", "pw")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigWith(t, tc.set)
			for _, auth := range tc.denied {
				if code, out := r.postWith(auth, body); code != http.StatusUnauthorized {
					t.Errorf("Authorization %q: %d %s, want 401", auth, code, out)
				}
			}
			if n := r.stored(); n != 0 {
				t.Fatalf("%d events stored without the credential", n)
			}
			if code, out := r.postWith(tc.good, body); code != http.StatusOK || !strings.Contains(out, `"published":[{`) {
				t.Fatalf("with the credential: %d %s", code, out)
			}
			if n := r.stored(); n != 1 {
				t.Errorf("%d events stored, want 1", n)
			}
			if v := r.refused("unauthorized"); v != float64(len(tc.denied)) {
				t.Errorf("kafkamender_webhook_refused_total{reason=unauthorized} = %v, want %d", v, len(tc.denied))
			}
		})
	}
}

// refused is kafkamender_webhook_refused_total{reason}.
func (r *rig) refused(reason string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kafkamender_webhook_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// One notification cannot make more events than max_alerts, nor more per second than
// events_per_second: it is refused whole, nothing published.
func TestWebhookLimits(t *testing.T) {
	r := newRigWith(t, func(am *config.Alertmanager) { am.MaxAlerts, am.EventsPerSecond = 3, 0.5 })
	alerts := func(n, from int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, alert("KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": fmt.Sprint(from + i)}, ""))
		}
		return out
	}
	code, out := r.post(notificationOf("firing", alerts(4, 1)...))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(out, "4 alerts in one notification, more than alertmanager.max_alerts (3)") {
		t.Fatalf("4 alerts: %d %s", code, out)
	}
	// The burst (3) passes at once; three more would wait 6s: refused, sent again later.
	if code, out = r.post(notificationOf("firing", alerts(3, 1)...)); code != http.StatusOK {
		t.Fatalf("3 alerts: %d %s", code, out)
	}
	code, out = r.post(notificationOf("firing", alerts(3, 10)...))
	if code != http.StatusServiceUnavailable || !strings.Contains(out, "events_per_second") {
		t.Fatalf("3 more at once: %d %s", code, out)
	}
	// Resolved alerts make no event: not held back.
	if code, out = r.post(notificationOf("resolved", alerts(3, 10)...)); code != http.StatusOK {
		t.Fatalf("resolved: %d %s", code, out)
	}
	if n := r.stored(); n != 3 {
		t.Errorf("%d events stored, want 3", n)
	}
}

// blockingPublisher holds every publish until released.
type blockingPublisher struct {
	in      chan struct{}
	release chan struct{}
}

func (p *blockingPublisher) PublishMsg(ctx context.Context, _ *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	p.in <- struct{}{}
	select {
	case <-p.release:
		return &jetstream.PubAck{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Requests beyond max_concurrent_requests get 503 at once, while the others are in hand.
func TestWebhookConcurrency(t *testing.T) {
	cfg, err := config.Parse([]byte("nats: {url: \"nats://127.0.0.1:4222\"}\nlock: {backend: nats}\nclusters:\n  local: {bootstrap_servers: [\"127.0.0.1:19092\"]}\n" +
		"alertmanager:\n  max_concurrent_requests: 2\n  rules:\n    - {alertname: KafkaBrokerOverloaded, type: broker-overloaded, fields: {broker: broker_id}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pub := &blockingPublisher{in: make(chan struct{}), release: make(chan struct{})}
	b := alertmanager.New(cfg.Alertmanager, cfg.ClusterNames(), pub, zaptest.NewLogger(t), nil)
	post := func(broker int) int {
		rec := httptest.NewRecorder()
		b.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, alertmanager.Path,
			strings.NewReader(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": fmt.Sprint(broker)}))))
		return rec.Code
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() { codes[i] = post(i + 1) })
		<-pub.in // in hand
	}
	if code := post(3); code != http.StatusServiceUnavailable {
		t.Errorf("a third request at once: %d, want 503", code)
	}
	close(pub.release)
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Errorf("the two in hand: %v, want 200s", codes)
	}
}

// An alert whose fingerprint is not that of its labels is refused: the event id is made
// of the fingerprint, and must belong to the alert that made it, not to whoever posts
// first. HTML in a summary is published as it is, not escaped; an alert for a cluster no
// worker is configured for publishes nothing.
func TestWebhookPublishesOnlyWhatItShould(t *testing.T) {
	r := newRig(t, 0)
	real := map[string]string{"cluster": "local", "broker_id": "3"}
	squat := alert("KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "1"}, alertmanager.Fingerprint(map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": "local", "broker_id": "3"}))
	code, out := r.post(notificationOf("firing", squat))
	if code != http.StatusBadRequest || !strings.Contains(out, "is not the fingerprint of its labels") {
		t.Fatalf("a fingerprint of other labels: %d %s", code, out)
	}
	a := alert("KafkaBrokerOverloaded", real, "")
	a["annotations"] = map[string]string{"summary": "<b>broker 3</b> & more"}
	if code, out = r.post(notificationOf("firing", a)); code != http.StatusOK {
		t.Fatalf("the real alert: %d %s", code, out)
	}
	s, err := r.js.Stream(t.Context(), events.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), "kafkamender.events.local.broker-overloaded")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `"reason":"alertmanager: <b>broker 3</b> & more"`) {
		t.Errorf("event %s: want the summary unescaped", m.Data)
	}
	code, out = r.post(notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "elsewhere", "broker_id": "3"}))
	if code != http.StatusOK || !strings.Contains(out, `unknown cluster \"elsewhere\"`) || !strings.Contains(out, `"published":[]`) {
		t.Errorf("unknown cluster: %d %s", code, out)
	}
	if n := r.stored(); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
}
