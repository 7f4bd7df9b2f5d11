package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// strategies are the values of data.strategy (docs/contract.md, replica-change-requested).
var strategies = []string{"auto", "api", "zk-reassign", "zk-nudge"}

// preferredOptions are the flags of emitter preferred-leader.
type preferredOptions struct {
	eventOptions
	topic      string
	broker     int32
	partitions []int32 // nil: every partition with a replica on broker
	strategy   string  // "": the worker's configured strategy
}

func (o *preferredOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildPreferredEvent(*o, now)
}

// int32sFlag appends numbers to a list: one per use (--partition, --broker) or a
// comma-separated list (--partitions, --brokers). what names one ("partition number",
// "broker id") in errors; the numbers are checked after parsing, so that every bad one
// is reported.
type int32sFlag struct {
	list  *[]int32
	comma bool
	what  string
}

func (f int32sFlag) String() string {
	if f.list == nil {
		return ""
	}
	return joinInt32(*f.list, ",")
}

func (f int32sFlag) Type() string { return "int32List" }

// GetSlice is the numbers given so far: with it, shell completion offers the flag again.
func (f int32sFlag) GetSlice() []string {
	var s []string
	for _, v := range *f.list {
		s = append(s, strconv.Itoa(int(v)))
	}
	return s
}

func (f int32sFlag) Set(s string) error {
	fields := []string{s}
	if f.comma {
		fields = strings.Split(s, ",")
	}
	for _, v := range fields {
		v = strings.TrimSpace(v)
		if v == "" {
			return fmt.Errorf("empty %s in %q", f.what, s)
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a %s", v, f.what)
		}
		*f.list = append(*f.list, int32(n))
	}
	return nil
}

// define defines the flags of preferred-leader.
func (o *preferredOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	broker := &int32Flag{v: &o.broker}
	fs.StringVar(&o.topic, "topic", "", "the `topic` whose partitions change (required)")
	fs.Var(broker, "broker", "`id` of the broker to make the preferred leader (required)")
	fs.Var(int32sFlag{list: &o.partitions, what: "partition number"}, "partition", "a `partition` to change; repeat for several (default: every partition with a replica on --broker)")
	fs.Var(int32sFlag{list: &o.partitions, comma: true, what: "partition number"}, "partitions", "comma-separated `list` of partitions, same as several --partition")
	fs.StringVar(&o.strategy, "strategy", "", "cluster backend (`strategy`) the worker uses: "+orList(strategies)+" (default: the worker's configured strategy)")
	completeWith(fs, "strategy", strategies...)
	return func(e env) error {
		errs := checkTopicFlag(o.topic)
		errs = append(errs, checkBrokerFlag(broker)...)
		errs = append(errs, checkPartitions(o.partitions)...)
		if o.strategy != "" && !contains(strategies, o.strategy) {
			errs = append(errs, fmt.Errorf("--strategy %q: unknown strategy (want %s)", o.strategy, orList(strategies)))
		}
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *preferredOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// checkTopicFlag checks --topic: given, and a name a Kafka topic can have.
func checkTopicFlag(topic string) []error {
	if topic == "" {
		return []error{errors.New("--topic is required")}
	}
	if err := events.CheckTopicName(topic); err != nil {
		return []error{fmt.Errorf("--topic %q: %w", topic, err)}
	}
	return nil
}

// checkPartitions checks the partitions of --partition and --partitions:
// partition numbers, each once.
func checkPartitions(partitions []int32) []error {
	var errs []error
	seen := make(map[int32]int, len(partitions))
	for _, p := range partitions {
		seen[p]++
		switch {
		case seen[p] == 2: // once for any number of repeats
			errs = append(errs, fmt.Errorf("partition %d: given more than once", p))
		case seen[p] == 1 && p < 0:
			errs = append(errs, fmt.Errorf("partition %d: not a partition number (want 0 or more)", p))
		}
	}
	return errs
}

// preferredData is the data of the replica-change-requested event the flags ask for.
func preferredData(o preferredOptions) events.ReplicaChange {
	broker := o.broker
	return events.ReplicaChange{
		Topic:           o.topic,
		Partitions:      o.partitions,
		PreferredLeader: &broker,
		Strategy:        o.strategy,
		DryRun:          o.dryRun,
		Reason:          o.reason,
	}
}

// buildPreferredEvent builds the event and checks it with the decoder the
// workers use, so that what is published is what a worker accepts.
func buildPreferredEvent(o preferredOptions, now time.Time) (ev events.Envelope, subject string, body []byte, err error) {
	return encodeEvent(o.flags(), events.TypeReplicaChangeRequested, preferredData(o), now)
}

func printPreferredUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter preferred-leader --cluster CLUSTER --topic TOPIC --broker BROKER [flags]

Asks a kafkamender worker to make BROKER the preferred leader of partitions of
TOPIC: the worker moves BROKER to the head of each partition's assigned
replicas, runs a preferred-leader election and verifies the outcome. Without
--partition or --partitions, every partition of TOPIC with a replica on BROKER
is meant.

The request is a %s event, published to JetStream on
    %s
with the event id as the JetStream message id, as 'emitter publish' does. Its
data:

    {"topic":TOPIC,"partitions":[...],"preferred_leader":BROKER,
     "strategy":...,"dry_run":true,"reason":...}

Without --wait, prints the event id and the stream sequence and exits. With
--wait, subscribes to the result (%s) before publishing,
prints progress reports on stderr as they come, and prints the result on
stdout when it comes. If the id was published before (--id), the earlier
event's stored result is shown instead: an event id runs once.

--dry-run is for the worker: it plans and reports the plan (status "planned")
but changes nothing. --print is for you: it prints the event and publishes
nothing.

Examples:
    emitter preferred-leader --cluster local --topic orders --broker 2 --partition 1 --wait
    emitter preferred-leader --cluster local --topic orders --broker 2 --dry-run --wait
    emitter preferred-leader --cluster local --topic orders --broker 2 --partitions 0,3 --print

`+eventCommandUsageTail, events.TypeReplicaChangeRequested, events.Subject("<cluster>", events.TypeReplicaChangeRequested),
		events.ResultSubject("<id>"))
	printFlags(w, fs)
}

// orList joins values as "a, b or c".
func orList(values []string) string {
	if len(values) == 1 {
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func joinInt32(list []int32, sep string) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, sep)
}
