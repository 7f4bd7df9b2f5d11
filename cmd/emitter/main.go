// Command emitter publishes kafkamender events, for people and scripts that
// want a worker to act on a Kafka cluster without an alerting pipeline.
//
//	emitter publish --cluster local --type replica-change-requested \
//	    --data '{"topic":"orders","partitions":[1],"preferred_leader":2}'
//
// Run emitter --help for the whole story. Exit status: 0 ok, 2 usage error,
// 1 failure.
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
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// env is what the commands take from the process, so tests can fix it.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	newID          func() string
	user, host     func() string // for the default --source
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := env{
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		now:    time.Now,
		newID:  events.NewID,
		user:   currentUser,
		host:   hostname,
	}
	code := run(ctx, os.Args[1:], e)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "publish":
		return runPublish(ctx, rest, e)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && rest[0] == "publish" {
			return runPublish(ctx, []string{"--help"}, e)
		}
		usage(e.stdout)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "emitter: unknown command %q\n\n", cmd)
		usage(e.stderr)
		return exitUsage
	}
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
    emitter help [publish]

Commands:
    publish    build an event, validate it and publish it (or print it with --dry-run)

Event types:
`)
	for _, t := range events.Types() {
		fmt.Fprintf(&b, "    %-26s %s\n", t.Name, t.Summary)
	}
	b.WriteString(`
Run 'emitter publish --help' for the flags of publish; DESIGN.md lists the
data fields of each event type.

Exit status: 0 ok, 2 usage error, 1 failure.
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
