// Package alertmanager turns Alertmanager webhook notifications into kafkamender events:
// the worker serves it on POST /v1/alertmanager.
//
// Each firing alert is matched against the configured rules in order (alertname, then
// exact label values); the first rule that matches makes the event: its type, the cluster
// from a label, data fields from labels, the reason from the alert's summary. The event id
// is derived from the alert's fingerprint and startsAt, and is also the JetStream message
// id, so Alertmanager's repeated notifications of one firing are one event (stored once
// within the stream's ten-minute duplicate window, and never run twice after it: a second
// event with an id that ran gets its stored result replayed). Resolved alerts are ignored:
// a repair is not undone because the alert that asked for it stopped firing. An alert no
// rule matches is counted and logged, not an error. A payload that is not a webhook
// notification gets 400 with the reason, one over the size limit 413; NATS unreachable
// gets 503, which Alertmanager retries.
//
// The webhook changes clusters, so it is guarded as a door: a request without the
// configured credential (bearer token or basic authentication; a client certificate is
// checked by the listener's TLS) gets 401 and publishes nothing; a notification of more
// than max_alerts alerts gets 413, one more request than max_concurrent_requests or one
// whose events would pass events_per_second gets 503 (Alertmanager sends it again). Each
// alert's fingerprint must be the one Alertmanager computes from its labels, so that no
// caller can take an event id that belongs to another alert; each event is checked with
// the workers' own decoder, for a configured cluster, before it is published.
package alertmanager

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics"
)

// Path is where the worker takes webhook notifications.
const Path = "/v1/alertmanager"

// Notification is Alertmanager's webhook payload (version 4).
type Notification struct {
	Version  string  `json:"version"`
	GroupKey string  `json:"groupKey"`
	Status   string  `json:"status"`
	Receiver string  `json:"receiver"`
	Alerts   []Alert `json:"alerts"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Response is the bridge's answer: what became of each alert.
type Response struct {
	Published []Published `json:"published"`
	Resolved  int         `json:"resolved"`  // resolved alerts, ignored
	Unmatched int         `json:"unmatched"` // firing alerts no rule matched
	Invalid   []string    `json:"invalid,omitempty"`
}

// Published is an event made from an alert.
type Published struct {
	ID        string `json:"id"`
	Subject   string `json:"subject"`
	Alertname string `json:"alertname"`
	// Duplicate: the stream had stored this event already (a repeated notification).
	Duplicate bool `json:"duplicate,omitempty"`
}

// Publisher is the part of JetStream the bridge uses.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Bridge serves webhook notifications. Its configuration does not change after New.
type Bridge struct {
	cfg      config.Alertmanager
	clusters []string
	js       Publisher
	log      *zap.Logger
	metrics  *metrics.Metrics

	// token and basic are the SHA-256 of the credentials a request must carry (compared
	// in constant time, whatever their length); nil when none is configured.
	token, basic []byte
	slots        chan struct{} // one per request handled at once
	rate         *rate.Limiter // events published per second
}

// New builds a bridge that publishes events for the configured clusters with js, and
// counts alerts in m (nil: not counted).
func New(cfg config.Alertmanager, clusters []string, js Publisher, log *zap.Logger, m *metrics.Metrics) *Bridge {
	b := &Bridge{cfg: cfg, clusters: clusters, js: js, log: log, metrics: m,
		slots: make(chan struct{}, max(cfg.MaxConcurrentRequests, 1)),
		rate:  rate.NewLimiter(rate.Limit(cfg.EventsPerSecond), max(cfg.MaxAlerts, 1))}
	if cfg.EventsPerSecond <= 0 {
		b.rate = rate.NewLimiter(rate.Inf, 0)
	}
	if cfg.BearerToken.IsSet() {
		b.token = digest("Bearer " + cfg.BearerToken.Reveal())
	}
	if cfg.Username != "" {
		b.basic = digest(cfg.Username + ":" + cfg.Password.Reveal())
	}
	return b
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// authorized reports whether r carries a configured credential (any, when none is).
func (b *Bridge) authorized(r *http.Request) bool {
	if b.token == nil && b.basic == nil {
		return true
	}
	ok := false
	if b.token != nil {
		ok = subtle.ConstantTimeCompare(digest(r.Header.Get("Authorization")), b.token) == 1
	}
	if u, p, has := r.BasicAuth(); b.basic != nil && has {
		ok = subtle.ConstantTimeCompare(digest(u+":"+p), b.basic) == 1 || ok
	}
	return ok
}

// ServeHTTP takes one webhook notification.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !b.authorized(r) {
		b.metrics.WebhookRefused(metrics.WebhookUnauthorized)
		b.log.Warn("webhook request without a valid credential; refused", zap.String("remote", r.RemoteAddr))
		if b.basic != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="kafkamender"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kafkamender"`)
		}
		http.Error(w, "a credential is required (Authorization header)", http.StatusUnauthorized)
		return
	}
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	default:
		b.metrics.WebhookRefused(metrics.WebhookBusy)
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("%d notifications in hand already (alertmanager.max_concurrent_requests); send it again", cap(b.slots)), http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.cfg.MaxBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("payload over %d bytes", b.cfg.MaxBytes), http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		http.Error(w, "read payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	n, err := Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if b.cfg.MaxAlerts > 0 && len(n.Alerts) > b.cfg.MaxAlerts {
		b.metrics.WebhookRefused(metrics.WebhookTooMany)
		http.Error(w, fmt.Sprintf("%d alerts in one notification, more than alertmanager.max_alerts (%d): set Alertmanager's webhook_configs[].max_alerts to %d or less",
			len(n.Alerts), b.cfg.MaxAlerts, b.cfg.MaxAlerts), http.StatusRequestEntityTooLarge)
		return
	}
	// Every firing alert may become an event: reserve them all, or none (the notification
	// comes again). A notification that could never fit (more than the burst) is
	// refused by max_alerts above.
	if firing := n.firing(); firing > 0 {
		res := b.rate.ReserveN(time.Now(), firing)
		if !res.OK() || res.Delay() > time.Second {
			if res.OK() {
				res.Cancel()
			}
			b.metrics.WebhookRefused(metrics.WebhookRateLimited)
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("%d events would pass alertmanager.events_per_second (%g); send it again", firing, b.cfg.EventsPerSecond), http.StatusServiceUnavailable)
			return
		}
		select {
		case <-r.Context().Done():
			res.Cancel()
			return
		case <-time.After(res.Delay()):
		}
	}
	resp, err := b.Handle(r.Context(), n)
	if err != nil {
		b.log.Warn("alertmanager notification not published; Alertmanager will send it again", zap.Error(err))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// firing counts the firing alerts.
func (n *Notification) firing() int {
	c := 0
	for _, a := range n.Alerts {
		if a.Status == "firing" {
			c++
		}
	}
	return c
}

// Decode parses and checks a webhook payload.
func Decode(body []byte) (*Notification, error) {
	if err := events.CheckObject(body); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("payload is not an Alertmanager webhook notification: %w", err)
	}
	if n.Version != "4" {
		return nil, fmt.Errorf("payload: version %q, want \"4\" (Alertmanager's webhook format)", n.Version)
	}
	for i, a := range n.Alerts {
		switch {
		case a.Status != "firing" && a.Status != "resolved":
			return nil, fmt.Errorf("alerts[%d].status: %q, want firing or resolved", i, a.Status)
		case a.Labels["alertname"] == "":
			return nil, fmt.Errorf("alerts[%d].labels: no alertname", i)
		case a.Status == "firing" && a.StartsAt.IsZero():
			return nil, fmt.Errorf("alerts[%d].startsAt: missing", i)
		case a.Status == "firing" && !events.ValidToken(a.Fingerprint):
			return nil, fmt.Errorf("alerts[%d].fingerprint: %.64q is not a token", i, a.Fingerprint)
		case a.Status == "firing" && !events.ValidID(ID(a)):
			return nil, fmt.Errorf("alerts[%d].fingerprint: %d characters: the event id made of it would be over the limit of %d", i, len(a.Fingerprint), events.MaxIDLength)
		case a.Status == "firing" && a.Fingerprint != Fingerprint(a.Labels):
			// The event id is made of it: an id must belong to the alert whose labels
			// made it, not to whoever posts first.
			return nil, fmt.Errorf("alerts[%d].fingerprint: %q is not the fingerprint of its labels (Alertmanager's is %s)", i, a.Fingerprint, Fingerprint(a.Labels))
		}
	}
	return &n, nil
}

// Fingerprint is Alertmanager's fingerprint of an alert's labels (what its webhook sends as
// fingerprint): Prometheus's FNV-1a hash of the sorted label names and values, in hex.
func Fingerprint(labels map[string]string) string {
	ls := make(model.LabelSet, len(labels))
	for k, v := range labels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls.Fingerprint().String()
}

// Handle publishes the events of a notification's firing alerts. An error means NATS did
// not store one of them (the notification should come again).
func (b *Bridge) Handle(ctx context.Context, n *Notification) (*Response, error) {
	resp := &Response{Published: []Published{}}
	for _, a := range n.Alerts {
		name := a.Labels["alertname"]
		log := b.log.With(zap.String("alertname", name), zap.String("fingerprint", a.Fingerprint))
		if a.Status == "resolved" {
			resp.Resolved++
			b.metrics.Alert(metrics.AlertResolved)
			continue
		}
		rule, ok := b.match(a)
		if !ok {
			resp.Unmatched++
			b.metrics.Alert(metrics.AlertUnmatched)
			log.Info("alert matches no rule; ignored", zap.Any("labels", a.Labels))
			continue
		}
		env, cluster, err := b.event(a, rule)
		if err != nil {
			resp.Invalid = append(resp.Invalid, fmt.Sprintf("%s (%s): %v", name, a.Fingerprint, err))
			b.metrics.Alert(metrics.AlertInvalid)
			log.Warn("alert cannot become an event", zap.Error(err))
			continue
		}
		raw, err := marshal(env)
		if err != nil {
			return nil, err
		}
		subject := events.Subject(cluster, env.Type)
		header := nats.Header{"Content-Type": []string{events.ContentTypeCloudEventsJSON}}
		// What the workers would say of it, said now: nothing a worker would reject is
		// published, and never for a cluster no worker is configured for.
		if _, err := events.Decode(subject, header, raw, events.DecodeOptions{Clusters: b.clusters}); err != nil {
			resp.Invalid = append(resp.Invalid, fmt.Sprintf("%s (%s): %v", name, a.Fingerprint, err))
			b.metrics.Alert(metrics.AlertInvalid)
			log.Warn("alert makes an event the workers would reject; not published", zap.Error(err))
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ack, err := b.js.PublishMsg(pctx, &nats.Msg{Subject: subject, Data: raw, Header: header}, jetstream.WithMsgID(env.ID))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("publish the event of alert %s (%s) on %s: %w", name, a.Fingerprint, subject, err)
		}
		outcome := metrics.AlertPublished
		if ack.Duplicate {
			outcome = metrics.AlertDuplicate
		}
		b.metrics.Alert(outcome)
		log.Info("alert published as an event", zap.String("id", env.ID), zap.String("subject", subject), zap.Bool("duplicate", ack.Duplicate))
		resp.Published = append(resp.Published, Published{ID: env.ID, Subject: subject, Alertname: name, Duplicate: ack.Duplicate})
	}
	return resp, nil
}

// match returns the first rule that matches a.
func (b *Bridge) match(a Alert) (config.AlertRule, bool) {
	for _, r := range b.cfg.Rules {
		if a.Labels["alertname"] != r.Alertname {
			continue
		}
		ok := true
		for k, v := range r.Labels {
			if a.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return config.AlertRule{}, false
}

// ID is the event id of a firing alert: the same for every notification of one firing.
// Alertmanager's fingerprints have 16 characters, so its ids about 40; Decode refuses an
// alert whose id would be over events.MaxIDLength.
func ID(a Alert) string {
	return "am-" + a.Fingerprint + "-" + strconv.FormatInt(a.StartsAt.UnixNano(), 10)
}

// event makes the event of alert a by rule r, and names its cluster.
func (b *Bridge) event(a Alert, r config.AlertRule) (*events.Envelope, string, error) {
	cluster := a.Labels[r.ClusterLabel]
	if err := events.CheckClusterName(cluster); err != nil {
		return nil, "", fmt.Errorf("cluster label %q: %.64q is not a cluster name: %w", r.ClusterLabel, cluster, err)
	}
	data := map[string]any{}
	for field, label := range r.Fields {
		v, ok := a.Labels[label]
		if !ok {
			return nil, "", fmt.Errorf("label %q (for %s) missing", label, field)
		}
		kind, _ := events.DataField(r.Type, field)
		value, err := convert(kind, v)
		if err != nil {
			return nil, "", fmt.Errorf("label %q (for %s): %w", label, field, err)
		}
		data[field] = value
	}
	if _, set := r.Fields["reason"]; !set {
		reason := a.Annotations["summary"]
		if reason == "" {
			reason = a.Labels["alertname"]
		}
		data["reason"] = events.Reason("alertmanager: " + reason) // one line, within the limit
	}
	raw, err := marshal(data)
	if err != nil {
		return nil, "", err
	}
	return &events.Envelope{SpecVersion: events.SpecVersion, ID: ID(a), Source: b.cfg.Source, Type: r.Type,
		Time: a.StartsAt.UTC(), DataContentType: events.ContentTypeJSON, Data: raw}, cluster, nil
}

// marshal encodes v as JSON without HTML escaping: json.Marshal writes each <, > and & of
// a label or summary as six bytes, which can push an event past NATS's max_payload.
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// convert turns a label value into the JSON value of a data field of that kind.
func convert(kind events.FieldKind, v string) (any, error) {
	switch kind {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	case "boolean":
		t, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return t, nil
	case "[]string":
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	case "[]integer":
		var out []int64
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%q is not a comma-separated list of integers", v)
			}
			out = append(out, n)
		}
		return out, nil
	}
	return v, nil // string, duration
}
