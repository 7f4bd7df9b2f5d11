package main

// What the commands that build one typed event from flags (preferred-leader,
// broker-overloaded, replication-factor) share: the flags about the envelope,
// publishing, waiting and printing; their checks; building the event; and the
// run that prints, publishes, or publishes and waits.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/events"
)

// Output formats of a result (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// defaultWaitTimeout is the default --timeout of the commands that wait
// (unless the command sets eventFlags.defaultTimeout).
const defaultWaitTimeout = 2 * time.Minute

// eventOptions are the values of the flags that every event command has.
// Each command's options embed them (see preferredOptions).
type eventOptions struct {
	cluster   string
	reason    string
	dryRun    bool // ask the worker for the plan only
	print     bool // print the event, publish nothing
	wait      bool
	timeout   time.Duration
	output    string
	id        string
	source    string
	expiresIn time.Duration
	natsURL   string
	natsAuth  natsAuth
}

// flags points at the shared flags' values, with the default --timeout
// (defaultWaitTimeout); a command with another default sets
// eventFlags.defaultTimeout on the result.
func (o *eventOptions) flags() eventFlags {
	return eventFlags{
		cluster: &o.cluster, reason: &o.reason,
		dryRun: &o.dryRun, print: &o.print, wait: &o.wait,
		timeout: &o.timeout, expiresIn: &o.expiresIn,
		output: &o.output, id: &o.id, source: &o.source, natsURL: &o.natsURL, natsAuth: &o.natsAuth,
	}
}

// eventFlags points at the values of the flags that every event command has
// (see eventOptions.flags).
type eventFlags struct {
	cluster, reason             *string
	dryRun, print, wait         *bool
	timeout, expiresIn          *time.Duration
	output, id, source, natsURL *string
	natsAuth                    *natsAuth
	// defaultTimeout is the default of --timeout; 0: defaultWaitTimeout.
	defaultTimeout time.Duration
	// idFlag names the flag of the event's own id; "": --id (emitter cancel's --id names
	// the event to cancel, its own is --cancel-id).
	idFlag string
	// clusterOptional: --cluster may be left out, the command finds it (emitter approve and
	// deny read it from the plan); clusterUsage is then the flag's help.
	clusterOptional bool
	clusterUsage    string
}

// register defines the shared flags on fs.
func (f eventFlags) register(fs *pflag.FlagSet) {
	timeout := f.defaultTimeout
	if timeout == 0 {
		timeout = defaultWaitTimeout
	}
	clusterUsage := "Kafka `cluster`, as named in the workers' config (required)"
	if f.clusterOptional {
		clusterUsage = f.clusterUsage
	}
	fs.StringVar(f.cluster, "cluster", "", clusterUsage)
	fs.StringVar(f.reason, "reason", "", "why, in a few `words`: kept with the result for the audit trail")
	fs.BoolVar(f.dryRun, "dry-run", false, "ask the worker for the plan only: the event is published, the worker changes nothing (result status \"planned\")")
	fs.BoolVar(f.wait, "wait", false, "wait for the result and print it; progress goes to stderr")
	fs.DurationVar(f.timeout, "timeout", timeout, "with --wait, give up waiting after `duration` (connecting and publishing included)")
	registerOutputFlags(fs, f.output, "result `format`: table or json (the result as the worker published it)")
	idFlag := f.idFlag
	if idFlag == "" {
		idFlag = "id"
	}
	fs.StringVar(f.id, idFlag, "", "event `id` (default: a random UUID); letters, digits, '-' and '_'. Re-using an id asks for the earlier event's result instead of a new run")
	fs.StringVar(f.source, "source", "", "event `source` (default \"emitter/<user>@<host>\")")
	fs.DurationVar(f.expiresIn, "expires-in", 0, "set the expiresat extension to now + `duration`: workers drop the event after it")
	registerNATSFlags(fs, f.natsURL, f.natsAuth)
	fs.BoolVar(f.print, "print", false, "print the event on stdout instead of publishing it")
}

// check validates the shared flags, with the problems the command found in
// its own flags (own), and returns them all as one usageError, or nil. When
// there is none, it fills in the defaults of the id, the source and the NATS
// URL.
func (f eventFlags) check(e env, own []error) error {
	var errs []error
	if !f.clusterOptional || *f.cluster != "" {
		errs = checkClusterFlag(*f.cluster)
	}
	errs = append(errs, own...)
	errs = append(errs, checkOutputFlag(*f.output)...)
	if *f.print && *f.wait {
		errs = append(errs, errors.New("--print and --wait exclude each other: --print publishes nothing, so no result comes"))
	}
	errs = append(errs, checkEventFlags(*f.id, *f.expiresIn, *f.timeout)...)
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	*f.id, *f.source = eventDefaults(*f.id, *f.source, e)
	if err := resolveNATS(f.natsURL, f.natsAuth, e); err != nil {
		return usageError{err}
	}
	return nil
}

// checkClusterFlag checks --cluster: given, and a cluster name.
func checkClusterFlag(cluster string) []error {
	if cluster == "" {
		return []error{errors.New("--cluster is required")}
	}
	if err := events.CheckClusterName(cluster); err != nil {
		return []error{fmt.Errorf("--cluster %q: %w", cluster, err)}
	}
	return nil
}

// checkOutputFlag checks -o: a result format.
func checkOutputFlag(output string) []error {
	if output != outputTable && output != outputJSON {
		return []error{fmt.Errorf("-o %q: unknown output format (want table or json)", output)}
	}
	return nil
}

// checkBrokerFlag checks --broker: given, and a broker id.
func checkBrokerFlag(broker *int32Flag) []error {
	switch {
	case !broker.set:
		return []error{errors.New("--broker is required")}
	case *broker.v < 0:
		return []error{fmt.Errorf("--broker %d: not a broker id (want 0 or more)", *broker.v)}
	}
	return nil
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

func (f *int32Flag) Type() string { return "int32" }

func (f *int32Flag) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	*f.v, f.set = int32(n), true
	return nil
}

// encodeEvent builds the event of type typ with data, as the shared flags
// say, and checks it with the decoder the workers use, so that what is
// published is what a worker accepts.
func encodeEvent(f eventFlags, typ string, data any, now time.Time) (ev events.Envelope, subject string, body []byte, err error) {
	return events.New(*f.cluster, typ, *f.id, *f.source, data, now, *f.expiresIn)
}

// eventCommand is the parsed command line of an event command.
type eventCommand interface {
	// flags are the shared flags.
	flags() eventFlags
	// build builds, encodes and checks the event (see encodeEvent).
	build(now time.Time) (ev events.Envelope, subject string, body []byte, err error)
}

// progressOfOthers is an event command whose --wait also shows the progress of other
// events (emitter approve: the progress of the plan's event, which the approval runs).
type progressOfOthers interface {
	progressOf() []string
}

// runEventCommand runs the event command called name, whose checked command line
// is cmd: it prints the event (--print), or publishes it, and with --wait waits for
// the result and prints it. It returns the exit status.
func runEventCommand(ctx context.Context, e env, name string, cmd eventCommand) int {
	f := cmd.flags()

	ev, subject, body, err := cmd.build(e.now())
	if err != nil {
		// The flags were checked; this is a bug rather than a usage error.
		fmt.Fprintf(e.stderr, "%s: event %s: %v\n", name, *f.id, err)
		return exitFailure
	}

	if *f.print {
		pretty, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: encode event %s: %v\n", name, ev.ID, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", pretty)
		fmt.Fprintf(e.stderr, "--print: event %s not published to %s\n", ev.ID, subject)
		return exitOK
	}

	if *f.wait {
		req := waitRequest{
			natsURL: *f.natsURL, natsAuth: *f.natsAuth, timeout: *f.timeout, output: *f.output,
			cluster: *f.cluster, subject: subject, id: ev.ID, body: body,
		}
		if c, ok := cmd.(progressOfOthers); ok {
			req.progressOf = c.progressOf()
		}
		return publishAndWait(ctx, e, name, req)
	}

	timeout := min(*f.timeout, publishTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ack, err := publish(ctx, *f.natsURL, *f.natsAuth, timeout, subject, ev.ID, body)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: event %s: %v\n", name, ev.ID, err)
		return exitFailure
	}
	fmt.Fprintln(e.stdout, publishedLine(ev.ID, ack))
	return exitOK
}

// eventCommandUsageTail is the end of the help text of the event commands,
// up to the list of flags.
const eventCommandUsageTail = `Exit status:
    0  published; with --wait: the result is succeeded, noop or planned
    1  publishing failed; with --wait: the result is partial, failed, rejected,
       denied, expired or cancelled
    2  usage error
    3  with --wait: no result within --timeout (the event stays queued, or its
       plan waits for approval; look for its result later with
       'emitter result --id ID')

Flags:
`
