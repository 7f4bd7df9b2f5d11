package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// resultOptions are the flags of emitter result.
type resultOptions struct {
	id       string
	output   string
	natsURL  string
	natsAuth natsAuth
	timeout  time.Duration
}

// define defines the flags of result.
func (o *resultOptions) define(fs *pflag.FlagSet) func(env) error {
	fs.StringVar(&o.id, "id", "", "the event `id` (required)")
	registerOutputFlags(fs, &o.output, "result `format`: table or json (the result as the worker published it)")
	registerNATSFlags(fs, &o.natsURL, &o.natsAuth)
	fs.DurationVar(&o.timeout, "timeout", publishTimeout, "give up connecting and reading after `duration`")
	return o.check
}

// check validates the flags of result, and resolves the NATS connection.
func (o *resultOptions) check(e env) error {
	var errs []error
	switch {
	case o.id == "":
		errs = append(errs, errors.New("--id is required"))
	case !events.ValidID(o.id):
		errs = append(errs, fmt.Errorf("--id %q: not a valid event id (want at most %d letters, digits, '-' or '_')", o.id, events.MaxIDLength))
	}
	return checkReadFlags(e, errs, o.output, o.timeout, &o.natsURL, &o.natsAuth)
}

// checkReadFlags ends the checks of a command that reads from NATS (result, status,
// plans): own are the problems it found in its own flags; --output and --timeout are
// checked, and the NATS connection resolved. Nil, or one usageError with every problem.
func checkReadFlags(e env, own []error, output string, timeout time.Duration, natsURL *string, auth *natsAuth) error {
	errs := append(own, checkOutputFlag(output)...)
	if timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	if err := resolveNATS(natsURL, auth, e); err != nil {
		return usageError{err}
	}
	return nil
}

func printResultUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter result --id ID [flags]

Prints the result a worker published for event ID, as kept in stream %s
(subject %s): the audit trail of what the event did.

Exit status:
    0  the result's status is succeeded, noop or planned
    1  the status is partial, failed, rejected, denied, expired or cancelled;
       or reading failed
    2  usage error
    4  no result stored for the event (not handled yet, its plan waits for
       approval, unknown id, or aged out)

Flags:
`, events.ResultsStream, events.ResultSubject("<id>"))
	printFlags(w, fs)
}

func (o *resultOptions) run(ctx context.Context, e env, name string) int {

	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	js, closeNC, ok := connectJetStream(e, name, o.natsURL, o.natsAuth, o.timeout)
	if !ok {
		return exitFailure
	}
	defer closeNC()
	got, err := lookupResult(ctx, js, o.id)
	switch {
	case errors.Is(err, errNoResultsStream):
		fmt.Fprintf(e.stderr, "%s: no result stored for event %s: %v\n", name, o.id, err)
		return exitNoStore
	case err != nil:
		fmt.Fprintf(e.stderr, "%s: event %s: %v\n", name, o.id, err)
		return exitFailure
	case got == nil:
		fmt.Fprintf(e.stderr, "%s: no result stored for event %s\n", name, o.id)
		return exitNoStore
	}
	// The table need not say the result was stored: that is what was asked for.
	got.stored = false
	if err := writeResult(e.stdout, got, o.output); err != nil {
		fmt.Fprintf(e.stderr, "%s: event %s: print the result: %v\n", name, o.id, err)
		return exitFailure
	}
	return exitForStatus(got.result.Status)
}

// connectJetStream connects for a command that reads from JetStream; false: it could not,
// and said why on stderr.
func connectJetStream(e env, name, url string, auth natsAuth, timeout time.Duration) (jetstream.JetStream, func(), bool) {
	nc, err := connect(url, auth, timeout)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return nil, nil, false
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		fmt.Fprintf(e.stderr, "%s: jetstream: %v\n", name, err)
		return nil, nil, false
	}
	return js, nc.Close, true
}
