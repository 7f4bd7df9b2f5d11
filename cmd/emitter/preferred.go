package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Output formats of a result (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// strategies are the values of data.strategy (DESIGN.md, "Cluster backends").
var strategies = []string{"auto", "api", "zk-reassign", "zk-nudge"}

// defaultWaitTimeout is the default --timeout of the commands that wait.
const defaultWaitTimeout = 2 * time.Minute

// preferredOptions are the flags of emitter preferred-leader.
type preferredOptions struct {
	cluster    string
	topic      string
	broker     int32
	partitions []int32 // nil: every partition with a replica on broker
	strategy   string  // "": the worker's configured strategy
	reason     string
	dryRun     bool // ask the worker for the plan only
	print      bool // print the event, publish nothing
	wait       bool
	timeout    time.Duration
	output     string
	id         string
	source     string
	expiresIn  time.Duration
	natsURL    string
}

// int32Flag is an int32 flag that knows whether it was given.
type int32Flag struct {
	v   *int32
	set bool
}

func (f *int32Flag) String() string {
	if f == nil || f.v == nil || !f.set {
		return ""
	}
	return strconv.Itoa(int(*f.v))
}

func (f *int32Flag) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*f.v, f.set = int32(n), true
	return nil
}

// partitionsFlag appends partition numbers to a list: one per use (--partition)
// or a comma-separated list (--partitions).
type partitionsFlag struct {
	list  *[]int32
	comma bool
}

func (f partitionsFlag) String() string {
	if f.list == nil {
		return ""
	}
	return joinInt32(*f.list, ",")
}

func (f partitionsFlag) Set(s string) error {
	fields := []string{s}
	if f.comma {
		fields = strings.Split(s, ",")
	}
	for _, p := range fields {
		p = strings.TrimSpace(p)
		if p == "" {
			return fmt.Errorf("empty partition number in %q", s)
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a partition number", p)
		}
		*f.list = append(*f.list, int32(n))
	}
	return nil
}

func newPreferredFlagSet(o *preferredOptions) (*flag.FlagSet, *int32Flag) {
	fs := flag.NewFlagSet("emitter preferred-leader", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	broker := &int32Flag{v: &o.broker}
	fs.StringVar(&o.cluster, "cluster", "", "Kafka `cluster`, as named in the workers' config (required)")
	fs.StringVar(&o.topic, "topic", "", "the `topic` whose partitions change (required)")
	fs.Var(broker, "broker", "`id` of the broker to make the preferred leader (required)")
	fs.Var(partitionsFlag{list: &o.partitions}, "partition", "a `partition` to change; repeat for several (default: every partition with a replica on --broker)")
	fs.Var(partitionsFlag{list: &o.partitions, comma: true}, "partitions", "comma-separated `list` of partitions, same as several --partition")
	fs.StringVar(&o.strategy, "strategy", "", "cluster backend (`strategy`) the worker uses: "+orList(strategies)+" (default: the worker's configured strategy)")
	fs.StringVar(&o.reason, "reason", "", "why, in a few `words`: kept with the result for the audit trail")
	fs.BoolVar(&o.dryRun, "dry-run", false, "ask the worker for the plan only: the event is published, the worker changes nothing (result status \"planned\")")
	fs.BoolVar(&o.wait, "wait", false, "wait for the result and print it; progress goes to stderr")
	fs.DurationVar(&o.timeout, "timeout", defaultWaitTimeout, "with --wait, give up waiting after `duration` (connecting and publishing included)")
	fs.StringVar(&o.output, "o", outputTable, "result `format`: table or json (the result as the worker published it)")
	fs.StringVar(&o.id, "id", "", "event `id` (default: a random UUID); letters, digits, '-' and '_'. Re-using an id asks for the earlier event's result instead of a new run")
	fs.StringVar(&o.source, "source", "", "event `source` (default \"emitter/<user>@<host>\")")
	fs.DurationVar(&o.expiresIn, "expires-in", 0, "set the expiresat extension to now + `duration`: workers drop the event after it")
	fs.StringVar(&o.natsURL, "nats-url", "", "NATS server `URL` (default $"+envNATSURL+", else "+defaultNATSURL+")")
	fs.BoolVar(&o.print, "print", false, "print the event on stdout instead of publishing it")
	return fs, broker
}

// parsePreferredFlags parses and validates the flags of preferred-leader. It
// returns flag.ErrHelp when help was asked for (the usage is then printed), and
// a usageError for anything wrong with the command line.
func parsePreferredFlags(args []string, e env) (preferredOptions, error) {
	var o preferredOptions
	fs, broker := newPreferredFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printPreferredUsage(e.stdout, fs)
			return o, err
		}
		return o, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, usageErrorf("unexpected arguments %q", fs.Args())
	}

	var errs []error
	switch {
	case o.cluster == "":
		errs = append(errs, errors.New("--cluster is required"))
	case !events.ValidToken(o.cluster):
		errs = append(errs, fmt.Errorf("--cluster %q: not a valid subject token (want letters, digits, '-' or '_')", o.cluster))
	}
	switch {
	case o.topic == "":
		errs = append(errs, errors.New("--topic is required"))
	default:
		if err := checkTopicName(o.topic); err != nil {
			errs = append(errs, fmt.Errorf("--topic %q: %w", o.topic, err))
		}
	}
	switch {
	case !broker.set:
		errs = append(errs, errors.New("--broker is required"))
	case o.broker < 0:
		errs = append(errs, fmt.Errorf("--broker %d: not a broker id (want 0 or more)", o.broker))
	}
	seen := make(map[int32]int, len(o.partitions))
	for _, p := range o.partitions {
		seen[p]++
		switch {
		case seen[p] == 2: // once for any number of repeats
			errs = append(errs, fmt.Errorf("partition %d: given more than once", p))
		case seen[p] == 1 && p < 0:
			errs = append(errs, fmt.Errorf("partition %d: not a partition number (want 0 or more)", p))
		}
	}
	if o.strategy != "" && !contains(strategies, o.strategy) {
		errs = append(errs, fmt.Errorf("--strategy %q: unknown strategy (want %s)", o.strategy, orList(strategies)))
	}
	if o.output != outputTable && o.output != outputJSON {
		errs = append(errs, fmt.Errorf("-o %q: unknown output format (want table or json)", o.output))
	}
	if o.print && o.wait {
		errs = append(errs, errors.New("--print and --wait exclude each other: --print publishes nothing, so no result comes"))
	}
	errs = append(errs, checkEventFlags(o.id, o.expiresIn, o.timeout)...)
	if err := errors.Join(errs...); err != nil {
		return o, usageError{err}
	}
	o.id, o.source, o.natsURL = eventDefaults(o.id, o.source, o.natsURL, e)
	return o, nil
}

// checkTopicName applies Kafka's rules for topic names, so that a typo that no
// cluster can have is caught before an event is published.
func checkTopicName(t string) error {
	if t == "." || t == ".." {
		return errors.New(`"." and ".." are not topic names`)
	}
	if len(t) > 249 {
		return fmt.Errorf("longer than Kafka's limit of 249 characters (%d)", len(t))
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return fmt.Errorf("%q is not allowed in a Kafka topic name (letters, digits, '.', '_' and '-')", r)
		}
	}
	return nil
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
	data, err := json.Marshal(preferredData(o))
	if err != nil {
		return ev, "", nil, fmt.Errorf("encode data: %w", err)
	}
	ev = buildEnvelope(publishOptions{
		cluster: o.cluster, typ: events.TypeReplicaChangeRequested, data: string(data),
		id: o.id, source: o.source, expiresIn: o.expiresIn,
	}, now)
	subject = events.Subject(o.cluster, events.TypeReplicaChangeRequested)
	body, err = json.Marshal(ev)
	if err != nil {
		return ev, "", nil, fmt.Errorf("encode event: %w", err)
	}
	if _, err := events.Decode(subject, nil, body, events.DecodeOptions{}); err != nil {
		return ev, "", nil, fmt.Errorf("the event would be rejected: %w", err)
	}
	return ev, subject, body, nil
}

func runPreferredLeader(ctx context.Context, args []string, e env) int {
	const name = "emitter preferred-leader"
	o, err := parsePreferredFlags(args, e)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(e.stderr, "%s: %s\nRun '%s --help' for usage.\n", name,
			strings.ReplaceAll(err.Error(), "\n", "\n  "), name)
		return exitUsage
	}

	ev, subject, body, err := buildPreferredEvent(o, e.now())
	if err != nil {
		// The flags were checked; this is a bug rather than a usage error.
		fmt.Fprintf(e.stderr, "%s: event %s: %v\n", name, o.id, err)
		return exitFailure
	}

	if o.print {
		pretty, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: encode event %s: %v\n", name, ev.ID, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", pretty)
		fmt.Fprintf(e.stderr, "--print: event %s not published to %s\n", ev.ID, subject)
		return exitOK
	}

	if o.wait {
		return publishAndWait(ctx, e, name, waitRequest{
			natsURL: o.natsURL, timeout: o.timeout, output: o.output,
			subject: subject, id: ev.ID, body: body,
		})
	}

	ctx, cancel := context.WithTimeout(ctx, min(o.timeout, publishTimeout))
	defer cancel()
	ack, err := publish(ctx, o.natsURL, min(o.timeout, publishTimeout), subject, ev.ID, body)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: event %s: %v\n", name, ev.ID, err)
		return exitFailure
	}
	fmt.Fprintln(e.stdout, publishedLine(ev.ID, ack))
	return exitOK
}

func printPreferredUsage(w io.Writer, fs *flag.FlagSet) {
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

Exit status:
    0  published; with --wait: the result is succeeded, noop or planned
    1  publishing failed; with --wait: the result is partial, failed, rejected
       or expired
    2  usage error
    3  with --wait: no result within --timeout (the event stays queued; look
       for its result later with 'emitter result --id ID')

Flags:
`, events.TypeReplicaChangeRequested, events.Subject("<cluster>", events.TypeReplicaChangeRequested),
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
