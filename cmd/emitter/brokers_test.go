package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// copyDefaults are the shared options the broker commands parse to from --cluster local
// alone: --timeout is the longer one of copies.
var copyDefaults = eventOptions{
	cluster: "local", timeout: defaultRFWaitTimeout, output: outputTable,
	id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
}

func TestParseBrokerFailedFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--broker", "3"}
	defaults := brokerFailedOptions{eventOptions: copyDefaults, broker: 3}
	with := func(f func(*brokerFailedOptions)) brokerFailedOptions {
		o := defaults
		f(&o)
		return o
	}
	testParse(t, parseBrokerFailedFlags, []parseTest[brokerFailedOptions]{
		{"broker only", base, defaults},
		{"broker 0", []string{"--cluster", "local", "--broker", "0"}, with(func(o *brokerFailedOptions) { o.broker = 0 })},
		{"everything", append(base, "--rack", "eu-west-1a", "--throttle", "50MiB", "--timeout-op", "4h", "--dry-run",
			"--reason", "host gone", "--wait", "--timeout", "5h", "-o", "json", "--id", "bf-1", "--source", "me"),
			with(func(o *brokerFailedOptions) {
				o.rack, o.throttle, o.opTimeout, o.dryRun, o.reason = "eu-west-1a", 50<<20, 4*time.Hour, true, "host gone"
				o.wait, o.timeout, o.output, o.id, o.source = true, 5*time.Hour, outputJSON, "bf-1", "me"
			})},
	})
}

func TestParseBrokerDrainFlags(t *testing.T) {
	base := []string{"--cluster", "local", "--broker", "2"}
	defaults := brokerDrainOptions{eventOptions: copyDefaults, broker: 2}
	with := func(f func(*brokerDrainOptions)) brokerDrainOptions {
		o := defaults
		f(&o)
		return o
	}
	testParse(t, parseBrokerDrainFlags, []parseTest[brokerDrainOptions]{
		{"broker only", base, defaults},
		{"throttled and bounded", append(base, "--throttle", "1MB", "--timeout-op", "90m", "--print"),
			with(func(o *brokerDrainOptions) { o.throttle, o.opTimeout, o.print = 1000*1000, 90*time.Minute, true })},
	})
}

func TestParseBrokerAddedFlags(t *testing.T) {
	defaults := brokerAddedOptions{eventOptions: copyDefaults}
	with := func(f func(*brokerAddedOptions)) brokerAddedOptions {
		o := defaults
		f(&o)
		return o
	}
	testParse(t, parseBrokerAddedFlags, []parseTest[brokerAddedOptions]{
		{"one broker", []string{"--cluster", "local", "--broker", "4"},
			with(func(o *brokerAddedOptions) { o.brokers = []int32{4} })},
		{"repeated and listed brokers keep their order", []string{"--cluster", "local", "--broker", "6", "--brokers", "4, 5", "--broker", "0"},
			with(func(o *brokerAddedOptions) { o.brokers = []int32{6, 4, 5, 0} })},
		{"everything", []string{"--cluster", "local", "--brokers", "4,5", "--throttle", "20MiB", "--timeout-op", "3h", "--dry-run", "--reason", "rack c"},
			with(func(o *brokerAddedOptions) {
				o.brokers, o.throttle, o.opTimeout, o.dryRun, o.reason = []int32{4, 5}, 20<<20, 3*time.Hour, true, "rack c"
			})},
	})
}

func TestBrokerCommandsUsageErrors(t *testing.T) {
	var many []string
	for i := range events.MaxListedBrokers + 1 {
		many = append(many, strconv.Itoa(i))
	}
	tests := []usageErrorTest{
		{"failed: nothing given", []string{"broker-failed"},
			[]string{"--cluster is required", "--broker is required", "Run 'emitter broker-failed --help' for usage."}},
		{"failed: negative broker", []string{"broker-failed", "--cluster", "local", "--broker", "-1"},
			[]string{"--broker -1: not a broker id (want 0 or more)"}},
		{"failed: broker not a number", []string{"broker-failed", "--cluster", "local", "--broker", "three"},
			[]string{`invalid value "three" for flag -broker: "three" is not an integer`}},
		{"failed: zero throttle", []string{"broker-failed", "--cluster", "local", "--broker", "3", "--throttle", "0"},
			[]string{"--throttle: must be at least 1 byte per second"}},
		{"failed: bad operation timeout", []string{"broker-failed", "--cluster", "local", "--broker", "3", "--timeout-op", "-1m"},
			[]string{"--timeout-op -1m0s: must be positive"}},
		{"failed: no list of brokers", []string{"broker-failed", "--cluster", "local", "--brokers", "3,4"},
			[]string{"flag provided but not defined: -brokers"}},
		{"drain: nothing given", []string{"broker-drain"},
			[]string{"--cluster is required", "--broker is required", "Run 'emitter broker-drain --help' for usage."}},
		{"drain: no rack", []string{"broker-drain", "--cluster", "local", "--broker", "2", "--rack", "a"},
			[]string{"flag provided but not defined: -rack"}},
		{"drain: every problem at once", []string{"broker-drain", "--cluster", "a b", "--broker", "-2", "--throttle", "0",
			"--timeout-op", "0s", "--print", "--wait"},
			[]string{`--cluster "a b"`, "--broker -2: not a broker id", "--throttle: must be at least 1 byte per second",
				"--timeout-op 0s: must be positive", "--print and --wait exclude each other"}},
		{"added: nothing given", []string{"broker-added"},
			[]string{"--cluster is required", "--broker is required (or --brokers)", "Run 'emitter broker-added --help' for usage."}},
		{"added: negative broker", []string{"broker-added", "--cluster", "local", "--brokers", "4,-1"},
			[]string{"--broker -1: not a broker id (want 0 or more)"}},
		{"added: broker given twice", []string{"broker-added", "--cluster", "local", "--broker", "4", "--brokers", "5,4,4"},
			[]string{"--broker 4: given more than once"}},
		{"added: empty entry", []string{"broker-added", "--cluster", "local", "--brokers", "4,,5"},
			[]string{`invalid value "4,,5" for flag -brokers: empty broker id in "4,,5"`}},
		{"added: not a number", []string{"broker-added", "--cluster", "local", "--broker", "x"},
			[]string{`invalid value "x" for flag -broker: "x" is not a broker id`}},
		{"added: beyond int32", []string{"broker-added", "--cluster", "local", "--broker", "2147483648"},
			[]string{`invalid value "2147483648" for flag -broker`}},
		{"added: over the cap", []string{"broker-added", "--cluster", "local", "--brokers", strings.Join(many, ",")},
			[]string{"--broker: 1001 brokers, over the limit of 1000"}},
		{"added: zero throttle", []string{"broker-added", "--cluster", "local", "--broker", "4", "--throttle", "0B"},
			[]string{"--throttle: must be at least 1 byte per second"}},
	}
	testUsageErrors(t, tests)

	// Each repeated broker is reported once, however often it repeats.
	e, _, stderr := testEnv(nil)
	run(t.Context(), []string{"broker-added", "--cluster", "local", "--brokers", "4,4,4,4"}, e)
	if n := strings.Count(stderr.String(), "--broker 4: given more than once"); n != 1 {
		t.Errorf("reported %d times:\n%s", n, stderr)
	}
}

// TestBrokerCommandsEventData checks the data of the events built for typical flag sets,
// and that the workers' decoder accepts them.
func TestBrokerCommandsEventData(t *testing.T) {
	t.Run("broker-failed", func(t *testing.T) {
		for _, tt := range []eventDataTest{
			{"broker only", []string{"--cluster", "local", "--broker", "3"}, `{"broker":3}`},
			{"broker 0 is a broker", []string{"--cluster", "local", "--broker", "0"}, `{"broker":0}`},
			{"everything", []string{"--cluster", "local", "--broker", "3", "--rack", "eu-west-1a", "--throttle", "50MiB",
				"--timeout-op", "4h", "--dry-run", "--reason", "gone"},
				`{"broker":3,"rack":"eu-west-1a","throttle_bytes_per_sec":52428800,"timeout":"4h0m0s","dry_run":true,"reason":"gone"}`},
			{"flags of the emitter stay out of the data", []string{"--cluster", "local", "--broker", "3", "--wait", "--timeout", "5s",
				"-o", "json", "--id", "x", "--source", "s", "--expires-in", "1m"}, `{"broker":3}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				o, b := buildFromArgs(t, tt.args, parseBrokerFailedFlags, buildBrokerFailedEvent)
				dec := b.decode(t, o.cluster, "kafkamender.events.local.broker-failed", tt.want)
				p := dec.Payload.(*events.BrokerFailed)
				if dec.Type != events.TypeBrokerFailed || *p.Broker != o.broker || p.Rack != o.rack || p.ThrottleBytesPerSec != o.throttle ||
					p.Timeout.Duration != o.opTimeout || p.DryRun != o.dryRun || p.Reason != o.reason {
					t.Errorf("decoded %s payload: %+v", dec.Type, p)
				}
			})
		}
	})
	t.Run("broker-drain", func(t *testing.T) {
		for _, tt := range []eventDataTest{
			{"broker only", []string{"--cluster", "local", "--broker", "2"}, `{"broker":2}`},
			{"everything", []string{"--cluster", "local", "--broker", "2", "--throttle", "1000", "--timeout-op", "30m", "--dry-run", "--reason", "maintenance"},
				`{"broker":2,"throttle_bytes_per_sec":1000,"timeout":"30m0s","dry_run":true,"reason":"maintenance"}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				o, b := buildFromArgs(t, tt.args, parseBrokerDrainFlags, buildBrokerDrainEvent)
				dec := b.decode(t, o.cluster, "kafkamender.events.local.broker-drain", tt.want)
				p := dec.Payload.(*events.BrokerDrain)
				if dec.Type != events.TypeBrokerDrain || *p.Broker != o.broker || p.ThrottleBytesPerSec != o.throttle ||
					p.Timeout.Duration != o.opTimeout || p.DryRun != o.dryRun || p.Reason != o.reason {
					t.Errorf("decoded %s payload: %+v", dec.Type, p)
				}
			})
		}
	})
	t.Run("broker-added", func(t *testing.T) {
		for _, tt := range []eventDataTest{
			{"one broker is broker", []string{"--cluster", "local", "--broker", "4"}, `{"broker":4}`},
			{"one listed broker is broker", []string{"--cluster", "local", "--brokers", "0"}, `{"broker":0}`},
			{"several are brokers, in their order", []string{"--cluster", "local", "--broker", "6", "--brokers", "4,5"}, `{"brokers":[6,4,5]}`},
			{"everything", []string{"--cluster", "local", "--brokers", "4,5", "--throttle", "20MiB", "--timeout-op", "3h", "--dry-run", "--reason", "rack c"},
				`{"brokers":[4,5],"throttle_bytes_per_sec":20971520,"timeout":"3h0m0s","dry_run":true,"reason":"rack c"}`},
		} {
			t.Run(tt.name, func(t *testing.T) {
				o, b := buildFromArgs(t, tt.args, parseBrokerAddedFlags, buildBrokerAddedEvent)
				dec := b.decode(t, o.cluster, "kafkamender.events.local.broker-added", tt.want)
				p := dec.Payload.(*events.BrokerAdded)
				if dec.Type != events.TypeBrokerAdded || !slices.Equal(p.Added(), o.brokers) || p.ThrottleBytesPerSec != o.throttle ||
					p.Timeout.Duration != o.opTimeout || p.DryRun != o.dryRun || p.Reason != o.reason {
					t.Errorf("decoded %s payload: %+v", dec.Type, p)
				}
			})
		}
	})
}

func TestBrokerCommandsPrint(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		typ, data string
	}{
		{[]string{"broker-failed", "--broker", "3", "--rack", "r1"}, events.TypeBrokerFailed, `{"broker":3,"rack":"r1"}`},
		{[]string{"broker-drain", "--broker", "2", "--throttle", "1KiB"}, events.TypeBrokerDrain, `{"broker":2,"throttle_bytes_per_sec":1024}`},
		{[]string{"broker-added", "--brokers", "4,5", "--dry-run"}, events.TypeBrokerAdded, `{"brokers":[4,5],"dry_run":true}`},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			ev, stderr := printEvent(t, append(tc.args, "--print", "--cluster", "local", "--expires-in", "5m", "--nats-url", "nats://127.0.0.1:1"))
			checkPrintedEvent(t, ev, stderr, tc.typ, "kafkamender.events.local."+tc.typ)
			if got := string(compact(t, ev.Data)); got != tc.data {
				t.Errorf("data %s, want %s", got, tc.data)
			}
		})
	}
}

// A rack the workers would refuse is reported, and nothing is published.
func TestBrokerFailedRejectedRack(t *testing.T) {
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"broker-failed", "--print", "--cluster", "local", "--broker", "3", "--rack", "a\nb"}, e)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if want := "data.rack: a control character (U+000A) at byte 1"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %s", stdout)
	}
}

func TestBrokerCommandsHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"--help"}, []string{
			"emitter broker-failed --cluster CLUSTER --broker ID [flags]",
			"emitter broker-drain --cluster CLUSTER --broker ID [flags]",
			"emitter broker-added --cluster CLUSTER --broker ID [--broker ID...] [flags]",
			"    broker-failed     recreate on the other brokers every replica",
			"    broker-drain      empty a live broker",
			"    broker-added      move onto new or empty brokers"}},
		{[]string{"broker-failed", "--help"}, []string{"Usage: emitter broker-failed", "--broker ID", "--rack RACK",
			"--throttle SIZE", "--timeout-op DURATION", "--dry-run", "--reason WORDS", "--wait", "--print",
			"(default 2h0m0s)", "kafkamender.events.<cluster>.broker-failed", "kafkamender.results.<id>",
			"kafkamender.progress.<id>", `"rack":RACK`, "3  with --wait: no result within --timeout"}},
		{[]string{"broker-drain", "--help"}, []string{"Usage: emitter broker-drain", "--broker ID", "--throttle SIZE",
			"--timeout-op DURATION", "kafkamender.events.<cluster>.broker-drain"}},
		{[]string{"broker-added", "--help"}, []string{"Usage: emitter broker-added", "--broker ID", "--brokers LIST",
			"--throttle SIZE", "--timeout-op DURATION", "kafkamender.events.<cluster>.broker-added", `"brokers":[ID,...]`}},
		{[]string{"help", "broker-added"}, []string{"Usage: emitter broker-added"}},
	}, func(args []string, stdout string) {
		if strings.Contains(stdout, "(default 0") {
			t.Errorf("%v: help shows a zero default:\n%s", args, stdout)
		}
	})
}
