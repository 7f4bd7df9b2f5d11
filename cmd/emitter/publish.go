package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
)

const (
	defaultNATSURL = "nats://127.0.0.1:4222,nats://127.0.0.1:4232,nats://127.0.0.1:4242" // the local stack's NATS cluster
	envNATSURL     = "KAFKAMENDER_NATS_URL"
)

// errCodeStreamNotMatch is the JetStream API error code of a publish whose
// expected stream is not the stream that captured the subject.
const errCodeStreamNotMatch jetstream.ErrorCode = 10060

// publishOptions are the flags of emitter publish.
type publishOptions struct {
	cluster   string
	typ       string
	data      string
	id        string
	source    string
	expiresIn time.Duration
	natsURL   string
	natsAuth  natsAuth
	timeout   time.Duration
	print     bool
	// dryRun is --dry-run, the earlier name of --print on publish (only there: on the
	// other commands --dry-run asks the worker for the plan). Kept working, with a warning.
	dryRun bool
}

// define defines the flags of publish.
func (o *publishOptions) define(fs *pflag.FlagSet) func(env) error {
	fs.StringVar(&o.cluster, "cluster", "", "Kafka `cluster` the event is about, as named in the workers' config (required)")
	fs.StringVar(&o.typ, "type", "", "event `type`: "+typeList()+" (required)")
	fs.StringVar(&o.data, "data", "", "the request, a JSON `object` (required)")
	fs.StringVar(&o.id, "id", "", "event `id` (default: a random UUID); letters, digits, '-' and '_'")
	fs.StringVar(&o.source, "source", "", "event `source` (default \"emitter/<user>@<host>\")")
	fs.DurationVar(&o.expiresIn, "expires-in", 0, "set the expiresat extension to now + `duration`: workers drop the event after it")
	registerNATSFlags(fs, &o.natsURL, &o.natsAuth)
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up connecting and publishing after `duration`")
	fs.BoolVar(&o.print, "print", false, "print the event on stdout instead of publishing it")
	fs.BoolVar(&o.dryRun, "dry-run", false, "deprecated: the same as --print here (on the other commands --dry-run asks the worker for the plan; to ask for one with publish, put \"dry_run\":true in --data)")
	var types []string
	for _, t := range events.Types() {
		types = append(types, t.Name+"\t"+t.Summary)
	}
	completeWith(fs, "type", types...)
	return o.check
}

// check validates the flags of publish, and fills in the defaults.
func (o *publishOptions) check(e env) error {
	errs := checkClusterFlag(o.cluster)
	switch {
	case o.typ == "":
		errs = append(errs, errors.New("--type is required"))
	case !events.KnownType(o.typ):
		errs = append(errs, fmt.Errorf("--type %q: unknown event type (want %s)", o.typ, typeList()))
	}
	if o.data == "" {
		errs = append(errs, errors.New("--data is required"))
	} else if err := events.CheckObject([]byte(o.data)); err != nil {
		errs = append(errs, fmt.Errorf("--data: %w", err))
	}
	errs = append(errs, checkEventFlags(o.id, o.expiresIn, o.timeout)...)
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	o.id, o.source = eventDefaults(o.id, o.source, e)
	if err := resolveNATS(&o.natsURL, &o.natsAuth, e); err != nil {
		return usageError{err}
	}
	return nil
}

// checkEventFlags checks the flags that every publishing command shares.
func checkEventFlags(id string, expiresIn, timeout time.Duration) []error {
	var errs []error
	if id != "" {
		if err := events.CheckID(id); err != nil {
			errs = append(errs, fmt.Errorf("--id %q: %w", id, err))
		}
	}
	if expiresIn < 0 {
		errs = append(errs, fmt.Errorf("--expires-in %s: must be positive", expiresIn))
	}
	if timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", timeout))
	}
	return errs
}

// eventDefaults fills in the event id and the source that were not given on the
// command line.
func eventDefaults(id, source string, e env) (string, string) {
	if id == "" {
		id = e.newID()
	}
	if source == "" {
		source = "emitter/" + e.user() + "@" + e.host()
	}
	return id, source
}

func typeList() string {
	types := events.Types()
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.Name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func printPublishUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter publish --cluster CLUSTER --type TYPE --data '{...}' [flags]

Builds a CloudEvents 1.0 event of the given type about the given cluster,
checks it, and publishes it to JetStream on %s,
with the event id as the JetStream message id (a re-publish with the same
--id within the stream's duplicate window is stored once). Prints the event
id and the stream sequence. With --print, prints the event instead.

Example:
    emitter publish --cluster local --type replica-change-requested \
        --data '{"topic":"orders","partitions":[1],"preferred_leader":2}'

Flags:
`, events.Subject("<cluster>", "<type>"))
	printFlags(w, fs)
}

func (o *publishOptions) run(ctx context.Context, e env, _ string) int {
	ev := buildEnvelope(*o, e.now())
	if err := ev.Validate(); err != nil {
		// The flags were checked; this is a bug rather than a usage error.
		fmt.Fprintf(e.stderr, "emitter publish: event %s: %v\n", ev.ID, err)
		return exitFailure
	}
	subject := events.Subject(o.cluster, o.typ)

	if o.dryRun {
		fmt.Fprintln(e.stderr, `emitter publish: --dry-run is deprecated here: use --print (--dry-run asks the worker for the plan on the other commands; with publish, put "dry_run":true in --data)`)
	}
	if o.print || o.dryRun {
		body, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "emitter publish: encode event %s: %v\n", ev.ID, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", body)
		fmt.Fprintf(e.stderr, "--print: event %s not published to %s\n", ev.ID, subject)
		return exitOK
	}

	body, err := json.Marshal(ev)
	if err != nil {
		fmt.Fprintf(e.stderr, "emitter publish: encode event %s: %v\n", ev.ID, err)
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ack, err := publish(ctx, o.natsURL, o.natsAuth, o.timeout, subject, ev.ID, body)
	if err != nil {
		fmt.Fprintf(e.stderr, "emitter publish: event %s: %v\n", ev.ID, err)
		return exitFailure
	}
	fmt.Fprintln(e.stdout, publishedLine(ev.ID, ack))
	return exitOK
}

// publishedLine says where the stream stored an event.
func publishedLine(id string, ack *jetstream.PubAck) string {
	if ack.Duplicate {
		return fmt.Sprintf("event %s already in stream %s at sequence %d (duplicate id: not stored again)", id, ack.Stream, ack.Sequence)
	}
	return fmt.Sprintf("event %s published to stream %s at sequence %d", id, ack.Stream, ack.Sequence)
}

// buildEnvelope turns validated options into the event.
func buildEnvelope(o publishOptions, now time.Time) events.Envelope {
	return events.NewEnvelope(o.typ, o.id, o.source, json.RawMessage(o.data), now, o.expiresIn)
}

// publish sends one event to JetStream and waits for the stream's ack.
func publish(ctx context.Context, natsURL string, auth natsAuth, timeout time.Duration, subject, id string, body []byte) (*jetstream.PubAck, error) {
	nc, err := connect(natsURL, auth, timeout)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return publishEvent(ctx, js, subject, id, body)
}

// publishEvent publishes an encoded event with the event id as the JetStream
// message id, so that the stream stores a re-published event once, and
// expects the events stream to store it.
func publishEvent(ctx context.Context, js jetstream.JetStream, subject, id string, body []byte) (*jetstream.PubAck, error) {
	msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	msg.Header.Set("Content-Type", events.ContentTypeCloudEventsJSON)
	ack, err := js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(id),
		jetstream.WithExpectStream(events.EventsStream),
	)
	if err != nil {
		return nil, explainPublishError(subject, err)
	}
	return ack, nil
}

// redactURL hides the passwords and tokens in a comma-separated list of URLs.
func redactURL(s string) string { return config.RedactNATSURLs(s) }

// explainPublishError turns the JetStream errors a user can fix into advice.
func explainPublishError(subject string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("publish to %s: no JetStream stream captures %s: is a worker running?", subject, events.EventsSubjects)
	case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStreamNotMatch:
		return fmt.Errorf("publish to %s: the subject is stored by a stream other than %s: %w", subject, events.EventsStream, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("publish to %s: no acknowledgement in time: %w", subject, err)
	default:
		return fmt.Errorf("publish to %s: %w", subject, err)
	}
}
