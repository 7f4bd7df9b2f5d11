package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// publishTimeout bounds connecting to NATS and waiting for the publish
// acknowledgement (less when --timeout is shorter).
const publishTimeout = 10 * time.Second

// waitRequest is an encoded event to publish and wait for.
type waitRequest struct {
	natsURL  string
	natsAuth natsAuth
	timeout  time.Duration // for everything: connecting, publishing and waiting
	output   string        // outputTable or outputJSON
	cluster  string        // the event's
	subject  string
	id       string
	body     []byte
	// progressOf are other events whose progress is shown while waiting (emitter approve:
	// the plan's event, which the approval runs).
	progressOf []string
}

// received is a result as it came, raw and decoded.
type received struct {
	raw    []byte
	result events.Result
	// stored is set when the result was read from the results stream (the
	// event id was published before) rather than received as it was published.
	stored bool
}

// decodeResult decodes a result published by a worker.
func decodeResult(raw []byte) (*received, error) {
	var r events.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("the result is not valid JSON: %v: %s", err, truncate(raw, 200))
	}
	if r.Status == "" {
		return nil, fmt.Errorf("the result has no status: %s", truncate(raw, 200))
	}
	return &received{raw: raw, result: r}, nil
}

// exitForStatus maps a result's status to the exit status of the commands
// that print results.
func exitForStatus(s events.Status) int {
	if s.OK() {
		return exitOK
	}
	return exitFailure
}

// publishAndWait subscribes to the result and progress of the event, publishes
// the event, waits for the result and prints it. It returns the exit status.
func publishAndWait(ctx context.Context, e env, name string, req waitRequest) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(e.stderr, "%s: event %s: %s\n", name, req.id, fmt.Sprintf(format, args...))
		return exitFailure
	}
	interrupted := ctx
	ctx, cancel := context.WithTimeout(ctx, req.timeout)
	defer cancel()

	// A result published while the connection was down is missed by the
	// subscription: after a reconnect, look in the results stream.
	reconnected := make(chan struct{}, 1)
	nc, err := connect(req.natsURL, req.natsAuth, min(req.timeout, publishTimeout), nats.ReconnectHandler(func(*nats.Conn) {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		return fail("%v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail("jetstream: %v", err)
	}

	// Subscribe before publishing, so that a quick result is not missed.
	results := make(chan *nats.Msg, 8)
	progress := make(chan *nats.Msg, 256)
	subjects := map[string]chan *nats.Msg{
		events.ResultSubject(req.id):   results,
		events.ProgressSubject(req.id): progress,
	}
	for _, id := range req.progressOf {
		subjects[events.ProgressSubject(id)] = progress
	}
	for subject, ch := range subjects {
		sub, err := nc.ChanSubscribe(subject, ch)
		if err != nil {
			return fail("subscribe to %s: %v", subject, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fail("subscribe to the result: %v", err)
	}

	pctx, pcancel := context.WithTimeout(ctx, publishTimeout)
	ack, err := publishEvent(pctx, js, req.subject, req.id, req.body)
	pcancel()
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(e.stderr, publishedLine(req.id, ack))

	var (
		got     *received
		interim *events.Result // the last interim result received
	)
	if ack.Duplicate {
		// JetStream did not store the event again: the earlier one with this
		// id may have run already, and its result be stored.
		got, err = lookupResult(ctx, js, req.id)
		switch {
		case err != nil:
			fmt.Fprintf(e.stderr, "event %s was published before; looking up its result failed: %v\n", req.id, err)
		case got == nil:
			fmt.Fprintf(e.stderr, "event %s was published before and has no result yet\n", req.id)
			// Its interim result, if any, was published then: its plan says it.
			if interim = pendingPlan(ctx, js, req.cluster, req.id); interim != nil {
				fmt.Fprintln(e.stderr, interimLine(interim))
			}
		default:
			fmt.Fprintf(e.stderr, "event %s was published before: its stored result follows\n", req.id)
		}
	}
	if got == nil {
		fmt.Fprintf(e.stderr, "waiting up to %s for the result on %s\n", req.timeout, events.ResultSubject(req.id))
		pp := &progressPrinter{w: e.stderr, live: e.stderrIsTerminal}
		var last *events.Result
		got, last, err = waitResult(ctx, pp, js, req.id, results, progress, reconnected)
		pp.endLine()
		if last != nil {
			interim = last
		}
	}
	switch {
	case err == nil:
	case ctx.Err() != nil && interrupted.Err() != nil:
		if why := stillWaiting(interim); why != "" {
			fmt.Fprintf(e.stderr, "%s: interrupted: no final result for event %s yet: %s\n", name, req.id, why)
			return exitNoReply
		}
		fmt.Fprintf(e.stderr, "%s: interrupted: no result for event %s yet; the event stays queued\n", name, req.id)
		return exitNoReply
	case ctx.Err() != nil:
		if interim == nil { // or its interim result was missed (a reconnect): its plan says it
			interim = pendingPlan(interrupted, js, req.cluster, req.id)
		}
		if why := stillWaiting(interim); why != "" {
			fmt.Fprintf(e.stderr, "%s: no final result for event %s after %s: %s\n"+
				"Look for its result later with: emitter result --id %s\n", name, req.id, req.timeout, why, req.id)
			return exitNoReply
		}
		fmt.Fprintf(e.stderr, "%s: no result for event %s after %s: is a worker running? the event stays queued\n"+
			"Look for its result later with: emitter result --id %s\n", name, req.id, req.timeout, req.id)
		return exitNoReply
	default:
		return fail("%v", err)
	}
	if err := writeResult(e.stdout, got, req.output); err != nil {
		return fail("print the result: %v", err)
	}
	return exitForStatus(got.result.Status)
}

// waitResult waits for the result of event id, showing progress reports on
// pp as they come. An interim result (a plan awaiting approval, then approved) is
// not the result: it is shown in a line on pp, and waitResult waits on. It
// returns ctx's error when ctx ends first, with the last interim result received
// (nil: none).
// resultLookupEvery is how often a wait looks the stored result up, besides listening.
const resultLookupEvery = 5 * time.Second

func waitResult(ctx context.Context, pp *progressPrinter, js jetstream.JetStream, id string,
	results, progress <-chan *nats.Msg, reconnected <-chan struct{}) (*received, *events.Result, error) {
	var interim *events.Result
	printProgress := func(m *nats.Msg) { pp.report(m.Data) }
	drainProgress := func() {
		for {
			select {
			case m := <-progress:
				printProgress(m)
			default:
				return
			}
		}
	}
	// On a NATS cluster a result can be stored before the subscription's interest has
	// reached the node the worker publishes on: the message is not heard. The stored
	// result is looked up now and then, so that the wait does not last to its timeout.
	lookup := time.NewTicker(resultLookupEvery)
	defer lookup.Stop()
	for {
		select {
		case m := <-progress:
			printProgress(m)
		case <-lookup.C:
			if js == nil {
				continue
			}
			if got, err := lookupResult(ctx, js, id); err == nil && got != nil {
				drainProgress()
				return got, interim, nil
			}
		case m := <-results:
			drainProgress() // reports that came before the result
			if r, ok := interimResult(m.Data); ok {
				interim = r
				pp.endLine()
				fmt.Fprintln(pp.w, interimLine(r))
				continue
			}
			got, err := wholeResult(ctx, js, m.Data)
			return got, interim, err
		case <-reconnected:
			got, err := lookupResult(ctx, js, id)
			if err != nil {
				pp.endLine()
				fmt.Fprintf(pp.w, "reconnected to NATS; looking up the result failed: %v\n", err)
			}
			if got != nil {
				drainProgress()
				return got, interim, nil
			}
		case <-ctx.Done():
			drainProgress()
			return nil, interim, ctx.Err()
		}
	}
}

// pendingPlan reads whether event id of cluster has a plan that waits for approval, or
// was approved (and runs), for a wait that has no interim result to go by (the event was
// published before, or its interim result was missed): the interim result that says so,
// else nil. Best effort: nil when the plan cannot be read.
func pendingPlan(ctx context.Context, js jetstream.JetStream, cluster, id string) *events.Result {
	if cluster == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	p, err := readPlan(ctx, js, cluster, approval.PlanID(cluster, id))
	if err != nil {
		return nil
	}
	switch p.State {
	case approval.Awaiting:
		return p.Awaiting()
	case approval.Approved:
		return &events.Result{ID: p.Event, Type: p.Type, Cluster: p.Cluster, Status: events.StatusApproved, PlanID: p.ID, ExpiresAt: p.ExpiresAt}
	}
	return nil
}

// interimResult decodes raw, a message on a result subject, when it is an interim
// result (events.Status.Interim): one published for whoever waits, never stored, that
// the final result follows.
func interimResult(raw []byte) (*events.Result, bool) {
	got, err := decodeResult(raw)
	if err != nil || !got.result.Status.Interim() {
		return nil, false
	}
	return &got.result, true
}

// interimLine says in a line what an interim result means for the event waited for.
func interimLine(r *events.Result) string {
	switch r.Status {
	case events.StatusAwaitingApproval:
		var b strings.Builder
		fmt.Fprintf(&b, "event %s: awaiting approval: plan %s", r.ID, orDash(r.PlanID))
		if why := approvalWhy(r.Note); why != "" {
			fmt.Fprintf(&b, " (%s)", why)
		}
		if !r.ExpiresAt.IsZero() {
			fmt.Fprintf(&b, ", expires %s", r.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if r.PlanID != "" {
			fmt.Fprintf(&b, "; approve: %s", planCommand("approve", r.Cluster, r.PlanID))
		}
		return b.String()
	case events.StatusApproved:
		return fmt.Sprintf("event %s: plan %s approved; it runs now", r.ID, orDash(r.PlanID))
	}
	return fmt.Sprintf("event %s: %s (an interim result; the final one follows)", r.ID, r.Status)
}

// stillWaiting says, after a wait that ended without the final result, why the event has
// none when the last interim result says it (its plan waits for approval, or runs); ""
// otherwise.
func stillWaiting(r *events.Result) string {
	if r == nil {
		return ""
	}
	switch r.Status {
	case events.StatusAwaitingApproval:
		s := "it waits for approval of plan " + orDash(r.PlanID)
		if !r.ExpiresAt.IsZero() {
			s += " (expires " + r.ExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
		if r.PlanID != "" {
			s += "\nApprove it with: " + planCommand("approve", r.Cluster, r.PlanID) +
				"\nor deny it with: " + planCommand("deny", r.Cluster, r.PlanID, "--reason WORDS")
		}
		return s
	case events.StatusApproved:
		return "its plan " + orDash(r.PlanID) + " was approved and runs"
	}
	return ""
}

// planCommand is the emitter command line that runs command (approve, deny, plan show)
// for plan id of cluster.
func planCommand(command, cluster, id string, extra ...string) string {
	args := []string{"emitter", command}
	if cluster != "" {
		args = append(args, "--cluster", cluster)
	}
	args = append(append(args, "--id", id), extra...)
	return strings.Join(args, " ")
}

// approvalWhy is why a plan waits, as the note of its awaiting_approval result says it
// (approval.Plan.Awaiting: "the plan waits for approval (WHY): send plan-approved …");
// "" when the note does not say it so.
func approvalWhy(note string) string {
	rest, ok := strings.CutPrefix(note, "the plan waits for approval (")
	if !ok {
		return ""
	}
	why, _, ok := strings.Cut(rest, "): send plan-approved")
	if !ok {
		return ""
	}
	return why
}

// errNoResultsStream: no worker ever set up the results stream on this NATS.
var errNoResultsStream = fmt.Errorf("stream %s does not exist (no worker has set it up on this NATS server)", events.ResultsStream)

// leaderReads holds, per JetStream context (one per emitter run), the results stream
// wrapped for leader reads: its fallback after a refused message get must last the run,
// not one lookup (a --wait looks the result up every 5 s).
var leaderReads sync.Map // jetstream.JetStream -> jetstream.Stream

// resultsStream is the results stream, read from its leader.
func resultsStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	if s, ok := leaderReads.Load(js); ok {
		return s.(jetstream.Stream), nil
	}
	stream, err := js.Stream(ctx, events.ResultsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, errNoResultsStream
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	// Read from the stream's leader: a direct get may be answered by a replica a write
	// behind, which would say that a result stored a moment ago is not (an event
	// published again right after its result).
	s, _ := leaderReads.LoadOrStore(js, natsjs.LeaderReads(js, stream, events.ResultsStream))
	return s.(jetstream.Stream), nil
}

// lookupResult reads the result stored for event id from the results stream,
// whole (a result too large for one message is stored in parts). It returns nil
// and no error when there is none.
func lookupResult(ctx context.Context, js jetstream.JetStream, id string) (*received, error) {
	stream, err := resultsStream(ctx, js)
	if err != nil {
		return nil, err
	}
	res, raw, err := pipeline.ReadResult(ctx, stream, id)
	if err != nil {
		return nil, fmt.Errorf("read %s from stream %s: %w", events.ResultSubject(id), events.ResultsStream, err)
	}
	if res == nil {
		return nil, nil
	}
	got, err := decodeResult(raw)
	if err != nil {
		return nil, err
	}
	got.result, got.stored = *res, true
	return got, nil
}

// wholeResult decodes raw, a result received on its subject. When it is the head of a
// result too large for one message (it says truncated), the whole result is read from
// the results stream, where its parts were stored before the head was published.
func wholeResult(ctx context.Context, js jetstream.JetStream, raw []byte) (*received, error) {
	got, err := decodeResult(raw)
	if err != nil || got.result.Truncated == nil {
		return got, err
	}
	stream, err := resultsStream(ctx, js)
	if err != nil {
		return nil, err
	}
	res, whole, err := pipeline.ReadWhole(ctx, stream, raw)
	if err != nil {
		return nil, fmt.Errorf("read the whole result from stream %s: %w", events.ResultsStream, err)
	}
	return &received{raw: whole, result: *res}, nil
}

// writeResult prints a result in the format asked for: json is the result as
// the worker published it, on one line.
func writeResult(w io.Writer, got *received, output string) error {
	if output == outputJSON {
		var b bytes.Buffer
		if err := json.Compact(&b, got.raw); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
	return writeResultTable(w, &got.result, got.stored)
}

func truncate(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
