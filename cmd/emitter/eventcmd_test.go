package main

// Test scaffolding that the tests of the event commands (preferred-leader,
// broker-overloaded, replication-factor) and of publish share.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// parseFlags parses and checks args, the flags of the command whose options are o, as
// the emitter does (normalizeFlags, then the command built by newCommand), without
// running the command: it returns the checked options, or the usageError.
func parseFlags[O any, P interface {
	*O
	command
}](o O, args []string, e env) (O, error) {
	code := exitOK
	cmd := newCommand("test", "", func(io.Writer, *pflag.FlagSet) {}, parseOnly{P(&o)}, e, &code)
	cmd.SetArgs(normalizeFlags(cmd.Flags(), args))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return o, err
}

// parseOnly is a command that does not run.
type parseOnly struct{ command }

func (parseOnly) run(context.Context, env, string) int { return exitOK }

// The flag parsers of the commands, for the tests.
func parsePublishFlags(args []string, e env) (publishOptions, error) {
	return parseFlags(publishOptions{}, args, e)
}

func parsePreferredFlags(args []string, e env) (preferredOptions, error) {
	return parseFlags(preferredOptions{}, args, e)
}

func parseOverloadedFlags(args []string, e env) (overloadedOptions, error) {
	return parseFlags(overloadedOptions{}, args, e)
}

func parseRFFlags(args []string, e env) (rfOptions, error) {
	return parseFlags(rfOptions{}, args, e)
}

func parseLogDirFlags(args []string, e env) (logDirOptions, error) {
	return parseFlags(logDirOptions{}, args, e)
}

func parseBrokerFailedFlags(args []string, e env) (brokerFailedOptions, error) {
	return parseFlags(brokerFailedOptions{}, args, e)
}

func parseBrokerDrainFlags(args []string, e env) (brokerDrainOptions, error) {
	return parseFlags(brokerDrainOptions{}, args, e)
}

func parseBrokerAddedFlags(args []string, e env) (brokerAddedOptions, error) {
	return parseFlags(brokerAddedOptions{}, args, e)
}

func parsePartitionOfflineFlags(args []string, e env) (partitionOfflineOptions, error) {
	return parseFlags(partitionOfflineOptions{}, args, e)
}

func parsePauseFlags(args []string, e env, resume bool) (pauseOptions, error) {
	return parseFlags(pauseOptions{resume: resume}, args, e)
}

func parseCancelFlags(args []string, e env) (cancelOptions, error) {
	return parseFlags(cancelOptions{}, args, e)
}

func parseDecisionFlags(args []string, e env, deny bool) (decisionOptions, error) {
	return parseFlags(decisionOptions{deny: deny}, args, e)
}

func parseResultFlags(args []string, e env) (resultOptions, error) {
	return parseFlags(resultOptions{}, args, e)
}

// parseTest is a command line (flags only) and the options it parses to.
type parseTest[O any] struct {
	name string
	args []string
	want O
}

// testParse parses the command line of each test with parse, and wants no
// error and the options of the test.
func testParse[O any](t *testing.T, parse func([]string, env) (O, error), tests []parseTest[O]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, _ := testEnv(nil)
			got, err := parse(tt.args, e)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("options:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// usageErrorTest is a command line that run refuses, and what it says on
// stderr.
type usageErrorTest struct {
	name string
	args []string
	want []string
}

// testUsageErrors runs the command line of each test, and wants exit status
// exitUsage, every string of the test's want on stderr and nothing on stdout.
func testUsageErrors(t *testing.T, tests []usageErrorTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stdout, stderr := testEnv(nil)
			if code := run(t.Context(), tt.args, e); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout)
			}
		})
	}
}

// eventDataTest is a command line (flags only) and the data (compact JSON) of
// the event it asks for.
type eventDataTest struct {
	name string
	args []string
	want string
}

// builtEvent is an event as an event command builds it.
type builtEvent struct {
	ev      events.Envelope
	subject string
	body    []byte
}

// buildFromArgs parses args with parse and builds the event with build, at
// fixedNow. It fails the test on an error.
func buildFromArgs[O any](t *testing.T, args []string, parse func([]string, env) (O, error),
	build func(O, time.Time) (events.Envelope, string, []byte, error)) (O, builtEvent) {
	t.Helper()
	e, _, _ := testEnv(nil)
	o, err := parse(args, e)
	if err != nil {
		t.Fatal(err)
	}
	var b builtEvent
	b.ev, b.subject, b.body, err = build(o, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	return o, b
}

// decode checks that the event's data (compacted) is wantData and its subject
// wantSubject, and decodes it as a worker of cluster does; it fails the test
// if the worker would reject it.
func (b builtEvent) decode(t *testing.T, cluster, wantSubject, wantData string) *events.Event {
	t.Helper()
	if got := string(compact(t, b.ev.Data)); got != wantData {
		t.Errorf("data:\n got %s\nwant %s", got, wantData)
	}
	if b.subject != wantSubject {
		t.Errorf("subject %q, want %q", b.subject, wantSubject)
	}
	dec, err := events.Decode(b.subject, nil, b.body, events.DecodeOptions{Clusters: []string{cluster}})
	if err != nil {
		t.Fatalf("a worker would reject the event: %v", err)
	}
	return dec
}

// printEvent runs the command line args (with --print), wants exit status
// exitOK, and returns the event printed on stdout, and stderr.
func printEvent(t *testing.T, args []string) (events.Envelope, *bytes.Buffer) {
	t.Helper()
	e, stdout, stderr := testEnv(nil)
	if code := run(t.Context(), args, e); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var ev events.Envelope
	if err := json.Unmarshal(stdout.Bytes(), &ev); err != nil {
		t.Fatalf("stdout is not an event: %v\n%s", err, stdout)
	}
	return ev, stderr
}

// checkPrintedEvent checks the envelope of an event printed by --print with
// --expires-in 5m, and that stderr says it was not published to subject.
func checkPrintedEvent(t *testing.T, ev events.Envelope, stderr *bytes.Buffer, typ, subject string) {
	t.Helper()
	wantTime := fixedNow.Truncate(time.Millisecond)
	if ev.ID != "generated-id" || ev.Type != typ || ev.SpecVersion != "1.0" ||
		!ev.Time.Equal(wantTime) || !ev.ExpiresAt.Equal(wantTime.Add(5*time.Minute)) {
		t.Errorf("event: %+v", ev)
	}
	if want := "--print: event generated-id not published to " + subject; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q: %s", want, stderr)
	}
}

// helpTest is a command line that asks for help, and what the help says.
type helpTest struct {
	args []string
	want []string
}

// testHelp runs the command line of each test, and wants exit status exitOK
// and every string of the test's want on stdout. If more is not nil, it
// checks stdout further.
func testHelp(t *testing.T, tests []helpTest, more func(args []string, stdout string)) {
	t.Helper()
	for _, tt := range tests {
		e, stdout, stderr := testEnv(nil)
		if code := run(t.Context(), tt.args, e); code != exitOK {
			t.Errorf("%v: exit %d; stderr: %s", tt.args, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: help lacks %q:\n%s", tt.args, w, stdout)
			}
		}
		if more != nil {
			more(tt.args, stdout.String())
		}
	}
}
