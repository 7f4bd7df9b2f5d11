package main

// The partition-offline command: elect a leader for partitions that have none, clean where
// a replica of the last in-sync replicas is alive, unclean only where allowed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// partitionOfflineOptions are the flags of emitter partition-offline.
type partitionOfflineOptions struct {
	eventOptions
	topic        string  // "": every topic
	partitions   []int32 // nil: every partition of topic; only with topic
	allowUnclean bool
}

func (o *partitionOfflineOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return buildPartitionOfflineEvent(*o, now)
}

// define defines the flags of partition-offline.
func (o *partitionOfflineOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	fs.StringVar(&o.topic, "topic", "", "only the partitions of `topic` (default: every partition of the cluster without a leader)")
	fs.Var(int32sFlag{list: &o.partitions, what: "partition number"}, "partition", "only this `partition` of --topic; repeat for several (default: every partition of --topic without a leader)")
	fs.Var(int32sFlag{list: &o.partitions, comma: true, what: "partition number"}, "partitions", "comma-separated `list` of partitions of --topic, same as several --partition")
	fs.BoolVar(&o.allowUnclean, "allow-unclean", false, "allow an unclean election where no replica of the last in-sync replicas is alive: a live replica outside them becomes the leader, and the records only they held are lost (the worker's partition_offline.allow_unclean must allow it too)")
	return func(e env) error {
		var errs []error
		switch {
		case o.topic != "":
			if err := events.CheckTopicName(o.topic); err != nil {
				errs = append(errs, fmt.Errorf("--topic %q: %w", o.topic, err))
			}
		case len(o.partitions) > 0:
			errs = append(errs, errors.New("--partition needs --topic (partitions are numbered within a topic)"))
		}
		if len(o.partitions) > events.MaxListedPartitions {
			errs = append(errs, fmt.Errorf("--partition: %d partitions, over the limit of %d", len(o.partitions), events.MaxListedPartitions))
		}
		errs = append(errs, checkPartitions(o.partitions)...)
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *partitionOfflineOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

// partitionOfflineData is the data of the partition-offline event the flags ask for.
func partitionOfflineData(o partitionOfflineOptions) events.PartitionOffline {
	return events.PartitionOffline{Topic: o.topic, Partitions: o.partitions, AllowUnclean: o.allowUnclean,
		DryRun: o.dryRun, Reason: o.reason}
}

// buildPartitionOfflineEvent builds the event and checks it with the decoder the workers use.
func buildPartitionOfflineEvent(o partitionOfflineOptions, now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypePartitionOffline, partitionOfflineData(o), now)
}

func printPartitionOfflineUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter partition-offline --cluster CLUSTER [--topic TOPIC [--partition N...]] [flags]

Asks a kafkamender worker to elect a leader for the partitions that have none
(offline partitions): every one of the cluster, those of --topic, or the
partitions of --topic named by --partition or --partitions.

Where a replica of a partition's last in-sync replicas (the ISR the metadata
keeps for a partition without a leader) is alive, the election is clean: that
replica becomes the leader and no record is lost. Where none is alive, only an
unclean election can bring the partition back: a live replica outside the last
ISR becomes the leader, and the records only the last ISR held are lost. The
worker makes one only with --allow-unclean and when its configuration allows it
too (partition_offline.allow_unclean); else it refuses, naming the last ISR,
the live candidates and their log end offsets. The change of an unclean
election says which offsets were put at risk (lost_offsets).

The request is a %s event, published to JetStream on
    %s
Its data:

    {"topic":TOPIC,"partitions":[N,...],"allow_unclean":true,"dry_run":true,
     "reason":...}

--wait subscribes to the result (%s) and prints it.
--dry-run asks the worker for the plan (status "planned"): which replica each
partition would get as its leader, and what an unclean election would lose;
--print prints the event and publishes nothing.

Examples:
    emitter partition-offline --cluster local --dry-run --wait
    emitter partition-offline --cluster local --topic orders --partitions 0,3 --wait
    emitter partition-offline --cluster local --topic orders --partition 3 --allow-unclean --reason "brokers 1 and 2 lost" --wait

`+eventCommandUsageTail, events.TypePartitionOffline, events.Subject("<cluster>", events.TypePartitionOffline),
		events.ResultSubject("<id>"))
	printFlags(w, fs)
}
