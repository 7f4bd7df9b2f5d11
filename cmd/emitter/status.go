package main

// The status command: what the fleet is doing on each cluster, read from NATS.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/fleetstatus"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// statusOptions are the flags of emitter status.
type statusOptions struct {
	cluster  string // "": every cluster a fleet serves
	consumer string
	output   string
	natsURL  string
	natsAuth natsAuth
	timeout  time.Duration
}

// define defines the flags of status.
func (o *statusOptions) define(fs *pflag.FlagSet) func(env) error {
	fs.StringVar(&o.cluster, "cluster", "", "only this `cluster` (default: every cluster the fleet has a consumer for)")
	fs.StringVar(&o.consumer, "consumer", pipeline.DefaultConsumer, "the fleet's `name` (its nats.consumer): its consumers are NAME_<cluster>")
	registerOutputFlags(fs, &o.output, "`format`: table or json")
	registerNATSFlags(fs, &o.natsURL, &o.natsAuth)
	fs.DurationVar(&o.timeout, "timeout", publishTimeout, "give up connecting and reading after `duration`")
	return o.check
}

// check validates the flags of status, and resolves the NATS connection.
func (o *statusOptions) check(e env) error {
	var errs []error
	if o.cluster != "" {
		errs = append(errs, checkClusterFlag(o.cluster)...)
	}
	if !events.ValidToken(o.consumer) {
		errs = append(errs, fmt.Errorf("--consumer %q: not a consumer name (letters, digits, '-' and '_')", o.consumer))
	}
	return checkReadFlags(e, errs, o.output, o.timeout, &o.natsURL, &o.natsAuth)
}

func printStatusUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter status [--cluster CLUSTER] [flags]

Says, for each cluster (read from NATS, as the workers keep it):
  - paused or not: who paused it, since and until when, why (bucket %s);
  - the lock: where the fleet keeps it, and its holder when it is in NATS;
  - the operation in flight: its event, type, step, worker and attempt, how many
    partitions it changes and how many copies it submitted (bucket %s);
  - the events waiting in the cluster's queue, and the one out (consumer
    NAME_<cluster> of stream %s);
  - the plans awaiting approval (bucket %s; 'emitter plans' lists them).

Exit status:
    0  read
    1  reading failed
    2  usage error

Flags:
`, events.PausesBucket, events.JournalBucket, events.EventsStream, events.PlansBucket)
	printFlags(w, fs)
}

// The status types are package fleetstatus's, which the console shares.
type (
	clusterStatus = fleetstatus.Cluster
	lockStatus    = fleetstatus.Lock
	lockHolder    = fleetstatus.Holder
	inFlight      = fleetstatus.InFlight
)

func (o *statusOptions) run(ctx context.Context, e env, name string) int {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	js, closeNC, ok := connectJetStream(e, name, o.natsURL, o.natsAuth, o.timeout)
	if !ok {
		return exitFailure
	}
	defer closeNC()
	st, err := fleetstatus.Read(ctx, js, o.consumer, o.cluster)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	if o.output == outputJSON {
		out, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	}
	writeStatus(e.stdout, st, e.now())
	return exitOK
}

// maxStatusPlans is how many ids of plans awaiting approval status names per cluster.
const maxStatusPlans = 5

// writeStatus prints the clusters' status, a block each.
func writeStatus(w io.Writer, st []clusterStatus, now time.Time) {
	if len(st) == 0 {
		fmt.Fprintln(w, "no cluster: no fleet has created its consumers yet")
		return
	}
	for i, s := range st {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "cluster %s\n", s.Cluster)
		paused := "no"
		if s.Paused != nil {
			paused = "yes: " + s.Paused.String()
		}
		fmt.Fprintf(w, "  paused:     %s\n", paused)
		lock := "not taken yet"
		switch {
		case s.Lock.Holder != nil:
			lock = fmt.Sprintf("held by %s for event %s (%s)", s.Lock.Holder.Worker, s.Lock.Holder.Event, s.Lock.Location)
		case strings.HasPrefix(s.Lock.Location, "nats"):
			lock = "free (" + s.Lock.Location + ")"
		case s.Lock.Location != "":
			lock = "in " + s.Lock.Location + " (its holder is the worker of the operation in flight)"
		}
		fmt.Fprintf(w, "  lock:       %s\n", lock)
		flight := "none"
		if f := s.InFlight; f != nil {
			flight = fmt.Sprintf("%s (%s): step %s, attempt %d by %s, started %s ago; %d partitions planned, %d copies submitted",
				f.Event, f.Type, f.Step, f.Attempt, f.Worker, now.Sub(f.Started).Round(time.Second), f.Partitions, f.Reassignments)
		}
		fmt.Fprintf(w, "  in flight:  %s\n", flight)
		fmt.Fprintf(w, "  waiting:    %d events, %d out; %d control events\n", s.Waiting, s.Out, s.ControlWaiting)
		plans := "none awaiting"
		if n := len(s.PlansAwaiting); n > 0 {
			ids := s.PlansAwaiting[:min(n, maxStatusPlans)]
			more := ""
			if n > len(ids) {
				more = fmt.Sprintf(" and %d more", n-len(ids))
			}
			plans = fmt.Sprintf("%s awaiting: %s%s (emitter plans --cluster %s)", plural(n, "plan"), strings.Join(ids, ", "), more, s.Cluster)
		}
		fmt.Fprintf(w, "  approval:   %s\n", plans)
	}
}
