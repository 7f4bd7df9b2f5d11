package main

// The approve and deny commands: answer a plan that waits for a person's approval
// (plan-approved, plan-denied events).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
)

// decisionOptions are the flags of emitter approve and emitter deny.
type decisionOptions struct {
	eventOptions
	deny bool
	plan string // --id: the plan to answer
	// planEvent is the plan's event, once the plan was read: --wait shows its progress (an
	// approval runs it).
	planEvent string
}

func (o *decisionOptions) flags() eventFlags {
	f := o.eventOptions.flags()
	f.idFlag = "approve-id"
	if o.deny {
		f.idFlag = "deny-id"
	} else {
		// The approval's result comes once the plan ran: a copy takes long.
		f.defaultTimeout = defaultRFWaitTimeout
	}
	f.clusterOptional = true
	f.clusterUsage = "the plan's Kafka `cluster` (default: read from the plan in bucket " + events.PlansBucket + ")"
	return f
}

func (o *decisionOptions) typ() string {
	if o.deny {
		return events.TypePlanDenied
	}
	return events.TypePlanApproved
}

func (o *decisionOptions) build(now time.Time) (events.Envelope, string, []byte, error) {
	return encodeEvent(o.flags(), o.typ(), events.PlanDecision{PlanID: o.plan, Reason: o.reason}, now)
}

func (o *decisionOptions) progressOf() []string {
	if o.planEvent == "" {
		return nil
	}
	return []string{o.planEvent}
}

// define defines the flags of approve, or of deny (o.deny).
func (o *decisionOptions) define(fs *pflag.FlagSet) func(env) error {
	deny, verb := o.deny, "approve"
	if deny {
		verb = "deny"
	}
	o.flags().register(fs)
	fs.StringVar(&o.plan, "id", "", "the `id` of the plan to "+verb+" (required): the plan_id of the event's awaiting_approval result, as 'emitter plans' lists it")
	return func(e env) error {
		var errs []error
		switch {
		case o.plan == "":
			errs = append(errs, fmt.Errorf("--id is required: the id of the plan to %s (emitter plans lists them)", verb))
		default:
			if err := events.CheckID(o.plan); err != nil {
				errs = append(errs, fmt.Errorf("--id %q: %w", o.plan, err))
			}
		}
		if deny && strings.TrimSpace(o.reason) == "" {
			errs = append(errs, errors.New("--reason is required: say why the plan is denied (it becomes its event's error)"))
		}
		if o.dryRun {
			errs = append(errs, fmt.Errorf("--dry-run: an answer to a plan has no plan of its own ('emitter plan show --id %s' shows the plan); --print shows the event without publishing it", orDash(o.plan)))
		}
		return o.flags().check(e, errs)
	}
}

// run runs emitter approve or deny: the plan is read first (for its cluster when
// --cluster is not given, and to refuse answering a plan answered already), then the
// event is published as by any event command.
func (o *decisionOptions) run(ctx context.Context, e env, name string) int {
	if o.cluster == "" || !o.print {
		if err := o.lookUpPlan(ctx, e, name); err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
			return exitFailure
		}
	}
	return runEventCommand(ctx, e, name, o)
}

// lookUpPlan reads the plan to answer: it sets o.cluster (when not given) and o.planEvent.
// An error when the plan cannot be answered: not found, answered already, or (without
// --cluster) unreadable. With --cluster, a plan that cannot be read (the user may not
// read the bucket) is answered anyway: the worker checks.
func (o *decisionOptions) lookUpPlan(ctx context.Context, e env, name string) error {
	timeout := min(o.timeout, publishTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	given := o.cluster != ""
	unreadable := func(err error) error {
		if given {
			fmt.Fprintf(e.stderr, "%s: could not read plan %s (%v); sending the answer anyway: the worker checks it\n", name, o.plan, err)
			return nil
		}
		return fmt.Errorf("plan %s: %v (give --cluster to send the answer without reading the plan)", o.plan, err)
	}
	nc, err := connect(o.natsURL, o.natsAuth, timeout)
	if err != nil {
		return unreadable(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return unreadable(fmt.Errorf("jetstream: %w", err))
	}
	p, err := readPlan(ctx, js, o.cluster, o.plan)
	switch {
	case errors.Is(err, approval.ErrNotFound) || errors.Is(err, jetstream.ErrBucketNotFound):
		return err
	case err != nil:
		return unreadable(err)
	}
	if p.State != approval.Awaiting && p.DecidedEvent != o.id { // (an answer with the same id asks for its result again)
		return fmt.Errorf("plan %s of event %s on cluster %s was %s already: nothing to %s", p.ID, p.Event, p.Cluster, p.Decided(), strings.TrimPrefix(o.typ(), "plan-"))
	}
	if !given {
		o.cluster = p.Cluster
		if err := events.CheckClusterName(o.cluster); err != nil { // a plan's cluster is a subject token
			return fmt.Errorf("plan %s names cluster %q: %w", o.plan, o.cluster, err)
		}
	}
	o.planEvent = p.Event
	fmt.Fprintf(e.stderr, "plan %s: event %s (%s) on cluster %s, %s\n", p.ID, p.Event, p.Type, p.Cluster, planSummary(p))
	return nil
}

// readPlan reads plan id from the plans bucket: of cluster, or ("") of whichever cluster
// holds it. Errors: one that wraps approval.ErrNotFound (it says which plan and where),
// or jetstream.ErrBucketNotFound (no plan ever waited on this NATS), or a failure to read.
func readPlan(ctx context.Context, js jetstream.JetStream, cluster, id string) (*approval.Plan, error) {
	store := approval.ReadStore(js)
	var (
		p   *approval.Plan
		err error
	)
	if cluster != "" {
		p, _, err = store.Get(ctx, cluster, id)
	} else {
		p, err = store.Find(ctx, id)
	}
	where := "on any cluster"
	if cluster != "" {
		where = "on cluster " + cluster
	}
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("no plan %s %s: bucket %s does not exist (no plan has waited for approval on this NATS server): %w",
			id, where, events.PlansBucket, err)
	case errors.Is(err, approval.ErrNotFound):
		return nil, fmt.Errorf("no plan %s %s in bucket %s (an unknown id, or a plan older than %s): %w",
			id, where, events.PlansBucket, approval.KeepFor, err)
	case err != nil:
		return nil, fmt.Errorf("read bucket %s: %w", events.PlansBucket, err)
	}
	return p, nil
}

// planSummary says a plan's size and state in a few words: "3 partitions, 1.0 GiB to
// copy, 2 leaders moved; awaiting approval".
func planSummary(p *approval.Plan) string {
	return fmt.Sprintf("%s, %s to copy, %s moved; %s", plural(p.Size.Partitions, "partition"), formatBytes(p.Size.Bytes),
		plural(p.Size.LeadersMoved, "leader"), p.Decided())
}

func printApproveUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter approve --id PLAN-ID [--cluster CLUSTER] [--reason WORDS] [flags]

Approves a plan that waits for a person's approval (a %s event): an
event whose plan the workers' approval policy (or the event itself) wants
approved was answered with the interim result %s, naming the plan
(plan_id); 'emitter plans' lists them, 'emitter plan show' shows one.

The worker takes the cluster's lock, marks the plan approved (once: a second
answer is rejected), and reads the cluster again: if anything the plan depends
on changed, nothing runs and both the plan's event and the approval end
rejected, listing the differences. Otherwise it runs exactly the stored plan as
the plan's event (journaled, cancellable with 'emitter cancel --id <its event>',
its result stored under the event's id).

The plan is read first from bucket %s: for its cluster when
--cluster is not given, and to refuse answering a plan answered already. The
request is published to JetStream on
    %s
in the cluster's queue. Its data:

    {"plan_id":PLAN-ID,"reason":...}

The worker accepts it only from a source listed in its approval.approvers
(--source; default "emitter/<user>@<host>").

--wait subscribes to the approval's own result (%s)
and prints it: it repeats the outcome of the plan's event (whose result is
stored under its own id), and shows the progress of the plan's copies. The
approval's own event id is --approve-id (default: a random UUID).

Example:
    emitter approve --id plan-5c0e1d2a3b4c5d6e7f80 --reason "INC-7: go ahead" --wait

`+eventCommandUsageTail, events.TypePlanApproved, events.StatusAwaitingApproval, events.PlansBucket,
		events.Subject("<cluster>", events.TypePlanApproved), events.ResultSubject("<approve-id>"))
	printFlags(w, fs)
}

func printDenyUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter deny --id PLAN-ID [--cluster CLUSTER] --reason WORDS [flags]

Denies a plan that waits for a person's approval (a %s event): the
plan's event ends %s, with --reason as its error; nothing is changed.
'emitter plans' lists the plans that wait.

The plan is read first from bucket %s: for its cluster when
--cluster is not given, and to refuse answering a plan answered already. The
request is published to JetStream on
    %s
in the cluster's queue. Its data:

    {"plan_id":PLAN-ID,"reason":...}

The worker accepts it only from a source listed in its approval.approvers
(--source; default "emitter/<user>@<host>").

--wait subscribes to the denial's own result (%s) and
prints it. The denial's own event id is --deny-id (default: a random UUID).

Example:
    emitter deny --id plan-5c0e1d2a3b4c5d6e7f80 --reason "not during the sale" --wait

`+eventCommandUsageTail, events.TypePlanDenied, events.StatusDenied, events.PlansBucket,
		events.Subject("<cluster>", events.TypePlanDenied), events.ResultSubject("<deny-id>"))
	printFlags(w, fs)
}
