package main

// The commands about a whole broker: broker-failed (recreate the replicas of a broker gone
// for good), broker-drain (empty a live broker) and broker-added (move load onto new
// brokers). Each copies replicas, throttled and bounded, as replication-factor does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// copyOptions are the flags of a command whose worker copies replicas: the throttle and
// the bound of the whole operation.
type copyOptions struct {
	throttle  int64 // bytes/s; 0: the worker's default
	opTimeout time.Duration
}

// register defines --throttle and --timeout-op on fs; what names what copies ("the new
// replicas").
func (c *copyOptions) register(fs *pflag.FlagSet, what string) {
	fs.Var(byteSizeFlag{&c.throttle}, "throttle", "replication throttle while "+what+" copy, in bytes per second: a `size` such as 50MB, 10MiB or 1048576 (B, KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024) (default: the worker's replication_factor.throttle_bytes_per_sec)")
	fs.DurationVar(&c.opTimeout, "timeout-op", 0, "how long the worker may take before it cancels the copies still running: a `duration` such as 2h (default: the worker's replication_factor.timeout); --timeout is how long the emitter waits")
}

// check checks --throttle and --timeout-op, when given.
func (c *copyOptions) check(fs *pflag.FlagSet) []error {
	var errs []error
	if fs.Changed("throttle") && c.throttle <= 0 {
		errs = append(errs, errors.New("--throttle: must be at least 1 byte per second (leave it out for the worker's configured throttle)"))
	}
	if fs.Changed("timeout-op") && c.opTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout-op %s: must be positive (leave it out for the worker's configured bound)", c.opTimeout))
	}
	return errs
}

// copyFlags are the shared flags, with the longer default --timeout of copies.
func copyFlags(o *eventOptions) eventFlags {
	f := o.flags()
	f.defaultTimeout = defaultRFWaitTimeout
	return f
}

// brokerFailedOptions are the flags of emitter broker-failed.
type brokerFailedOptions struct {
	eventOptions
	copyOptions
	broker int32
	rack   string
	topics []string // nil: every topic
}

func (o *brokerFailedOptions) flags() eventFlags { return copyFlags(&o.eventOptions) }

func (o *brokerFailedOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildBrokerFailedEvent(*o, now)
}

// define defines the flags of broker-failed.
func (o *brokerFailedOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	broker := &int32Flag{v: &o.broker}
	fs.Var(broker, "broker", "the `id` of the broker that is gone for good (required)")
	fs.StringVar(&o.rack, "rack", "", "the failed broker's `rack`, when known (the cluster's metadata no longer lists it): its replacements go there where that keeps each partition's rack spread")
	fs.Var(topicsFlag{list: &o.topics}, "topic", "only partitions of `topic` (the critical ones first); repeat for several (default: every topic)")
	fs.Var(topicsFlag{list: &o.topics, comma: true}, "topics", "comma-separated `list` of topics, same as several --topic")
	o.copyOptions.register(fs, "the replacements")
	return func(e env) error {
		errs := checkBrokerFlag(broker)
		errs = append(errs, o.copyOptions.check(fs)...)
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *brokerFailedOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// brokerFailedData is the data of the broker-failed event the flags ask for.
func brokerFailedData(o brokerFailedOptions) events.BrokerFailed {
	b := o.broker
	return events.BrokerFailed{Broker: &b, Rack: o.rack, Topics: o.topics, ThrottleBytesPerSec: o.throttle,
		Timeout: events.Duration{Duration: o.opTimeout}, DryRun: o.dryRun, Reason: o.reason}
}

// buildBrokerFailedEvent builds the event and checks it with the decoder the workers use.
func buildBrokerFailedEvent(o brokerFailedOptions, now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypeBrokerFailed, brokerFailedData(o), now)
}

func printBrokerFailedUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter broker-failed --cluster CLUSTER --broker ID [--rack RACK] [flags]

Asks a kafkamender worker to recreate, on the other live brokers, every replica
of broker ID, which is gone for good (a dead host, a lost disk). The worker
first checks that the broker is absent from the cluster's metadata: while it is
listed, it is alive, and the event is rejected with nothing changed (to empty a
live broker, use 'emitter broker-drain').

Each replica of the broker is recreated on another live broker, the partitions
with the fewest in-sync replicas above min.insync.replicas first; no other
replica moves. A replacement goes to the rack of the replica it replaces
(--rack: the metadata no longer says) where that keeps the partition's rack
spread; the rack spread is never reduced unless no live broker is left to keep
it, and then the change's note says so.

While replicas copy, the worker sets a replication throttle (--throttle, else
its configured one) and puts back the throttles that were there before when it
is done. If the repair takes longer than --timeout-op (else the worker's
configured bound), the copies still running are cancelled.

The request is a %s event, published to JetStream on
    %s
Its data:

    {"broker":ID,"rack":RACK,"throttle_bytes_per_sec":BYTES,"timeout":"2h0m0s",
     "dry_run":true,"reason":...}

--wait subscribes to the result (%s) and the progress
reports (%s), shows the progress on stderr and prints
the result. --dry-run asks the worker for the plan (status "planned"); --print
prints the event and publishes nothing.

Examples:
    emitter broker-failed --cluster local --broker 3 --dry-run --wait
    emitter broker-failed --cluster local --broker 3 --rack eu-west-1a --throttle 50MiB --timeout-op 4h --wait

`+eventCommandUsageTail, events.TypeBrokerFailed, events.Subject("<cluster>", events.TypeBrokerFailed),
		events.ResultSubject("<id>"), events.ProgressSubject("<id>"))
	printFlags(w, fs)
}

// brokerDrainOptions are the flags of emitter broker-drain.
type brokerDrainOptions struct {
	eventOptions
	copyOptions
	broker int32
	topics []string // nil: every topic
}

func (o *brokerDrainOptions) flags() eventFlags { return copyFlags(&o.eventOptions) }

func (o *brokerDrainOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildBrokerDrainEvent(*o, now)
}

// define defines the flags of broker-drain.
func (o *brokerDrainOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	broker := &int32Flag{v: &o.broker}
	fs.Var(broker, "broker", "the `id` of the live broker to empty (required)")
	fs.Var(topicsFlag{list: &o.topics}, "topic", "only partitions of `topic` (a partial drain); repeat for several (default: every topic)")
	fs.Var(topicsFlag{list: &o.topics, comma: true}, "topics", "comma-separated `list` of topics, same as several --topic")
	o.copyOptions.register(fs, "its replicas")
	return func(e env) error {
		errs := checkBrokerFlag(broker)
		errs = append(errs, o.copyOptions.check(fs)...)
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *brokerDrainOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// brokerDrainData is the data of the broker-drain event the flags ask for.
func brokerDrainData(o brokerDrainOptions) events.BrokerDrain {
	b := o.broker
	return events.BrokerDrain{Broker: &b, Topics: o.topics, ThrottleBytesPerSec: o.throttle,
		Timeout: events.Duration{Duration: o.opTimeout}, DryRun: o.dryRun, Reason: o.reason}
}

// buildBrokerDrainEvent builds the event and checks it with the decoder the workers use.
func buildBrokerDrainEvent(o brokerDrainOptions, now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypeBrokerDrain, brokerDrainData(o), now)
}

func printBrokerDrainUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter broker-drain --cluster CLUSTER --broker ID [flags]

Asks a kafkamender worker to empty broker ID, which must be live (before its
host's maintenance or retirement; for a broker gone for good, use 'emitter
broker-failed'): first one batched leadership shed moves every leadership off
it, then its replicas are copied to other brokers, where a failed broker's
would go (its rack where that keeps each partition's rack spread), and removed
from the assignments. No partition has fewer in-sync replicas than before
because of the drain.

While replicas copy, the worker sets a replication throttle (--throttle, else
its configured one) and puts back the throttles that were there before when it
is done. If the drain takes longer than --timeout-op (else the worker's
configured bound), the copies still running are cancelled.

The request is a %s event, published to JetStream on
    %s
Its data:

    {"broker":ID,"throttle_bytes_per_sec":BYTES,"timeout":"2h0m0s","dry_run":true,
     "reason":...}

--wait subscribes to the result (%s) and the progress
reports (%s), shows the progress on stderr and prints
the result. --dry-run asks the worker for the plan (status "planned"); --print
prints the event and publishes nothing.

Examples:
    emitter broker-drain --cluster local --broker 2 --dry-run --wait
    emitter broker-drain --cluster local --broker 2 --throttle 20MiB --reason "host maintenance" --wait

`+eventCommandUsageTail, events.TypeBrokerDrain, events.Subject("<cluster>", events.TypeBrokerDrain),
		events.ResultSubject("<id>"), events.ProgressSubject("<id>"))
	printFlags(w, fs)
}

// brokerAddedOptions are the flags of emitter broker-added.
type brokerAddedOptions struct {
	eventOptions
	copyOptions
	brokers []int32  // in the order given
	topics  []string // nil: every topic
}

func (o *brokerAddedOptions) flags() eventFlags { return copyFlags(&o.eventOptions) }

func (o *brokerAddedOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildBrokerAddedEvent(*o, now)
}

// define defines the flags of broker-added.
func (o *brokerAddedOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	fs.Var(int32sFlag{list: &o.brokers, what: "broker id"}, "broker", "the `id` of a new or empty broker, which must be live; repeat for several (at least one, by --broker or --brokers)")
	fs.Var(int32sFlag{list: &o.brokers, comma: true, what: "broker id"}, "brokers", "comma-separated `list` of broker ids, same as several --broker")
	fs.Var(topicsFlag{list: &o.topics}, "topic", "only partitions of `topic` count and move; repeat for several (default: every topic)")
	fs.Var(topicsFlag{list: &o.topics, comma: true}, "topics", "comma-separated `list` of topics, same as several --topic")
	o.copyOptions.register(fs, "the moved replicas")
	return func(e env) error {
		errs := checkBrokerList(o.brokers)
		errs = append(errs, o.copyOptions.check(fs)...)
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *brokerAddedOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// checkBrokerList checks the brokers of --broker and --brokers: at least one, at most
// events.MaxListedBrokers, broker ids, each once.
func checkBrokerList(brokers []int32) []error {
	if len(brokers) == 0 {
		return []error{errors.New("--broker is required (or --brokers)")}
	}
	var errs []error
	if len(brokers) > events.MaxListedBrokers {
		errs = append(errs, fmt.Errorf("--broker: %d brokers, over the limit of %d", len(brokers), events.MaxListedBrokers))
	}
	seen := make(map[int32]int, len(brokers))
	for _, b := range brokers {
		seen[b]++
		switch {
		case seen[b] == 2: // once for any number of repeats
			errs = append(errs, fmt.Errorf("--broker %d: given more than once", b))
		case seen[b] == 1 && b < 0:
			errs = append(errs, fmt.Errorf("--broker %d: not a broker id (want 0 or more)", b))
		}
	}
	return errs
}

// brokerAddedData is the data of the broker-added event the flags ask for: broker for
// one broker, brokers for several.
func brokerAddedData(o brokerAddedOptions) events.BrokerAdded {
	d := events.BrokerAdded{Topics: o.topics, ThrottleBytesPerSec: o.throttle, Timeout: events.Duration{Duration: o.opTimeout},
		DryRun: o.dryRun, Reason: o.reason}
	if len(o.brokers) == 1 {
		b := o.brokers[0]
		d.Broker = &b
	} else {
		d.Brokers = o.brokers
	}
	return d
}

// buildBrokerAddedEvent builds the event and checks it with the decoder the workers use.
func buildBrokerAddedEvent(o brokerAddedOptions, now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypeBrokerAdded, brokerAddedData(o), now)
}

func printBrokerAddedUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter broker-added --cluster CLUSTER --broker ID [--broker ID...] [flags]
       emitter broker-added --cluster CLUSTER --brokers ID,ID,... [flags]

Asks a kafkamender worker to move load onto new or empty brokers: the fewest
replicas, then the fewest preferred leaderships, that even out the cluster.
Each broker named must be live, else the event is rejected with nothing
changed. Replicas move only onto the named brokers, one at a time from the
most loaded broker, until every live broker's replica count is within 1 of
even or no allowed move is left; a move never reduces a partition's rack
spread. Then preferred leaderships move onto the named brokers the same way
(the election of a replica that just moved there waits for its copy).

While replicas copy, the worker sets a replication throttle (--throttle, else
its configured one) and puts back the throttles that were there before when it
is done. If the move takes longer than --timeout-op (else the worker's
configured bound), the copies still running are cancelled.

The request is a %s event, published to JetStream on
    %s
Its data (broker for one broker, brokers for several):

    {"broker":ID,"brokers":[ID,...],"throttle_bytes_per_sec":BYTES,
     "timeout":"2h0m0s","dry_run":true,"reason":...}

--wait subscribes to the result (%s) and the progress
reports (%s), shows the progress on stderr and prints
the result. --dry-run asks the worker for the plan (status "planned"); --print
prints the event and publishes nothing.

Examples:
    emitter broker-added --cluster local --broker 4 --dry-run --wait
    emitter broker-added --cluster local --brokers 4,5,6 --throttle 20MiB --wait

`+eventCommandUsageTail, events.TypeBrokerAdded, events.Subject("<cluster>", events.TypeBrokerAdded),
		events.ResultSubject("<id>"), events.ProgressSubject("<id>"))
	printFlags(w, fs)
}
