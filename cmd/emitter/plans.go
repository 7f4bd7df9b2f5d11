package main

// The plans and plan show commands: the plans that wait, or waited, for a person's
// approval, read from their bucket (read only).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
)

// plansOptions are the flags of emitter plans and emitter plan show.
type plansOptions struct {
	show     bool   // plan show, not plans
	cluster  string // "": every cluster
	all      bool   // plans: every plan stored, not only those awaiting
	id       string // plan show: the plan
	output   string
	natsURL  string
	natsAuth natsAuth
	timeout  time.Duration
}

// define defines the flags of emitter plans, or of plan show (o.show).
func (o *plansOptions) define(fs *pflag.FlagSet) func(env) error {
	if o.show {
		fs.StringVar(&o.id, "id", "", "the plan's `id` (required): the plan_id of its event's awaiting_approval result")
		fs.StringVar(&o.cluster, "cluster", "", "the plan's `cluster` (default: whichever cluster has a plan of that id)")
	} else {
		fs.StringVar(&o.cluster, "cluster", "", "only the plans of this `cluster` (default: every cluster)")
		fs.BoolVar(&o.all, "all", false, "every plan stored (approved, denied, expired, stale, cancelled too), not only those awaiting approval")
	}
	registerOutputFlags(fs, &o.output, "`format`: table or json (the plans as stored)")
	registerNATSFlags(fs, &o.natsURL, &o.natsAuth)
	fs.DurationVar(&o.timeout, "timeout", publishTimeout, "give up connecting and reading after `duration`")
	return func(e env) error {
		var errs []error
		if o.show {
			switch {
			case o.id == "":
				errs = append(errs, errors.New("--id is required: the id of the plan (emitter plans lists them)"))
			default:
				if err := events.CheckID(o.id); err != nil {
					errs = append(errs, fmt.Errorf("--id %q: %w", o.id, err))
				}
			}
		}
		return o.check(e, errs)
	}
}

func (o *plansOptions) run(ctx context.Context, e env, name string) int {
	if o.show {
		return runPlanShow(ctx, e, name, o)
	}
	return runPlans(ctx, e, name, o)
}

// check checks the flags both commands have, with the problems the command found in its
// own (own), and resolves the NATS connection.
func (o *plansOptions) check(e env, own []error) error {
	errs := own
	if o.cluster != "" {
		errs = append(errs, checkClusterFlag(o.cluster)...)
	}
	return checkReadFlags(e, errs, o.output, o.timeout, &o.natsURL, &o.natsAuth)
}

func printPlansUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter plans [--cluster CLUSTER] [--all] [flags]

Lists the plans that wait for a person's approval, read from bucket
%s (key <cluster>.<plan id>), oldest first: each plan's id,
cluster, event and type, state, how many partitions it touches and bytes it
copies, why it waits and when it expires. With --all, every plan the bucket
keeps (for %s after its last change), with who answered it and when.
Read only.

Answer a plan with 'emitter approve --id PLAN-ID' or 'emitter deny --id PLAN-ID
--reason WORDS'; 'emitter plan show --id PLAN-ID' shows it partition by partition.

Exit status:
    0  read (no plan is not an error)
    1  reading failed
    2  usage error

Flags:
`, events.PlansBucket, fmt.Sprintf("%d days", approval.KeepFor/(24*time.Hour)))
	printFlags(w, fs)
}

func printPlanShowUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: emitter plan show --id PLAN-ID [--cluster CLUSTER] [flags]

Shows one plan of bucket %s: its event, why it waits, when it
was made and expires, its answer (who, when, why; what had changed, for a plan
that could not run), then what it changes, partition by partition: replicas
and leader before → after (log directories, for log-dir moves), with the
totals (partitions, bytes to copy, leaders moved). Read only. Without
--cluster, the plan of that id is looked for on every cluster.

Exit status:
    0  shown
    1  no such plan, or reading failed
    2  usage error

Flags:
`, events.PlansBucket)
	printFlags(w, fs)
}

// runPlans runs emitter plans.
func runPlans(ctx context.Context, e env, name string, o *plansOptions) int {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	js, closeNC, ok := connectJetStream(e, name, o.natsURL, o.natsAuth, o.timeout)
	if !ok {
		return exitFailure
	}
	defer closeNC()
	var clusters []string
	if o.cluster != "" {
		clusters = []string{o.cluster}
	}
	plans, err := approval.ReadStore(js).List(ctx, clusters...)
	missing := errors.Is(err, jetstream.ErrBucketNotFound)
	if err != nil && !missing {
		fmt.Fprintf(e.stderr, "%s: read bucket %s: %v\n", name, events.PlansBucket, err)
		return exitFailure
	}
	if !o.all {
		plans = slices.DeleteFunc(plans, func(p *approval.Plan) bool { return p.State != approval.Awaiting })
	}
	if o.output == outputJSON {
		if plans == nil {
			plans = []*approval.Plan{}
		}
		out, err := json.MarshalIndent(plans, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	}
	if len(plans) == 0 {
		fmt.Fprintln(e.stdout, noPlans(o.cluster, o.all, missing))
		return exitOK
	}
	if err := writePlans(e.stdout, plans, o.all, e.now()); err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

// noPlans is the line of emitter plans when there is none to list; missing: the bucket
// does not exist.
func noPlans(cluster string, all, missing bool) string {
	s := "no plan awaits approval"
	if all {
		s = "no plan stored"
	}
	if cluster != "" {
		s += " on cluster " + cluster
	}
	if missing {
		s += fmt.Sprintf(" (bucket %s does not exist: no plan has waited for approval on this NATS server)", events.PlansBucket)
	}
	return s
}

// writePlans prints plans as a table, a line each; all: plans of any state are listed
// (the last column says who answered them, and when).
func writePlans(w io.Writer, plans []*approval.Plan, all bool, now time.Time) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	last := "EXPIRES"
	if all {
		last = "EXPIRES / DECIDED"
	}
	fmt.Fprintln(tw, "PLAN\tCLUSTER\tEVENT\tTYPE\tSTATE\tPARTITIONS\tBYTES\tWHY\t"+last)
	awaiting := 0
	for _, p := range plans {
		when := expiresText(p.ExpiresAt, now)
		if p.State == approval.Awaiting {
			awaiting++
		} else {
			when = decidedText(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.Cluster, p.Event, p.Type, p.State,
			p.Size.Partitions, formatBytes(p.Size.Bytes), orDash(oneLine(p.Why)), when)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if awaiting > 0 {
		b.WriteString("\nShow a plan: emitter plan show --id PLAN-ID; answer it: emitter approve --id PLAN-ID [--reason WORDS],\n" +
			"or emitter deny --id PLAN-ID --reason WORDS\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// expiresText is when an awaiting plan expires, and in how long from now ("passed": its
// event ends expired at the workers' next sweep).
func expiresText(at, now time.Time) string {
	if at.IsZero() {
		return "-"
	}
	s := at.UTC().Format(time.RFC3339)
	if !now.Before(at) {
		return s + " (passed)"
	}
	return s + " (in " + shortDuration(at.Sub(now)) + ")"
}

// decidedText says who answered a plan and when: "by ops at 2026-12-04T18:00:00Z".
func decidedText(p *approval.Plan) string {
	var parts []string
	if p.DecidedBy != "" {
		parts = append(parts, "by "+p.DecidedBy)
	}
	if !p.DecidedAt.IsZero() {
		parts = append(parts, "at "+p.DecidedAt.UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// decidedWords says a plan's answer: "denied by ops at … (event …)"; a stale plan was
// approved, but did not run (the cluster no longer matched it, or decided why says why).
func decidedWords(p *approval.Plan) string {
	if p.State == approval.Stale {
		approved := p.ApprovedWords()
		if len(p.Differences) == 0 {
			return approved + ", but it could not run: nothing changed"
		}
		return approved + ", but the cluster no longer matched it: nothing changed"
	}
	return p.Decided()
}

// shortDuration is d for people, to the minute above a minute: 42s, 42m, 1h5m.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d/time.Second))
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// runPlanShow runs emitter plan show.
func runPlanShow(ctx context.Context, e env, name string, o *plansOptions) int {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	js, closeNC, ok := connectJetStream(e, name, o.natsURL, o.natsAuth, o.timeout)
	if !ok {
		return exitFailure
	}
	defer closeNC()
	p, err := readPlan(ctx, js, o.cluster, o.id)
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	if o.output == outputJSON {
		out, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
			return exitFailure
		}
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	}
	if err := writePlan(e.stdout, p, e.now()); err != nil {
		fmt.Fprintf(e.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

// writePlan prints one plan for people: what it is and where it stands, then its changes
// partition by partition, with the totals; the partitions it skips and those already as
// asked.
func writePlan(w io.Writer, p *approval.Plan, now time.Time) error {
	var b strings.Builder
	state := string(p.State)
	if p.State == approval.Awaiting {
		state = p.Decided() // "awaiting approval"
	}
	fmt.Fprintf(&b, "plan %s: %s\n", p.ID, state)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	field := func(name, value string) {
		lines := strings.Split(strings.TrimRight(value, "\n"), "\n")
		fmt.Fprintf(tw, "%s:\t%s\n", name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t%s\n", l)
		}
	}
	field("cluster", orDash(p.Cluster))
	field("event", orDash(p.Event))
	field("type", orDash(p.Type))
	field("source", orDash(p.Source))
	if p.Reason != "" {
		field("reason", p.Reason)
	}
	if p.Strategy != "" {
		field("strategy", p.Strategy)
	}
	field("why", orDash(p.Why))
	field("planned by", orDash(p.PlannedBy))
	if !p.CreatedAt.IsZero() {
		field("created", p.CreatedAt.UTC().Format(time.RFC3339))
	}
	if p.State == approval.Awaiting {
		field("expires", expiresText(p.ExpiresAt, now))
	} else if !p.ExpiresAt.IsZero() {
		field("expires", p.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if p.Timeout > 0 {
		field("timeout", p.Timeout.String()+" from the approval")
	}
	if p.State != approval.Awaiting {
		field("decided", decidedWords(p))
		if p.DecidedWhy != "" {
			field("decided why", p.DecidedWhy)
		}
	}
	if len(p.Differences) > 0 {
		field("differences", strings.Join(p.Differences, "\n"))
	}
	if len(p.Notes) > 0 {
		field("notes", strings.Join(p.Notes, "\n"))
	}
	if p.State == approval.Awaiting {
		field("approve", planCommand("approve", p.Cluster, p.ID, "[--reason WORDS]"))
		field("deny", planCommand("deny", p.Cluster, p.ID, "--reason WORDS"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.WriteString("\n")
	if len(p.Changes) == 0 {
		b.WriteString("changes: none\n")
	} else {
		fmt.Fprintf(&b, "changes: %d\n", len(p.Changes))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		if p.Type == events.TypeLogDirMoveRequested {
			fmt.Fprintln(tw, "PARTITION\tBROKER\tDIR BEFORE → AFTER\tBYTES")
			for _, c := range p.Changes {
				fmt.Fprintf(tw, "%s\t%s\t%s → %s\t%s\n", c.TopicPartition, brokerOf(c.Broker), orDash(c.DirBefore), orDash(c.DirAfter), formatBytes(c.Bytes))
			}
		} else {
			lost := slices.ContainsFunc(p.Changes, func(c events.Change) bool { return c.LostOffsets != nil })
			noted := slices.ContainsFunc(p.Changes, func(c events.Change) bool { return c.Note != "" })
			header := "PARTITION\tREPLICAS BEFORE → AFTER\tLEADER BEFORE → AFTER"
			if lost {
				header += "\tLOST OFFSETS"
			}
			if noted {
				header += "\tNOTE"
			}
			fmt.Fprintln(tw, header)
			for _, c := range p.Changes {
				fmt.Fprintf(tw, "%s\t%s → %s\t%s → %s", c.TopicPartition, replicas(c.ReplicasBefore), replicas(c.ReplicasAfter),
					leader(c.LeaderBefore), leader(c.LeaderAfter))
				if lost {
					fmt.Fprintf(tw, "\t%s", offsetRange(c.LostOffsets))
				}
				if noted {
					fmt.Fprintf(tw, "\t%s", orDash(oneLine(c.Note)))
				}
				fmt.Fprintln(tw)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	b.WriteString(planTotals(p.Size))

	if len(p.Skipped) > 0 {
		fmt.Fprintf(&b, "\nskipped: %d\n", len(p.Skipped))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tREASON")
		for _, s := range p.Skipped {
			fmt.Fprintf(tw, "%s\t%s\n", s.TopicPartition, oneLine(s.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(p.Noop) > 0 {
		fmt.Fprintf(&b, "\nalready as asked (noop): %s\n", partitionList(p.Noop))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// planTotals is the totals line of a plan: "totals: 3 partitions, 1.0 GiB to copy, 2
// leaders moved", and the replication factors lowered and unclean elections, if any.
func planTotals(s approval.Size) string {
	parts := []string{
		plural(s.Partitions, "partition"),
		formatBytes(s.Bytes) + " to copy",
		plural(s.LeadersMoved, "leader") + " moved",
	}
	if s.ReplicationFactorLowered > 0 {
		parts = append(parts, "replication factor lowered on "+plural(s.ReplicationFactorLowered, "partition"))
	}
	if s.Unclean > 0 {
		parts = append(parts, plural(s.Unclean, "unclean election"))
	}
	return "totals: " + strings.Join(parts, ", ") + "\n"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
