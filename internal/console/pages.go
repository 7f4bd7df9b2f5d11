package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/cancel"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/fleetstatus"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// clusterView is one cluster on the clusters page.
type clusterView struct {
	fleetstatus.Cluster
	// Name is the cluster's name (.Cluster, in a template, is the embedded status).
	Name     string
	Progress *liveProgress
	Last     *events.Result
}

type clustersView struct {
	Clusters []clusterView
	// Scanned is how many of the latest results were read for the last results.
	Scanned int
	// Digest sums up the state shown: the live stream's differs once it changes.
	Digest string
}

func (s *Server) clustersPage(ctx context.Context, _ *http.Request, _ identity) (string, any, error) {
	st, err := fleetstatus.Read(ctx, s.js, s.cfg.Consumer, "")
	if err != nil {
		return "", nil, err
	}
	v := &clustersView{Digest: stateDigest(st)}
	last, scanned, err := s.lastResults(ctx)
	if err != nil {
		return "", nil, err
	}
	v.Scanned = scanned
	for _, c := range st {
		cv := clusterView{Cluster: c, Name: c.Cluster, Last: last[c.Cluster]}
		if c.InFlight != nil {
			cv.Progress = s.hub.progress(c.InFlight.Event)
		}
		v.Clusters = append(v.Clusters, cv)
	}
	return "clusters", v, nil
}

// lastResults is the latest result of each cluster among the latest results.
func (s *Server) lastResults(ctx context.Context) (map[string]*events.Result, int, error) {
	found, scanned, err := s.scanResults(ctx, auditQuery{}, lastResultsWindow)
	if err != nil {
		return nil, 0, err
	}
	out := map[string]*events.Result{}
	for _, r := range found { // newest first
		if _, ok := out[r.Cluster]; !ok {
			out[r.Cluster] = r
		}
	}
	return out, scanned, nil
}

type plansView struct {
	Awaiting, Answered []*approval.Plan
}

func (s *Server) plansPage(ctx context.Context, _ *http.Request, _ identity) (string, any, error) {
	plans, err := approval.ReadStore(s.js).List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil, fmt.Errorf("plans (bucket %s): %w", events.PlansBucket, err)
	}
	v := &plansView{}
	for _, p := range slices.Backward(plans) { // newest first
		if p.State == approval.Awaiting {
			v.Awaiting = append(v.Awaiting, p)
		} else if len(v.Answered) < 50 {
			v.Answered = append(v.Answered, p)
		}
	}
	return "plans", v, nil
}

type planView struct {
	Plan *approval.Plan
	// Matches: the cluster still matches the plan's fingerprint (nil: not checked);
	// Differences say how it does not; CheckError why it could not be checked.
	Matches     *bool
	Differences []string
	CheckError  string
	// MayApprove: the user's source is among approval.approvers.
	MayApprove bool
	Source     string
}

func (s *Server) planPage(ctx context.Context, r *http.Request, id identity) (string, any, error) {
	cluster, pid := r.PathValue("cluster"), r.PathValue("id")
	if !events.ValidClusterName(cluster) || events.CheckID(pid) != nil {
		return "", nil, notFound("no plan " + pid + " of cluster " + cluster)
	}
	p, _, err := approval.ReadStore(s.js).Get(ctx, cluster, pid)
	if errors.Is(err, approval.ErrNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil, notFound(fmt.Sprintf("no plan %s of cluster %s (plans are kept 8 days)", pid, cluster))
	}
	if err != nil {
		return "", nil, err
	}
	v := &planView{Plan: p, Source: id.Source(),
		MayApprove: slices.Contains(s.cfg.Approvers, approval.Wildcard) || slices.Contains(s.cfg.Approvers, id.Source())}
	if p.State == approval.Awaiting {
		switch {
		case s.cfg.Survey == nil:
			v.CheckError = "this worker cannot read the cluster"
		default:
			fp, _, err := s.cfg.Survey.Survey(ctx, p.Cluster, p.Changes, p.Floor, false)
			if err != nil {
				v.CheckError = err.Error()
				break
			}
			v.Differences = approval.Diff(p.Fingerprint, fp)
			ok := len(v.Differences) == 0
			v.Matches = &ok
		}
	}
	return "plan", v, nil
}

type auditView struct {
	Query   auditQuery
	Results []*events.Result
	Scanned int
	Window  int
	Error   string
	Types   []events.TypeInfo
}

func (s *Server) auditPage(ctx context.Context, r *http.Request, _ identity) (string, any, error) {
	v := &auditView{Window: auditWindow, Types: events.Types()}
	q, err := parseAuditQuery(r.URL.Query(), s.cfg.Now())
	v.Query = q
	if err != nil {
		v.Error = err.Error()
		return "audit", v, nil
	}
	v.Results, v.Scanned, err = s.scanResults(ctx, q, auditWindow)
	if err != nil {
		return "", nil, err
	}
	return "audit", v, nil
}

// storyStep is one line of an event's story.
type storyStep struct {
	At   time.Time
	What string
}

type eventView struct {
	ID      string
	Cluster string
	Result  *events.Result
	Plan    *approval.Plan
	Journal *journal.Record
	Cancel  *cancel.Request
	Dead    []deadLetter
	// Steps are the journal's revisions of the event (journalSteps).
	Steps []storyStep
	Story []storyStep
	// Progress is the live progress of an operation in flight.
	Progress *liveProgress
}

func (s *Server) eventPage(ctx context.Context, r *http.Request, _ identity) (string, any, error) {
	id := r.PathValue("id")
	if err := events.CheckID(id); err != nil {
		return "", nil, notFound("no event " + id + ": " + err.Error())
	}
	v := &eventView{ID: id, Cluster: r.URL.Query().Get("cluster")}
	if v.Cluster != "" && !events.ValidClusterName(v.Cluster) {
		v.Cluster = ""
	}
	stream, err := s.js.Stream(ctx, events.ResultsStream)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil, err
	}
	if stream != nil {
		if v.Result, _, err = pipeline.ReadResult(ctx, stream, id); err != nil {
			return "", nil, err
		}
	}
	if v.Result != nil {
		v.Cluster = v.Result.Cluster
	}
	// The operation in flight, when it is this event's.
	recs, err := journal.NewReader(s.js).List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil, fmt.Errorf("journal: %w", err)
	}
	for _, rec := range recs {
		if rec.Event == id {
			v.Journal, v.Cluster = rec, rec.Cluster
		}
	}
	if v.Cluster != "" {
		v.Plan, _, err = approval.ReadStore(s.js).Get(ctx, v.Cluster, approval.PlanID(v.Cluster, id))
		if err != nil && !errors.Is(err, approval.ErrNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return "", nil, err
		}
		v.Cancel, err = cancel.New(s.js).Get(ctx, v.Cluster, id)
		if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			v.Cancel = nil // the page shows what it can read
		}
	}
	if v.Dead, _, err = s.scanDead(ctx, id, deadWindow); err != nil {
		return "", nil, err
	}
	if v.Journal != nil && v.Journal.Open() {
		v.Progress = s.hub.progress(id)
	}
	if v.Cluster != "" {
		v.Steps = s.journalSteps(ctx, v.Cluster, id)
	}
	v.Story = story(v)
	return "event", v, nil
}

// journalSteps are the revisions of the cluster's journal entry that were event id's,
// as the bucket keeps them (its last 16 writes; an entry too large for one message keeps
// only its last): each step the operation recorded, when, by which worker. None when
// they are gone or cannot be read: the story then has less to say.
func (s *Server) journalSteps(ctx context.Context, cluster, id string) []storyStep {
	kv, err := s.js.KeyValue(ctx, events.JournalBucket)
	if err != nil {
		return nil
	}
	hist, err := kv.History(ctx, cluster)
	if err != nil {
		return nil
	}
	var out []storyStep
	var last journal.Entry
	for _, e := range hist {
		var en journal.Entry
		if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &en) != nil || en.Event != id {
			continue
		}
		if en.Step == last.Step && en.Attempt == last.Attempt && en.Worker == last.Worker {
			continue // the same step written again (progress of its batches)
		}
		last = en
		what := fmt.Sprintf("journal: step %s, attempt %d by %s", en.Step, en.Attempt, en.Worker)
		switch en.Step {
		case journal.StepPlanned:
			what += fmt.Sprintf(": %d partitions planned", len(en.Changes))
		case journal.StepCopying:
			what += fmt.Sprintf(": %d copies submitted", len(en.Reassignments))
		case journal.StepDone:
			what += ": the cluster holds the outcome (a fresh read showed it)"
		case journal.StepClosed:
			what = fmt.Sprintf("journal entry closed by %s: the cluster's lock is free for the next operation", en.Worker)
		}
		out = append(out, storyStep{At: en.Updated, What: what})
	}
	return out
}

// received reads when the event was published, and by whom, from its message as the
// journal or its plan kept it.
func received(request json.RawMessage) (time.Time, string) {
	var raw pipeline.RawEvent
	if len(request) == 0 || json.Unmarshal(request, &raw) != nil {
		return time.Time{}, ""
	}
	var env events.Envelope
	if json.Unmarshal(raw.Data, &env) != nil {
		return time.Time{}, ""
	}
	return env.Time, env.Source
}

// story puts what is recorded of an event in time order.
func story(v *eventView) []storyStep {
	var st []storyStep
	add := func(at time.Time, format string, args ...any) {
		if !at.IsZero() {
			st = append(st, storyStep{At: at, What: fmt.Sprintf(format, args...)})
		}
	}
	req := json.RawMessage(nil)
	if v.Journal != nil {
		req = v.Journal.Request
	} else if v.Plan != nil {
		req = v.Plan.Request
	}
	if at, source := received(req); !at.IsZero() {
		add(at, "published by %s", source)
	}
	if p := v.Plan; p != nil {
		add(p.CreatedAt, "planned by %s: %s; waits for approval (%s)", p.PlannedBy, sizeText(p.Size), p.Why)
		if p.State != approval.Awaiting {
			add(p.DecidedAt, "%s", p.Decided())
		}
	}
	st = append(st, v.Steps...)
	if j := v.Journal; j != nil && len(v.Steps) == 0 {
		add(j.Started, "operation started under the cluster's lock (strategy %s)", j.Strategy)
		if j.Open() {
			add(j.Updated, "journal: step %s, attempt %d by %s; %d partitions planned, %d copies submitted", j.Step, j.Attempt, j.Worker, len(j.Changes), len(j.Reassignments))
		} else {
			add(j.Updated, "journal entry closed by %s: the cluster's lock is free for the next operation", j.Worker)
		}
	}
	if c := v.Cancel; c != nil {
		add(c.At, "cancel asked by %s (event %s): %s", c.By, c.CancelEvent, c.Reason)
	}
	if r := v.Result; r != nil {
		add(r.StartedAt, "attempt %d started by %s", r.Attempt, r.Worker)
		what := fmt.Sprintf("finished %s after %s: %d changes, %d skipped", r.Status, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond), changeCount(r), skipCount(r))
		if r.Error != "" {
			what += "; " + r.Error
		}
		add(r.FinishedAt, "%s", what)
	}
	for _, d := range v.Dead {
		add(d.At, "dead letter on %s: %s", d.Subject, d.Reason)
	}
	slices.SortStableFunc(st, func(a, b storyStep) int { return a.At.Compare(b.At) })
	return st
}

func changeCount(r *events.Result) int {
	if r.Truncated != nil {
		return r.Truncated.Changes
	}
	return len(r.Changes)
}

func skipCount(r *events.Result) int {
	if r.Truncated != nil {
		return r.Truncated.Skipped
	}
	return len(r.Skipped)
}

type deadView struct {
	Letters []deadLetter
	Scanned int
	Window  int
}

func (s *Server) deadPage(ctx context.Context, _ *http.Request, _ identity) (string, any, error) {
	v := &deadView{Window: deadWindow}
	var err error
	if v.Letters, v.Scanned, err = s.scanDead(ctx, "", deadWindow); err != nil {
		return "", nil, err
	}
	return "dead", v, nil
}
