package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// overloadedOptions are the flags of emitter broker-overloaded.
type overloadedOptions struct {
	eventOptions
	broker        int32
	topics        []string // nil: every topic
	excludeTopics []string
	maxPartitions int  // 0: no cap
	demoteToEnd   bool // also move broker to the end of the assigned replicas
}

func (o *overloadedOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildOverloadedEvent(*o, now)
}

// topicsFlag appends topic names to a list: one per use (--topic) or a
// comma-separated list (--topics). Names are checked after parsing, so that
// every bad one is reported.
type topicsFlag struct {
	list  *[]string
	comma bool
}

func (f topicsFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f topicsFlag) Type() string { return "topicList" }

// GetSlice is the topics given so far: with it, shell completion offers the flag again.
func (f topicsFlag) GetSlice() []string { return *f.list }

func (f topicsFlag) Set(s string) error {
	fields := []string{s}
	if f.comma {
		fields = strings.Split(s, ",")
	}
	for _, t := range fields {
		t = strings.TrimSpace(t)
		if t == "" {
			return fmt.Errorf("empty topic name in %q", s)
		}
		*f.list = append(*f.list, t)
	}
	return nil
}

// define defines the flags of broker-overloaded.
func (o *overloadedOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	broker := &int32Flag{v: &o.broker}
	fs.Var(broker, "broker", "`id` of the overloaded broker, whose partition leadership moves to other brokers (required)")
	fs.Var(topicsFlag{list: &o.topics}, "topic", "only partitions of `topic`; repeat for several (default: every topic)")
	fs.Var(topicsFlag{list: &o.topics, comma: true}, "topics", "comma-separated `list` of topics, same as several --topic")
	fs.Var(topicsFlag{list: &o.excludeTopics}, "exclude-topic", "leave the partitions of `topic` alone; repeat for several")
	fs.Var(topicsFlag{list: &o.excludeTopics, comma: true}, "exclude-topics", "comma-separated `list` of topics, same as several --exclude-topic")
	fs.IntVar(&o.maxPartitions, "max-partitions", 0, "change at most `n` partitions, the first in (topic, partition) order; the rest are skipped (0: no limit)")
	fs.BoolVar(&o.demoteToEnd, "demote-to-end", false, "also move --broker to the end of each changed partition's assigned replicas, so that a later preferred-leader election does not hand leadership back")
	return func(e env) error {
		errs := checkBrokerFlag(broker)
		errs = append(errs, checkTopicList("--topic", o.topics)...)
		errs = append(errs, checkTopicList("--exclude-topic", o.excludeTopics)...)
		both := map[string]bool{}
		for _, t := range o.topics {
			if contains(o.excludeTopics, t) && !both[t] {
				both[t] = true
				errs = append(errs, fmt.Errorf("topic %q: both included (--topic) and excluded (--exclude-topic)", t))
			}
		}
		if o.maxPartitions < 0 {
			errs = append(errs, fmt.Errorf("--max-partitions %d: must be 0 (no limit) or more", o.maxPartitions))
		}
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *overloadedOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// checkTopicList checks the topic names given to the flag called name (and
// its comma-separated form): valid names, each once.
func checkTopicList(name string, topics []string) []error {
	var errs []error
	seen := make(map[string]int, len(topics))
	for _, t := range topics {
		seen[t]++
		if seen[t] == 2 { // once for any number of repeats
			errs = append(errs, fmt.Errorf("%s %q: given more than once", name, t))
		}
		if seen[t] > 1 {
			continue
		}
		if err := events.CheckTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, t, err))
		}
	}
	return errs
}

// overloadedData is the data of the broker-overloaded event the flags ask for.
func overloadedData(o overloadedOptions) events.BrokerOverloaded {
	broker := o.broker
	return events.BrokerOverloaded{
		Broker:        &broker,
		Topics:        o.topics,
		ExcludeTopics: o.excludeTopics,
		MaxPartitions: o.maxPartitions,
		DemoteToEnd:   o.demoteToEnd,
		DryRun:        o.dryRun,
		Reason:        o.reason,
	}
}

// buildOverloadedEvent builds the event and checks it with the decoder the
// workers use, so that what is published is what a worker accepts.
func buildOverloadedEvent(o overloadedOptions, now time.Time) (ev events.Envelope, subject string, body []byte, err error) {
	return encodeEvent(o.flags(), events.TypeBrokerOverloaded, overloadedData(o), now)
}

func printOverloadedUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter broker-overloaded --cluster CLUSTER --broker BROKER [flags]

Asks a kafkamender worker to move partition leadership off BROKER: for every
partition BROKER leads (or heads the assigned replicas of), the worker picks a
new leader among the other in-sync replicas, least-loaded first so that the
other brokers end up with even leader counts, moves it to the head of the
assigned replicas, then runs one preferred-leader election for them all and
verifies the outcome. Partitions with no other in-sync replica are skipped,
with the reason. Without --topic or --topics, every topic is meant.

The request is a %s event, published to JetStream on
    %s
with the event id as the JetStream message id, as 'emitter publish' does. Its
data:

    {"broker":BROKER,"topics":[...],"exclude_topics":[...],"max_partitions":N,
     "demote_to_end":true,"dry_run":true,"reason":...}

Without --wait, prints the event id and the stream sequence and exits. With
--wait, subscribes to the result (%s) before publishing,
prints progress reports on stderr as they come, and prints the result on
stdout when it comes, with the number of leaders moved and where they went.
If the id was published before (--id), the earlier event's stored result is
shown instead: an event id runs once.

--dry-run is for the worker: it plans and reports the plan (status "planned")
but changes nothing. --print is for you: it prints the event and publishes
nothing.

Examples:
    emitter broker-overloaded --cluster local --broker 1 --dry-run --wait
    emitter broker-overloaded --cluster local --broker 1 --exclude-topics __consumer_offsets,_schemas --wait
    emitter broker-overloaded --cluster local --broker 1 --topic orders --max-partitions 50 --demote-to-end --print

`+eventCommandUsageTail, events.TypeBrokerOverloaded, events.Subject("<cluster>", events.TypeBrokerOverloaded),
		events.ResultSubject("<id>"))
	printFlags(w, fs)
}
