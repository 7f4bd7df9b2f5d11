package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// logDirOptions are the flags of emitter logdir-move.
type logDirOptions struct {
	eventOptions
	broker    int32
	topic     string
	partition int32
	fromDir   string
	toDir     string
	throttle  int64 // bytes/s; 0: the worker's default
	opTimeout time.Duration
	hasPart   bool
}

// flags are the shared flags, with the longer default --timeout of copies.
func (o *logDirOptions) flags() eventFlags {
	f := o.eventOptions.flags()
	f.defaultTimeout = defaultRFWaitTimeout
	return f
}

func (o *logDirOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypeLogDirMoveRequested, logDirData(*o), now)
}

// define defines the flags of logdir-move.
func (o *logDirOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	broker := &int32Flag{v: &o.broker}
	part := &int32Flag{v: &o.partition}
	fs.Var(broker, "broker", "the `id` of the broker whose log directories change (required)")
	fs.StringVar(&o.topic, "topic", "", "move one replica: its `topic` (with --partition and --to-dir)")
	fs.Var(part, "partition", "move one replica: its `partition` (with --topic and --to-dir)")
	fs.StringVar(&o.fromDir, "from-dir", "", "balance: the source `directory`, as in the broker's log.dirs (default: the fullest)")
	fs.StringVar(&o.toDir, "to-dir", "", "the target `directory`, as in the broker's log.dirs (default for a balance: the emptiest)")
	fs.Var(byteSizeFlag{&o.throttle}, "throttle", "the broker's replica.alter.log.dirs.io.max.bytes.per.second while replicas copy: a `size` per second such as 50MB or 10MiB (default: the worker's configured throttle)")
	fs.DurationVar(&o.opTimeout, "timeout-op", 0, "how long the worker may take before it cancels the unfinished moves: a `duration` such as 30m (default: the worker's configured bound); --timeout is how long the emitter waits")
	return func(e env) error {
		o.hasPart = part.set
		var errs []error
		switch {
		case !broker.set:
			errs = append(errs, errors.New("--broker is required"))
		case o.broker < 0:
			errs = append(errs, fmt.Errorf("--broker %d: must not be negative", o.broker))
		}
		single := o.topic != "" || part.set
		switch {
		case single && o.fromDir != "":
			errs = append(errs, errors.New("--from-dir is for a balance; to move one replica give --topic, --partition and --to-dir"))
		case single && (o.topic == "" || !part.set):
			errs = append(errs, errors.New("--topic and --partition go together (one replica)"))
		case single && o.toDir == "":
			errs = append(errs, errors.New("--to-dir is required to move one replica"))
		case single:
			errs = append(errs, checkTopicFlag(o.topic)...)
			if o.partition < 0 {
				errs = append(errs, fmt.Errorf("--partition %d: must not be negative", o.partition))
			}
		case o.fromDir != "" && o.fromDir == o.toDir:
			errs = append(errs, fmt.Errorf("--from-dir and --to-dir are the same directory %q", o.fromDir))
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

func (o *logDirOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// logDirData is the data of the logdir-move-requested event the flags ask for.
func logDirData(o logDirOptions) events.LogDirMove {
	b := o.broker
	d := events.LogDirMove{Broker: &b, Topic: o.topic, FromDir: o.fromDir, ToDir: o.toDir,
		ThrottleBytesPerSec: o.throttle, Timeout: events.Duration{Duration: o.opTimeout}, DryRun: o.dryRun, Reason: o.reason}
	if o.hasPart {
		p := o.partition
		d.Partition = &p
	}
	return d
}

func printLogDirUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter logdir-move --cluster CLUSTER --broker ID [--from-dir DIR] [--to-dir DIR] [flags]
       emitter logdir-move --cluster CLUSTER --broker ID --topic TOPIC --partition P --to-dir DIR [flags]

Asks a kafkamender worker to move replicas between the log directories (disks)
of one broker, online: the broker copies each replica into the target
directory and swaps it in when it has caught up (AlterReplicaLogDirs). The
replicas stay on the broker; only their directory changes.

With --topic and --partition, that one replica moves to --to-dir. Otherwise it
is a balance: replicas of --from-dir (default: the fullest directory) move to
--to-dir (default: the emptiest), as few bytes as bring the two within the
worker's tolerance (logdir.tolerance, 10%% of their combined size by default),
never more than the imbalance. Directories are named as in the broker's
log.dirs; a dry run lists them in its refusal when one is unknown.

While replicas copy, the worker sets the broker's
replica.alter.log.dirs.io.max.bytes.per.second (--throttle, else its
configured one) and puts back the value that was there before when it is
done. If the move takes longer than --timeout-op (else the worker's configured
bound), the moves still copying are cancelled and the result says which
finished.

The request is a %s event, published to JetStream on
    %s
Its data:

    {"broker":ID,"topic":TOPIC,"partition":P,"from_dir":DIR,"to_dir":DIR,
     "throttle_bytes_per_sec":BYTES,"timeout":"30m0s","dry_run":true,"reason":...}

--wait subscribes to the result (%s) and the progress
reports (%s), shows the progress on stderr and prints
the result. --dry-run asks the worker for the plan (status "planned"); --print
prints the event and publishes nothing.

Examples:
    emitter logdir-move --cluster local --broker 1 --dry-run --wait
    emitter logdir-move --cluster local --broker 1 --from-dir /data1/kafka --to-dir /data2/kafka --throttle 50MiB --wait
    emitter logdir-move --cluster local --broker 1 --topic orders --partition 3 --to-dir /data2/kafka --wait

`+eventCommandUsageTail, events.TypeLogDirMoveRequested, events.Subject("<cluster>", events.TypeLogDirMoveRequested),
		events.ResultSubject("<id>"), events.ProgressSubject("<id>"))
	printFlags(w, fs)
}
