package events

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func validEnvelope() Envelope {
	return Envelope{
		SpecVersion:     SpecVersion,
		ID:              "a1b2",
		Source:          "alertmanager/prod",
		Type:            TypeReplicaChangeRequested,
		Time:            time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		DataContentType: ContentTypeJSON,
		Data:            json.RawMessage(`{"topic":"orders","partitions":[1],"preferred_leader":2}`),
	}
}

func TestEnvelopeJSON(t *testing.T) {
	e := validEnvelope()
	got, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	// The example of docs/contract.md, byte for byte.
	want := `{"specversion":"1.0","id":"a1b2","source":"alertmanager/prod","type":"replica-change-requested",` +
		`"time":"2026-11-29T10:00:00Z","datacontenttype":"application/json",` +
		`"data":{"topic":"orders","partitions":[1],"preferred_leader":2}}`
	if string(got) != want {
		t.Errorf("marshal:\n got %s\nwant %s", got, want)
	}

	e.ExpiresAt = time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)
	got, err = json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"expiresat":"2026-11-29T10:05:00Z"`) {
		t.Errorf("expiresat missing: %s", got)
	}

	var back Envelope
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Time.Equal(e.Time) || !back.ExpiresAt.Equal(e.ExpiresAt) || back.ID != e.ID || back.Type != e.Type {
		t.Errorf("round trip: got %+v, want %+v", back, e)
	}
}

func TestEnvelopeOmitsUnsetOptionalAttributes(t *testing.T) {
	e := Envelope{SpecVersion: SpecVersion, ID: "x", Source: "s", Type: TypeBrokerOverloaded, Data: json.RawMessage(`{"broker":1}`)}
	got, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, attr := range []string{"time", "datacontenttype", "expiresat"} {
		if strings.Contains(string(got), `"`+attr+`"`) {
			t.Errorf("%s present although unset: %s", attr, got)
		}
	}
}

func TestEnvelopeValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Envelope)
		want   []string // substrings of the error; none = valid
	}{
		{name: "valid", modify: func(*Envelope) {}},
		{name: "no datacontenttype", modify: func(e *Envelope) { e.DataContentType = "" }},
		{name: "json with charset", modify: func(e *Envelope) { e.DataContentType = "application/json; charset=utf-8" }},
		{name: "specversion", modify: func(e *Envelope) { e.SpecVersion = "0.3" }, want: []string{`specversion: want "1.0", got "0.3"`}},
		{name: "no id", modify: func(e *Envelope) { e.ID = "" }, want: []string{"id: required"}},
		{name: "id not a token", modify: func(e *Envelope) { e.ID = "a.b" }, want: []string{`id: "a.b": not a valid subject token`}},
		{name: "no source", modify: func(e *Envelope) { e.Source = "" }, want: []string{"source: required"}},
		{name: "no type", modify: func(e *Envelope) { e.Type = "" }, want: []string{"type: required"}},
		{name: "unknown type", modify: func(e *Envelope) { e.Type = "foo" }, want: []string{`type: unknown event type "foo"`}},
		{name: "content type", modify: func(e *Envelope) { e.DataContentType = "text/plain" }, want: []string{`datacontenttype: want "application/json", got "text/plain"`}},
		{name: "no data", modify: func(e *Envelope) { e.Data = nil }, want: []string{"data: required"}},
		{name: "data array", modify: func(e *Envelope) { e.Data = json.RawMessage(`[1]`) }, want: []string{"data: want a JSON object, got an array"}},
		{name: "several", modify: func(e *Envelope) { e.ID = ""; e.Source = "" }, want: []string{"id: required", "source: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := validEnvelope()
			tt.modify(&e)
			err := e.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckObject(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = valid
	}{
		{in: `{}`},
		{in: ` {"a":1} `},
		{in: ``, want: "want a JSON object, got nothing"},
		{in: `[1,2]`, want: "got an array"},
		{in: `"s"`, want: "got a string"},
		{in: `12`, want: "got a number"},
		{in: `true`, want: "got a boolean"},
		{in: `null`, want: "got null"},
		{in: `{"a":}`, want: "not valid JSON"},
		{in: `{} {}`, want: "not valid JSON"},
	}
	for _, tt := range tests {
		err := CheckObject([]byte(tt.in))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckObject(%q) = %v, want nil", tt.in, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckObject(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestSubject(t *testing.T) {
	if got, want := Subject("local", TypeBrokerOverloaded), "kafkamender.events.local.broker-overloaded"; got != want {
		t.Errorf("Subject() = %q, want %q", got, want)
	}
}

func TestValidToken(t *testing.T) {
	for _, s := range []string{"local", "kraft", "prod-eu_1", "A9"} {
		if !ValidToken(s) {
			t.Errorf("ValidToken(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "a.b", "a b", "*", ">", "a>", "ü", "a/b"} {
		if ValidToken(s) {
			t.Errorf("ValidToken(%q) = true, want false", s)
		}
	}
}

func TestTypes(t *testing.T) {
	want := []string{"broker-overloaded", "replica-change-requested", "logdir-move-requested", "broker-failed", "broker-drain", "broker-added",
		"cluster-pause", "cluster-resume", "operation-cancel", "plan-approved", "plan-denied", "partition-offline"}
	types := Types()
	if len(types) != len(want) {
		t.Fatalf("Types() has %d entries, want %d", len(types), len(want))
	}
	for i, ti := range types {
		if ti.Name != want[i] || ti.Summary == "" || strings.Contains(ti.Summary, "\n") {
			t.Errorf("Types()[%d] = %+v", i, ti)
		}
		if !KnownType(ti.Name) || !ValidToken(ti.Name) {
			t.Errorf("type %q is not known or not a token", ti.Name)
		}
	}
	if KnownType("foo") {
		t.Error(`KnownType("foo") = true`)
	}
}

// The control events, taken by a consumer of their own ahead of the cluster's queue: the
// contract, the configuration's allowed_sources and the alert rules say which they are.
func TestControlTypes(t *testing.T) {
	want := []string{"cluster-pause", "cluster-resume", "operation-cancel"}
	if got := ControlTypes(); !slices.Equal(got, want) {
		t.Errorf("ControlTypes() = %v, want %v", got, want)
	}
	for _, ti := range Types() {
		if got := ControlType(ti.Name); got != slices.Contains(want, ti.Name) {
			t.Errorf("ControlType(%q) = %v", ti.Name, got)
		}
	}
	if ControlType("foo") {
		t.Error(`ControlType("foo") = true`)
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("NewID() = %q, not a version 4 UUID", id)
		}
		if !ValidToken(id) {
			t.Fatalf("NewID() = %q, not a subject token", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestDataField(t *testing.T) {
	for _, tc := range []struct {
		typ, field string
		want       FieldKind
		ok         bool
	}{
		{TypeBrokerOverloaded, "broker", "integer", true},
		{TypeBrokerOverloaded, "topics", "[]string", true},
		{TypeBrokerOverloaded, "demote_to_end", "boolean", true},
		{TypeBrokerOverloaded, "reason", "string", true},
		{TypeBrokerOverloaded, "nope", "", false},
		{TypeReplicaChangeRequested, "partitions", "[]integer", true},
		{TypeReplicaChangeRequested, "timeout", "duration", true},
		{TypeBrokerFailed, "rack", "string", true},
		{TypeBrokerDrain, "rack", "", false},
		{TypeBrokerAdded, "brokers", "[]integer", true},
		{TypeBrokerAdded, "broker", "integer", true},
		{TypePartitionOffline, "topic", "string", true},
		{TypePartitionOffline, "partitions", "[]integer", true},
		{TypePartitionOffline, "allow_unclean", "boolean", true},
		{TypePartitionOffline, "timeout", "", false},
		{TypePartitionOffline, "throttle_bytes_per_sec", "", false},
		{TypeClusterPause, "reason", "string", true},
		{TypeClusterPause, "until", "string", true},
		{TypeClusterPause, "dry_run", "", false},
		{TypeClusterResume, "reason", "string", true},
		{TypeClusterResume, "until", "", false},
		{TypeOperationCancel, "id", "string", true},
		{TypeOperationCancel, "reason", "string", true},
		{TypeOperationCancel, "cluster", "string", true},
		{TypeOperationCancel, "dry_run", "", false},
		{TypeOperationCancel, "event", "", false},
		{"no-such-type", "broker", "", false},
	} {
		got, ok := DataField(tc.typ, tc.field)
		if got != tc.want || ok != tc.ok {
			t.Errorf("DataField(%s, %s) = %q, %v; want %q, %v", tc.typ, tc.field, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tt := range []struct {
		filter, subject string
		want            bool
	}{
		{"kafkamender.events.>", "kafkamender.events.c.replica-change-requested", true},
		{"kafkamender.events.*.replica-change-requested", "kafkamender.events.c.replica-change-requested", true},
		{"kafkamender.events.c.replica-change-requested", "kafkamender.events.c.replica-change-requested", true},
		{"kafkamender.events.d.>", "kafkamender.events.c.replica-change-requested", false},
		{"kafkamender.events.*", "kafkamender.events.c.replica-change-requested", false},
		{"kafkamender.events.c.replica-change-requested.>", "kafkamender.events.c.replica-change-requested", false},
		{">", "a", true},
	} {
		if got := SubjectMatches(tt.filter, tt.subject); got != tt.want {
			t.Errorf("SubjectMatches(%q, %q) = %v", tt.filter, tt.subject, got)
		}
	}
}
