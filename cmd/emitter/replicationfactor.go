package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// rfStrategies are the strategies that change replica sets: zk-nudge only
// reorders replicas, and the worker rejects it for a replication factor.
var rfStrategies = []string{"auto", "api", "zk-reassign"}

// defaultRFWaitTimeout is the default --timeout of replication-factor: copying
// replicas takes long (the worker's own default bound is an hour).
const defaultRFWaitTimeout = 2 * time.Hour

// rfOptions are the flags of emitter replication-factor.
type rfOptions struct {
	eventOptions
	topic      string
	factor     int32
	partitions []int32 // nil: every partition of the topic
	strategy   string  // "": the worker's configured strategy
	throttle   int64   // bytes/s; 0: the worker's default
	opTimeout  time.Duration
}

// flags are the shared flags, with the longer default --timeout of
// replication-factor.
func (o *rfOptions) flags() eventFlags {
	f := o.eventOptions.flags()
	f.defaultTimeout = defaultRFWaitTimeout
	return f
}

func (o *rfOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildRFEvent(*o, now)
}

// byteUnits are the units of a byte size, by lower-case name.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
}

// parseByteSize reads a number of bytes (per second): a number, possibly with
// a fraction, then optionally a unit: B, KB, MB, GB (powers of 1000) or KiB,
// MiB, GiB (powers of 1024), in any case, and optionally "/s". A fraction of
// a byte is dropped.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if len(t) >= 2 && strings.EqualFold(t[len(t)-2:], "/s") {
		t = strings.TrimSpace(t[:len(t)-2])
	}
	end := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(t)
	}
	num, unit := t[:end], strings.TrimSpace(t[end:])
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || strings.Contains(frac, ".") || strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("%q is not a size (want a number of bytes, with an optional unit: 10MiB, 500KB, 1.5GiB)", s)
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (want B, KB, MB, GB, KiB, MiB or GiB; no unit: bytes)", s, unit)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return n.Int64(), nil
}

// byteSizeFlag is a flag of a byte size (see parseByteSize).
type byteSizeFlag struct{ v *int64 }

func (f byteSizeFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return fmt.Sprint(*f.v)
}

func (f byteSizeFlag) Type() string { return "byteSize" }

func (f byteSizeFlag) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*f.v = n
	return nil
}

// define defines the flags of replication-factor.
func (o *rfOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	factor := &int32Flag{v: &o.factor}
	fs.StringVar(&o.topic, "topic", "", "the `topic` whose replication factor changes (required)")
	fs.Var(factor, "rf", "the replication factor wanted: `n` replicas per partition, 1 or more (required)")
	fs.Var(int32sFlag{list: &o.partitions, what: "partition number"}, "partition", "a `partition` to change; repeat for several (default: every partition of --topic)")
	fs.Var(int32sFlag{list: &o.partitions, comma: true, what: "partition number"}, "partitions", "comma-separated `list` of partitions, same as several --partition")
	fs.StringVar(&o.strategy, "strategy", "", "cluster backend (`strategy`) the worker uses: "+orList(rfStrategies)+" (default: the worker's configured strategy; zk-nudge cannot change replica sets)")
	fs.Var(byteSizeFlag{&o.throttle}, "throttle", "replication throttle while new replicas copy, in bytes per second: a `size` such as 50MB, 10MiB or 1048576 (B, KB, MB, GB: powers of 1000; KiB, MiB, GiB: of 1024) (default: the worker's configured throttle)")
	fs.DurationVar(&o.opTimeout, "timeout-op", 0, "how long the worker may take over the change before it cancels the unfinished reassignments: a `duration` such as 30m (default: the worker's configured bound); --timeout is how long the emitter waits")
	completeWith(fs, "strategy", rfStrategies...)
	return func(e env) error {
		errs := checkTopicFlag(o.topic)
		switch {
		case !factor.set:
			errs = append(errs, errors.New("--rf is required"))
		case o.factor < 1:
			errs = append(errs, fmt.Errorf("--rf %d: must be at least 1", o.factor))
		}
		errs = append(errs, checkPartitions(o.partitions)...)
		switch {
		case o.strategy == "" || contains(rfStrategies, o.strategy):
		case o.strategy == "zk-nudge":
			errs = append(errs, fmt.Errorf("--strategy zk-nudge: not for replication-factor: zk-nudge never changes a replica set, and the worker rejects it (want %s)", orList(rfStrategies)))
		default:
			errs = append(errs, fmt.Errorf("--strategy %q: unknown strategy (want %s)", o.strategy, orList(rfStrategies)))
		}
		if fs.Changed("throttle") && o.throttle <= 0 {
			errs = append(errs, errors.New("--throttle: must be at least 1 byte per second (leave it out for the worker's configured throttle)"))
		}
		if fs.Changed("timeout-op") && o.opTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--timeout-op %s: must be positive (leave it out for the worker's configured bound)", o.opTimeout))
		}
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *rfOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// rfData is the data of the replica-change-requested event the flags ask for.
func rfData(o rfOptions) events.ReplicaChange {
	factor := int(o.factor)
	return events.ReplicaChange{
		Topic:               o.topic,
		Partitions:          o.partitions,
		ReplicationFactor:   &factor,
		Strategy:            o.strategy,
		ThrottleBytesPerSec: o.throttle,
		Timeout:             events.Duration{Duration: o.opTimeout},
		DryRun:              o.dryRun,
		Reason:              o.reason,
	}
}

// buildRFEvent builds the event and checks it with the decoder the workers
// use, so that what is published is what a worker accepts.
func buildRFEvent(o rfOptions, now time.Time) (ev events.Envelope, subject string, body []byte, err error) {
	return encodeEvent(o.flags(), events.TypeReplicaChangeRequested, rfData(o), now)
}

func printRFUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter replication-factor --cluster CLUSTER --topic TOPIC --rf N [flags]

Asks a kafkamender worker to give the partitions of TOPIC N replicas each.
To raise the factor, the worker appends new replicas on the brokers that keep
racks diverse and replica counts even: only the new replicas copy data, and
leadership stays where it is. To lower it, it drops replicas, out-of-sync ones
first and never the leader. It refuses a factor above the number of live
brokers or below the topic's min.insync.replicas, and internal topics (__...)
unless its config allows them. Without --partition or --partitions, every
partition of TOPIC is meant.

While new replicas copy, the worker sets a replication throttle (--throttle,
else its configured one), and puts back the throttles that were there before
when it is done. It moves the partitions in batches, so that no broker takes
in too many at once, and reports progress as it goes. If the change takes
longer than --timeout-op (else the worker's configured bound), the worker
cancels the reassignments that have not finished, and the result says which.

The request is a %s event, published to JetStream on
    %s
with the event id as the JetStream message id, as 'emitter publish' does. Its
data:

    {"topic":TOPIC,"partitions":[...],"replication_factor":N,"strategy":...,
     "throttle_bytes_per_sec":BYTES,"timeout":"30m0s","dry_run":true,
     "reason":...}

Without --wait, prints the event id and the stream sequence and exits. With
--wait, subscribes to the result (%s) and the progress
reports (%s) before publishing, shows the progress
on stderr (a progress bar on a terminal, a line per report otherwise), and
prints the result on stdout when it comes. Copies take long: --timeout is %s
by default here, and when the emitter stops waiting the worker carries on. If
the id was published before (--id), the earlier event's stored result is shown
instead: an event id runs once.

--dry-run is for the worker: it plans and reports the plan (status "planned")
but changes nothing. --print is for you: it prints the event and publishes
nothing.

Examples:
    emitter replication-factor --cluster local --topic orders --rf 3 --dry-run --wait
    emitter replication-factor --cluster local --topic orders --rf 3 --throttle 50MiB --timeout-op 2h --wait
    emitter replication-factor --cluster local --topic orders --rf 2 --partitions 0,1 --reason "shrink test topic" --print

`+eventCommandUsageTail, events.TypeReplicaChangeRequested, events.Subject("<cluster>", events.TypeReplicaChangeRequested),
		events.ResultSubject("<id>"), events.ProgressSubject("<id>"), strings.TrimSuffix(defaultRFWaitTimeout.String(), "0m0s"))
	printFlags(w, fs)
}
