package main

import (
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

func TestPauseUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"no reason", []string{"pause", "--cluster", "local"},
			[]string{"--reason is required: say why the automation is off", "Run 'emitter pause --help' for usage."}},
		{"no dry run", []string{"pause", "--cluster", "local", "--reason", "r", "--dry-run"},
			[]string{"--dry-run: a pause or a resume has no plan"}},
		{"until not a time", []string{"pause", "--cluster", "local", "--reason", "r", "--until", "tomorrow"},
			[]string{`--until "tomorrow": want an RFC 3339 time`}},
		{"until in the past", []string{"pause", "--cluster", "local", "--reason", "r", "--until", "2026-11-29T09:00:00Z"},
			[]string{"--until 2026-11-29T09:00:00Z: not in the future"}},
		{"until too far", []string{"pause", "--cluster", "local", "--reason", "r", "--until", "800h"},
			[]string{"--until 800h: more than 720h0m0s ahead"}},
		{"resume has no until", []string{"resume", "--cluster", "local", "--until", "1h"},
			[]string{"flag provided but not defined: -until"}},
	})
}

// TestPauseEventData checks the data of the events built, and that the workers' decoder
// accepts them.
func TestPauseEventData(t *testing.T) {
	for _, tt := range []struct {
		name, typ string
		args      []string
		want      string
	}{
		{"pause", events.TypeClusterPause, []string{"--cluster", "local", "--reason", "INC-42"}, `{"reason":"INC-42"}`},
		{"pause for a while", events.TypeClusterPause, []string{"--cluster", "local", "--reason", "window", "--until", "90m"},
			`{"reason":"window","until":"2026-11-29T11:30:00Z"}`},
		{"pause until a time", events.TypeClusterPause, []string{"--cluster", "local", "--reason", "window", "--until", "2026-11-29T12:00:00+01:00"},
			`{"reason":"window","until":"2026-11-29T11:00:00Z"}`},
		{"resume", events.TypeClusterResume, []string{"--cluster", "local"}, `{}`},
		{"resume with a reason", events.TypeClusterResume, []string{"--cluster", "local", "--reason", "fixed"}, `{"reason":"fixed"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resume := tt.typ == events.TypeClusterResume
			parse := func(args []string, e env) (pauseOptions, error) { return parsePauseFlags(args, e, resume) }
			build := func(o pauseOptions, now time.Time) (events.Envelope, string, []byte, error) { return o.build(now) }
			o, b := buildFromArgs(t, tt.args, parse, build)
			dec := b.decode(t, o.cluster, "kafkamender.events.local."+tt.typ, tt.want)
			if dec.Type != tt.typ {
				t.Errorf("type %s", dec.Type)
			}
		})
	}
}

func TestCancelUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"no id", []string{"cancel", "--cluster", "local"},
			[]string{"--id is required: the id of the event to cancel", "Run 'emitter cancel --help' for usage."}},
		{"bad id", []string{"cancel", "--cluster", "local", "--id", "a.b"},
			[]string{`--id "a.b"`}},
		{"no dry run", []string{"cancel", "--cluster", "local", "--id", "x", "--dry-run"},
			[]string{"--dry-run: a cancel has no plan"}},
	})
}

// The cancel's --id names the event to cancel; its own id is --cancel-id.
func TestCancelEventData(t *testing.T) {
	o, b := buildFromArgs(t, []string{"--cluster", "local", "--id", "rf-1", "--cancel-id", "c-1", "--reason", "INC-42"},
		parseCancelFlags, func(o cancelOptions, now time.Time) (events.Envelope, string, []byte, error) { return o.build(now) })
	dec := b.decode(t, o.cluster, "kafkamender.events.local.operation-cancel", `{"id":"rf-1","reason":"INC-42"}`)
	if dec.Type != events.TypeOperationCancel || dec.ID != "c-1" {
		t.Errorf("event %s %s", dec.Type, dec.ID)
	}
}
