package main

// The cancel command: cancel an event (an operation-cancel event).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// cancelOptions are the flags of emitter cancel.
type cancelOptions struct {
	eventOptions
	target string // --id: the event to cancel
}

func (o *cancelOptions) flags() eventFlags {
	f := o.eventOptions.flags()
	f.idFlag = "cancel-id"
	return f
}

func (o *cancelOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), events.TypeOperationCancel, events.OperationCancel{ID: o.target, Reason: o.reason}, now)
}

// define defines the flags of cancel.
func (o *cancelOptions) define(fs *pflag.FlagSet) func(env) error {
	o.flags().register(fs)
	fs.StringVar(&o.target, "id", "", "the `id` of the event to cancel (required)")
	return func(e env) error {
		var errs []error
		switch {
		case o.target == "":
			errs = append(errs, errors.New("--id is required: the id of the event to cancel"))
		default:
			if err := events.CheckID(o.target); err != nil {
				errs = append(errs, fmt.Errorf("--id %q: %w", o.target, err))
			}
		}
		if o.dryRun {
			errs = append(errs, errors.New("--dry-run: a cancel has no plan; --print shows the event without publishing it"))
		}
		return o.flags().check(e, errs) // fills in defaults
	}
}

func (o *cancelOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

func printCancelUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter cancel --cluster CLUSTER --id EVENT-ID [flags]

Cancels an event of the cluster (a %s event). One that waits (in the
cluster's queue, behind a pause) never runs: its result is "cancelled". One
that runs stops within seconds: the copies in flight that are its own are
cancelled (and log-dir moves), the partitions not finished go back to their
replicas and leader before the event, every throttle it set goes back to its
value before the event; partitions finished keep their new state. Its result is
"cancelled", listing them. Someone else's reassignment is never touched. On a
cluster before Kafka 2.4 copies cannot be cancelled: they are waited out.

The request is published to JetStream on
    %s
and taken ahead of the cluster's waiting events. Its data:

    {"id":EVENT-ID,"reason":...}

--wait subscribes to the cancel's result (%s) and prints it: it
says what came of the event (its own result is on %s).
The cancel's own event id is --cancel-id (default: a random UUID).

Example:
    emitter cancel --cluster local --id rf-orders-3 --reason "INC-42: stop the copy" --wait

`+eventCommandUsageTail, events.TypeOperationCancel, events.Subject("<cluster>", events.TypeOperationCancel),
		events.ResultSubject("<cancel-id>"), events.ResultSubject("<id>"))
	printFlags(w, fs)
}
