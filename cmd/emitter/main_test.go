package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
)

var fixedNow = time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)

// testEnv returns a fixed environment and its output buffers.
func testEnv(vars map[string]string) (env, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return env{
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(k string) string { return vars[k] },
		now:    func() time.Time { return fixedNow },
		newID:  func() string { return "generated-id" },
		user:   func() string { return "alice" },
		host:   func() string { return "box" },
	}, &stdout, &stderr
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		e, stdout, _ := testEnv(nil)
		if code := run(t.Context(), args, e); code != exitOK {
			t.Errorf("%v: exit %d", args, code)
		}
		out := stdout.String()
		for _, want := range []string{
			"CloudEvents 1.0", "structured JSON mode",
			"kafkamender.events.<cluster>.<type>", "KAFKAMENDER_EVENTS",
			"emitter publish --cluster",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
		for _, typ := range events.Types() {
			if !strings.Contains(out, "    "+typ.Name+" ") {
				t.Errorf("%v: help does not list %s", args, typ.Name)
			}
		}
	}

	for _, args := range [][]string{{"publish", "--help"}, {"help", "publish"}} {
		e, stdout, _ := testEnv(nil)
		if code := run(t.Context(), args, e); code != exitOK {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, want := range []string{"Usage: emitter publish", "--cluster CLUSTER", "--expires-in DURATION", "--dry-run", "KAFKAMENDER_NATS_URL"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("%v: publish help lacks %q:\n%s", args, want, stdout)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	valid := []string{"--cluster", "local", "--type", "broker-overloaded", "--data", `{"broker":1}`}
	tests := []usageErrorTest{
		{"no command", nil, []string{"Usage:"}},
		{"unknown command", []string{"send"}, []string{`unknown command "send"`}},
		{"unknown flag", []string{"publish", "--topic", "x"}, []string{"flag provided but not defined: -topic"}},
		{"extra argument", append([]string{"publish"}, append(valid, "extra")...), []string{`unexpected arguments ["extra"]`}},
		{"nothing given", []string{"publish"}, []string{"--cluster is required", "--type is required", "--data is required"}},
		{"bad cluster", []string{"publish", "--cluster", "prod.eu", "--type", "broker-overloaded", "--data", "{}"},
			[]string{`--cluster "prod.eu": not a valid subject token`}},
		{"wildcard cluster", []string{"publish", "--cluster", "*", "--type", "broker-overloaded", "--data", "{}"},
			[]string{`--cluster "*": not a valid subject token`}},
		{"unknown type", []string{"publish", "--cluster", "local", "--type", "broker-down", "--data", "{}"},
			[]string{`--type "broker-down": unknown event type (want broker-overloaded, replica-change-requested, logdir-move-requested, broker-failed, broker-drain, broker-added, cluster-pause, cluster-resume, operation-cancel, plan-approved, plan-denied or partition-offline)`}},
		{"data not json", []string{"publish", "--cluster", "local", "--type", "broker-overloaded", "--data", "{broker:1}"},
			[]string{"--data: not valid JSON"}},
		{"data array", []string{"publish", "--cluster", "local", "--type", "broker-overloaded", "--data", "[1]"},
			[]string{"--data: want a JSON object, got an array"}},
		{"bad id", append([]string{"publish", "--id", "a.b"}, valid...), []string{`--id "a.b": not a valid subject token`}},
		{"bad expiry", append([]string{"publish", "--expires-in", "soon"}, valid...), []string{`invalid value "soon" for flag -expires-in`}},
		{"negative expiry", append([]string{"publish", "--expires-in", "-1m"}, valid...), []string{"--expires-in -1m0s: must be positive"}},
		{"zero timeout", append([]string{"publish", "--timeout", "0s"}, valid...), []string{"--timeout 0s: must be positive"}},
	}
	testUsageErrors(t, tests)
}

func TestParsePublishFlagsDefaults(t *testing.T) {
	args := []string{"--cluster", "local", "--type", "logdir-move-requested", "--data", `{"broker":1}`}

	e, _, _ := testEnv(nil)
	o, err := parsePublishFlags(args, e)
	if err != nil {
		t.Fatal(err)
	}
	want := publishOptions{
		cluster: "local", typ: "logdir-move-requested", data: `{"broker":1}`,
		id: "generated-id", source: "emitter/alice@box",
		natsURL: defaultNATSURL, timeout: 10 * time.Second,
	}
	if o != want {
		t.Errorf("options:\n got %+v\nwant %+v", o, want)
	}

	e, _, _ = testEnv(map[string]string{"KAFKAMENDER_NATS_URL": "nats://nats.example:4222"})
	if o, _ := parsePublishFlags(args, e); o.natsURL != "nats://nats.example:4222" {
		t.Errorf("nats url from env = %q", o.natsURL)
	}
	o, _ = parsePublishFlags(append(args, "--nats-url", "nats://flag:4222", "--id", "my-id", "--source", "me"), e)
	if o.natsURL != "nats://flag:4222" || o.id != "my-id" || o.source != "me" {
		t.Errorf("flags do not override defaults: %+v", o)
	}
}

// publish --print prints the event and publishes nothing; --dry-run, its earlier name on
// publish, still does, and warns.
func TestDryRun(t *testing.T) {
	e, stdout, stderr := testEnv(nil)
	code := run(context.Background(), []string{"publish", "--dry-run",
		"--cluster", "local", "--type", "replica-change-requested",
		"--data", `{"topic":"orders","partitions":[1],"preferred_leader":2}`,
		"--expires-in", "5m", "--nats-url", "nats://127.0.0.1:1",
	}, e)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var ev events.Envelope
	if err := json.Unmarshal(stdout.Bytes(), &ev); err != nil {
		t.Fatalf("stdout is not an event: %v\n%s", err, stdout)
	}
	if err := ev.Validate(); err != nil {
		t.Errorf("printed event invalid: %v", err)
	}
	wantTime := fixedNow.Truncate(time.Millisecond)
	if ev.ID != "generated-id" || ev.Source != "emitter/alice@box" || ev.Type != "replica-change-requested" ||
		!ev.Time.Equal(wantTime) || !ev.ExpiresAt.Equal(wantTime.Add(5*time.Minute)) ||
		ev.DataContentType != "application/json" || ev.SpecVersion != "1.0" {
		t.Errorf("event: %+v", ev)
	}
	if string(compact(t, ev.Data)) != `{"topic":"orders","partitions":[1],"preferred_leader":2}` {
		t.Errorf("data = %s", ev.Data)
	}
	if want := "not published to kafkamender.events.local.replica-change-requested"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q: %s", want, stderr)
	}
}

func TestBuildEnvelopeWithoutExpiry(t *testing.T) {
	ev := buildEnvelope(publishOptions{id: "i", source: "s", typ: events.TypeBrokerOverloaded, data: `{"broker":1}`}, fixedNow)
	if !ev.ExpiresAt.IsZero() {
		t.Errorf("expiresat set without --expires-in: %v", ev.ExpiresAt)
	}
	b, _ := json.Marshal(ev)
	if strings.Contains(string(b), "expiresat") {
		t.Errorf("expiresat in JSON: %s", b)
	}
}

func TestPublishUnreachable(t *testing.T) {
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"publish", "--cluster", "local", "--type", "broker-overloaded",
		"--data", `{"broker":1}`, "--nats-url", "nats://user:secret@127.0.0.1:1", "--timeout", "2s"}, e)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if !strings.Contains(stderr.String(), "connect to nats nats://user:xxxxx@127.0.0.1:1") || strings.Contains(stderr.String(), "secret") {
		t.Errorf("stderr: %s", stderr)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %s", stdout)
	}
}

func TestExplainPublishError(t *testing.T) {
	subj := "kafkamender.events.local.broker-overloaded"
	tests := []struct {
		err  error
		want string
	}{
		{jetstream.ErrNoStreamResponse, "no JetStream stream captures kafkamender.events.>: is a worker running?"},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10060, Description: "expected stream does not match"}),
			"stored by a stream other than KAFKAMENDER_EVENTS"},
		{context.DeadlineExceeded, "no acknowledgement in time"},
		{errors.New("boom"), "publish to " + subj + ": boom"},
	}
	for _, tt := range tests {
		got := explainPublishError(subj, tt.err)
		if !strings.Contains(got.Error(), tt.want) {
			t.Errorf("explainPublishError(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPublishPrintAndTheOldDryRun(t *testing.T) {
	for _, flagName := range []string{"--print", "--dry-run"} {
		e, stdout, stderr := testEnv(nil)
		code := run(context.Background(), []string{"publish", flagName, "--cluster", "local", "--type", "replica-change-requested",
			"--data", `{"topic":"orders","preferred_leader":2}`, "--nats-url", "nats://127.0.0.1:1"}, e)
		var ev events.Envelope
		if code != exitOK || json.Unmarshal(stdout.Bytes(), &ev) != nil || !strings.Contains(stderr.String(), "--print: event generated-id not published") {
			t.Errorf("%s: exit %d\n%s%s", flagName, code, stdout, stderr)
		}
		if deprecated := strings.Contains(stderr.String(), "--dry-run is deprecated here: use --print"); deprecated != (flagName == "--dry-run") {
			t.Errorf("%s: deprecation warning %v:\n%s", flagName, deprecated, stderr)
		}
	}
}
