// Command emitter publishes kafkamender events, for people and scripts that
// want a worker to act on a Kafka cluster without an alerting pipeline, and
// shows their results.
//
//	emitter publish --cluster local --type replica-change-requested \
//	    --data '{"topic":"orders","partitions":[1],"preferred_leader":2}'
//	emitter preferred-leader --cluster local --topic orders --broker 2 --partition 1 --wait
//	emitter broker-overloaded --cluster local --broker 1 --dry-run --wait
//	emitter replication-factor --cluster local --topic orders --rf 3 --throttle 50MiB --wait
//	emitter broker-failed --cluster local --broker 3 --rack eu-west-1a --throttle 50MiB --wait
//	emitter broker-added --cluster local --brokers 4,5,6 --dry-run --wait
//	emitter partition-offline --cluster local --topic orders --dry-run --wait
//	emitter result --id a1b2
//	emitter plans --cluster local
//	emitter approve --id plan-5c0e1d2a3b4c5d6e7f80 --reason "INC-7" --wait
//
// Run emitter --help for the whole story. Exit status: 0 ok, 1 failure (or a
// result that is not succeeded, noop or planned), 2 usage error, 3 no result
// within --timeout, 4 no result stored.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"golang.org/x/term"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // includes a result whose status is not OK
	exitUsage   = 2
	exitNoReply = 3 // --wait: no result before --timeout (or an interrupt); the event stays queued
	exitNoStore = 4 // result: no result stored for the event id
)

// env is what the commands take from the process, so tests can fix it.
type env struct {
	stdout, stderr io.Writer
	// stderrIsTerminal: stderr is a terminal, where --wait draws a live
	// progress bar (otherwise it prints a line per progress report).
	stderrIsTerminal bool
	getenv           func(string) string
	now              func() time.Time
	newID            func() string
	user, host       func() string // for the default --source
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := env{
		stdout:           os.Stdout,
		stderr:           os.Stderr,
		stderrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
		getenv:           os.Getenv,
		now:              time.Now,
		newID:            events.NewID,
		user:             currentUser,
		host:             hostname,
	}
	code := run(ctx, os.Args[1:], e)
	stop()
	os.Exit(code)
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`emitter publishes kafkamender events: requests for a kafkamender worker to
change the partition placement of a Kafka cluster.

An event is a CloudEvents 1.0 event in structured JSON mode (the NATS message
body is the whole event as JSON; data holds the request). It is published to
NATS JetStream on the subject

    ` + events.Subject("<cluster>", "<type>") + `

and stored by the stream ` + events.EventsStream + `, which the workers create; a worker
then takes the cluster's lock, plans, applies and verifies the change.

Usage:
    emitter publish --cluster CLUSTER --type TYPE --data '{...}' [flags]
    emitter preferred-leader --cluster CLUSTER --topic TOPIC --broker BROKER [flags]
    emitter broker-overloaded --cluster CLUSTER --broker BROKER [flags]
    emitter replication-factor --cluster CLUSTER --topic TOPIC --rf N [flags]
    emitter logdir-move --cluster CLUSTER --broker ID [flags]
    emitter broker-failed --cluster CLUSTER --broker ID [flags]
    emitter broker-drain --cluster CLUSTER --broker ID [flags]
    emitter broker-added --cluster CLUSTER --broker ID [--broker ID...] [flags]
    emitter partition-offline --cluster CLUSTER [--topic TOPIC [--partition N...]] [flags]
    emitter pause --cluster CLUSTER --reason WORDS [--until TIME] [flags]
    emitter resume --cluster CLUSTER [flags]
    emitter cancel --cluster CLUSTER --id EVENT-ID [flags]
    emitter approve --id PLAN-ID [--cluster CLUSTER] [--reason WORDS] [flags]
    emitter deny --id PLAN-ID [--cluster CLUSTER] --reason WORDS [flags]
    emitter plans [--cluster CLUSTER] [--all] [flags]
    emitter plan show --id PLAN-ID [--cluster CLUSTER] [flags]
    emitter status [--cluster CLUSTER] [flags]
    emitter result --id ID [flags]
    emitter completion bash|zsh|fish
    emitter help [COMMAND]
    emitter --version

Commands:
    publish           build an event of any type from JSON data, validate it and
                      publish it (or print it with --dry-run)
    preferred-leader  make a broker the preferred leader of partitions of a topic
                      (a replica-change-requested event); --wait waits for the
                      worker's result and prints it, --dry-run asks for the plan
    broker-overloaded
                      move partition leadership off a broker to the other
                      in-sync replicas, balanced (a broker-overloaded event);
                      --wait and --dry-run as for preferred-leader
    replication-factor
                      give the partitions of a topic N replicas each (a
                      replica-change-requested event), throttled, in batches;
                      --wait shows the copy's progress and waits up to 2h for
                      the result, --dry-run asks for the plan
    logdir-move       move replicas between the log directories (disks) of a
                      broker (a logdir-move-requested event): one replica, or a
                      balance of the fullest directory into the emptiest;
                      --wait shows the copy's progress, --dry-run the plan
    broker-failed     recreate on the other brokers every replica of a broker that
                      is gone for good (a broker-failed event; refused while the
                      broker is alive), throttled; --wait shows the copy's
                      progress, --dry-run the plan
    broker-drain      empty a live broker: shed its leadership, then copy its
                      replicas to other brokers (a broker-drain event), throttled;
                      --wait and --dry-run as for broker-failed
    broker-added      move onto new or empty brokers the fewest replicas and
                      leaders that even out the cluster (a broker-added event),
                      throttled; --wait and --dry-run as for broker-failed
    partition-offline
                      elect a leader for partitions that have none (a
                      partition-offline event): clean where an in-sync replica
                      is alive, unclean (records lost) only with --allow-unclean
                      where the worker's configuration allows it too; --wait
                      and --dry-run as for preferred-leader
    pause             switch the automation off for a cluster (a cluster-pause
                      event): its events wait in order, not run, until resume
                      or --until; --wait waits for the worker's result
    resume            switch it back on (a cluster-resume event): the waiting
                      events run in publish order
    cancel            cancel an event (an operation-cancel event): one waiting
                      never runs; one running stops, what is not finished goes
                      back as before, throttles put back (result cancelled)
    approve           approve a plan that waits for approval (a plan-approved
                      event): it runs exactly as stored if the cluster still
                      matches it; --wait prints the outcome
    deny              deny a plan that waits for approval (a plan-denied
                      event): its event ends denied, nothing changed
    plans             list the plans awaiting approval (bucket ` + events.PlansBucket + `)
    plan show         show one plan, partition by partition
    status            per cluster: paused or not, the lock, the operation in
                      flight, the events waiting, the plans awaiting approval
    completion        print a shell completion script (bash, zsh, fish)
    result            print the stored result of an event (stream ` + events.ResultsStream + `)

A worker publishes one result for every event on
` + events.ResultSubject("<event-id>") + ` (kept in stream ` + events.ResultsStream + `) and
progress reports on ` + events.ProgressSubject("<event-id>") + `. With --wait, the
commands show the progress of replica copies on stderr: a live progress bar
when stderr is a terminal, a line per report otherwise. An event whose plan
waits for a person's approval is answered first with the interim result
` + string(events.StatusAwaitingApproval) + ` (then ` + string(events.StatusApproved) + `): --wait says so on stderr and
keeps waiting for the final result.

Event types:
`)
	for _, t := range events.Types() {
		fmt.Fprintf(&b, "    %-26s %s\n", t.Name, t.Summary)
	}
	b.WriteString(`
Run 'emitter COMMAND --help' for the flags of a command; docs/contract.md lists the
data fields of each event type.

Exit status:
    0  ok; with --wait or for result: the status is succeeded, noop or planned
    1  failure; with --wait or for result: the status is partial, failed,
       rejected, denied, expired or cancelled
    2  usage error
    3  --wait: no result within --timeout (the event stays queued, or its plan
       waits for approval)
    4  result: no result stored for the event id
`)
	_, _ = io.WriteString(w, b.String())
}

// currentUser names the user for the default event source.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}
