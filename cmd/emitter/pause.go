package main

// The pause and resume commands: switch a cluster's automation off and on (cluster-pause,
// cluster-resume events).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// pauseOptions are the flags of emitter pause and emitter resume.
type pauseOptions struct {
	eventOptions
	resume bool
	until  string // RFC 3339, or a duration from now
	now    time.Time
}

func (o *pauseOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	if o.resume {
		return encodeEvent(o.flags(), events.TypeClusterResume, events.ClusterResume{Reason: o.reason}, now)
	}
	until, _ := parseUntil(o.until, now)
	data := events.ClusterPause{Reason: o.reason}
	if !until.IsZero() {
		data.Until = until.UTC().Format(time.RFC3339)
	}
	return encodeEvent(o.flags(), events.TypeClusterPause, data, now)
}

// parseUntil reads --until: an RFC 3339 time, or a duration from now ("2h"); "" is none.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--until %q: want an RFC 3339 time (2026-12-04T18:00:00Z) or a duration from now (2h)", s)
	}
	return now.Add(d).Truncate(time.Second), nil
}

// define defines the flags of pause, or of resume (o.resume).
func (o *pauseOptions) define(fs *pflag.FlagSet) func(env) error {
	resume := o.resume
	o.flags().register(fs)
	if !resume {
		fs.StringVar(&o.until, "until", "", "end the pause by itself at `time` (RFC 3339) or after a duration (2h); default: until emitter resume")
	}
	return func(e env) error {
		var errs []error
		if o.dryRun {
			errs = append(errs, errors.New("--dry-run: a pause or a resume has no plan; --print shows the event without publishing it"))
		}
		if !resume {
			if strings.TrimSpace(o.reason) == "" {
				errs = append(errs, errors.New("--reason is required: say why the automation is off (it is shown on every event held)"))
			}
			until, err := parseUntil(o.until, e.now())
			switch {
			case err != nil:
				errs = append(errs, err)
			case !until.IsZero() && !until.After(e.now()):
				errs = append(errs, fmt.Errorf("--until %s: not in the future", o.until))
			case !until.IsZero() && until.Sub(e.now()) > events.MaxPause:
				errs = append(errs, fmt.Errorf("--until %s: more than %s ahead (pause without --until, and resume)", o.until, events.MaxPause))
			}
		}
		return o.flags().check(e, errs)
	}
}

func (o *pauseOptions) run(ctx context.Context, e env, name string) int {
	return runEventCommand(ctx, e, name, o)
}

func printPauseUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter pause --cluster CLUSTER --reason WORDS [--until TIME] [flags]

Switches the automation off for a cluster (a %s event), during an
incident or a maintenance window: from the moment a worker stores the pause,
the cluster's events wait in publish order, not lost and not run (dry runs are
still answered); an operation that runs is left to finish. Each waiting event's
progress (%s) says who paused the cluster, until
when and why. The pause is stored in NATS (bucket %s) and outlives
every worker; a pause of a paused cluster replaces it. It ends with
'emitter resume', or by itself at --until.

The request is published to JetStream on
    %s
and taken ahead of the cluster's waiting events. Its data:

    {"reason":...,"until":"2026-12-04T18:00:00Z"}

--wait subscribes to the result (%s) and prints it.

Examples:
    emitter pause --cluster local --reason "INC-42: hands off until the disk is replaced" --wait
    emitter pause --cluster local --reason "maintenance window" --until 2h --wait

`+eventCommandUsageTail, events.TypeClusterPause, events.ProgressSubject("<id>"), events.PausesBucket,
		events.Subject("<cluster>", events.TypeClusterPause), events.ResultSubject("<id>"))
	printFlags(w, fs)
}

func printResumeUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter resume --cluster CLUSTER [flags]

Switches the automation of a paused cluster back on (a %s event): the
events that waited run in publish order. The result is "noop" when the
cluster was not paused.

The request is published to JetStream on
    %s
and taken ahead of the cluster's waiting events. Its data:

    {"reason":...}

--wait subscribes to the result (%s) and prints it.

Example:
    emitter resume --cluster local --reason "disk replaced" --wait

`+eventCommandUsageTail, events.TypeClusterResume, events.Subject("<cluster>", events.TypeClusterResume),
		events.ResultSubject("<id>"))
	printFlags(w, fs)
}
