package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// offlineDefaults are the shared options partition-offline parses to from --cluster local
// alone: an election copies nothing, so --timeout is the short default.
var offlineDefaults = eventOptions{
	cluster: "local", timeout: defaultWaitTimeout, output: outputTable,
	id: "generated-id", source: "emitter/alice@box", natsURL: defaultNATSURL,
}

func TestParsePartitionOfflineFlags(t *testing.T) {
	defaults := partitionOfflineOptions{eventOptions: offlineDefaults}
	with := func(f func(*partitionOfflineOptions)) partitionOfflineOptions {
		o := defaults
		f(&o)
		return o
	}
	testParse(t, parsePartitionOfflineFlags, []parseTest[partitionOfflineOptions]{
		{"cluster only: every offline partition", []string{"--cluster", "local"}, defaults},
		{"a topic", []string{"--cluster", "local", "--topic", "orders"},
			with(func(o *partitionOfflineOptions) { o.topic = "orders" })},
		{"repeated and listed partitions keep their order", []string{"--cluster", "local", "--topic", "orders", "--partition", "4", "--partitions", "0, 2", "--partition", "1"},
			with(func(o *partitionOfflineOptions) { o.topic, o.partitions = "orders", []int32{4, 0, 2, 1} })},
		{"unclean allowed, every topic", []string{"--cluster", "local", "--allow-unclean"},
			with(func(o *partitionOfflineOptions) { o.allowUnclean = true })},
		{"everything", []string{"--cluster", "local", "--topic", "orders", "--partitions", "3", "--allow-unclean", "--dry-run",
			"--reason", "brokers 1 and 2 lost", "--wait", "--timeout", "30s", "-o", "json", "--id", "po-1", "--source", "me"},
			with(func(o *partitionOfflineOptions) {
				o.topic, o.partitions, o.allowUnclean, o.dryRun, o.reason = "orders", []int32{3}, true, true, "brokers 1 and 2 lost"
				o.wait, o.timeout, o.output, o.id, o.source = true, 30*time.Second, outputJSON, "po-1", "me"
			})},
	})
}

func TestPartitionOfflineUsageErrors(t *testing.T) {
	testUsageErrors(t, []usageErrorTest{
		{"nothing given", []string{"partition-offline"},
			[]string{"--cluster is required", "Run 'emitter partition-offline --help' for usage."}},
		{"partitions without a topic", []string{"partition-offline", "--cluster", "local", "--partition", "1"},
			[]string{"--partition needs --topic (partitions are numbered within a topic)"}},
		{"a topic Kafka refuses", []string{"partition-offline", "--cluster", "local", "--topic", "my topic"},
			[]string{`--topic "my topic": ' ' is not allowed in a Kafka topic name`}},
		{"negative partition", []string{"partition-offline", "--cluster", "local", "--topic", "orders", "--partitions", "0,-1"},
			[]string{"partition -1: not a partition number (want 0 or more)"}},
		{"partition given twice", []string{"partition-offline", "--cluster", "local", "--topic", "orders", "--partition", "3", "--partitions", "1,3"},
			[]string{"partition 3: given more than once"}},
		{"empty entry", []string{"partition-offline", "--cluster", "local", "--topic", "orders", "--partitions", "1,,2"},
			[]string{`invalid value "1,,2" for flag -partitions: empty partition number in "1,,2"`}},
		{"not a number", []string{"partition-offline", "--cluster", "local", "--topic", "orders", "--partition", "x"},
			[]string{`invalid value "x" for flag -partition: "x" is not a partition number`}},
		{"no broker", []string{"partition-offline", "--cluster", "local", "--broker", "1"},
			[]string{"flag provided but not defined: -broker"}},
		{"no throttle", []string{"partition-offline", "--cluster", "local", "--throttle", "1MiB"},
			[]string{"flag provided but not defined: -throttle"}},
		{"no operation timeout", []string{"partition-offline", "--cluster", "local", "--timeout-op", "1h"},
			[]string{"flag provided but not defined: -timeout-op"}},
		{"over the cap", []string{"partition-offline", "--cluster", "local", "--topic", "orders", "--partitions", manyPartitions(events.MaxListedPartitions + 1)},
			[]string{"--partition: 100001 partitions, over the limit of 100000"}},
		{"every problem at once", []string{"partition-offline", "--cluster", "a b", "--partitions", "-2,-2", "--print", "--wait"},
			[]string{`--cluster "a b"`, "--partition needs --topic", "partition -2: given more than once",
				"partition -2: not a partition number", "--print and --wait exclude each other"}},
	})
}

// TestPartitionOfflineEventData checks the data of the events built for typical flag sets,
// and that the workers' decoder accepts them.
func TestPartitionOfflineEventData(t *testing.T) {
	for _, tt := range []eventDataTest{
		{"every offline partition", []string{"--cluster", "local"}, `{}`},
		{"a topic", []string{"--cluster", "local", "--topic", "orders"}, `{"topic":"orders"}`},
		{"partitions of a topic, in their order", []string{"--cluster", "local", "--topic", "orders", "--partition", "3", "--partitions", "0,1"},
			`{"topic":"orders","partitions":[3,0,1]}`},
		{"everything", []string{"--cluster", "local", "--topic", "orders", "--partitions", "3", "--allow-unclean", "--dry-run", "--reason", "lost"},
			`{"topic":"orders","partitions":[3],"allow_unclean":true,"dry_run":true,"reason":"lost"}`},
		{"flags of the emitter stay out of the data", []string{"--cluster", "local", "--wait", "--timeout", "5s",
			"-o", "json", "--id", "x", "--source", "s", "--expires-in", "1m"}, `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, b := buildFromArgs(t, tt.args, parsePartitionOfflineFlags, buildPartitionOfflineEvent)
			dec := b.decode(t, o.cluster, "kafkamender.events.local.partition-offline", tt.want)
			p := dec.Payload.(*events.PartitionOffline)
			if dec.Type != events.TypePartitionOffline || p.Topic != o.topic || !slices.Equal(p.Partitions, o.partitions) ||
				p.AllowUnclean != o.allowUnclean || p.DryRun != o.dryRun || p.Reason != o.reason {
				t.Errorf("decoded %s payload: %+v", dec.Type, p)
			}
		})
	}
}

func TestPartitionOfflinePrint(t *testing.T) {
	ev, stderr := printEvent(t, []string{"partition-offline", "--topic", "orders", "--partitions", "0,3", "--allow-unclean",
		"--print", "--cluster", "local", "--expires-in", "5m", "--nats-url", "nats://127.0.0.1:1"})
	checkPrintedEvent(t, ev, stderr, events.TypePartitionOffline, "kafkamender.events.local.partition-offline")
	if got, want := string(compact(t, ev.Data)), `{"topic":"orders","partitions":[0,3],"allow_unclean":true}`; got != want {
		t.Errorf("data %s, want %s", got, want)
	}
}

// A reason the workers would refuse is reported, and nothing is published.
func TestPartitionOfflineRejectedReason(t *testing.T) {
	e, stdout, stderr := testEnv(nil)
	code := run(t.Context(), []string{"partition-offline", "--print", "--cluster", "local", "--reason", "a\nb"}, e)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if want := "data.reason: a control character (U+000A) at byte 1"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %s", stdout)
	}
}

func TestPartitionOfflineHelp(t *testing.T) {
	testHelp(t, []helpTest{
		{[]string{"--help"}, []string{
			"emitter partition-offline --cluster CLUSTER [--topic TOPIC [--partition N...]] [flags]",
			"    partition-offline\n                      elect a leader for partitions that have none"}},
		{[]string{"partition-offline", "--help"}, []string{"Usage: emitter partition-offline", "--topic TOPIC",
			"--partition PARTITION", "--partitions LIST", "--allow-unclean", "--dry-run", "--reason WORDS", "--wait", "--print",
			"(default 2m0s)", "kafkamender.events.<cluster>.partition-offline", "kafkamender.results.<id>",
			`"allow_unclean":true`, "partition_offline.allow_unclean", "3  with --wait: no result within --timeout"}},
		{[]string{"help", "partition-offline"}, []string{"Usage: emitter partition-offline"}},
	}, func(args []string, stdout string) {
		if strings.Contains(stdout, "(default 0") || strings.Contains(stdout, "--throttle") {
			t.Errorf("%v: help shows a zero default or a throttle:\n%s", args, stdout)
		}
	})
}

// manyPartitions is n distinct partition numbers, comma-separated.
func manyPartitions(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	return strings.Join(ps, ",")
}
