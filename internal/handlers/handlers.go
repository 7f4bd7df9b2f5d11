// Package handlers carries out kafkamender's operations, one event at a time per cluster.
// Every operation reads as the same steps:
//
//	guardrails (source, named topics) → lock(cluster) → journal (resolve what a gone holder
//	left) → read → plan → guard → guardrails (partitions, operations per hour) → journal →
//	apply → verify → result (published under the lock) → journal deleted
//
// The files are named after what they handle: preferred.go (make a broker the preferred
// leader), overloaded.go (shed a broker's leadership), rf.go (replication factor),
// logdir.go (move replicas between a broker's log directories), with
// reorder.go the reorder-and-elect steps the first two share, lease.go the lock, the
// journal and the rules below, and guardrails.go the limits every event must stay within.
//
// # Crash safety: the journal and takeover
//
// Before its first write to a cluster, an operation records itself in the operation journal
// (package journal): the event, its plan with every partition's state before the first
// attempt, the reassignments it starts, the throttle keys it sets with the values they held,
// the zk-nudge progress, and the step reached. Each record is written before the cluster
// write it describes; the entry is deleted only after the event's result is stored. The
// result is published while the lock is still held.
//
// Whoever takes a cluster's lock next reads the journal first:
//
//   - No entry: nothing was left; the event runs.
//   - An entry of the same event (a retry, or the redelivery after a crash or a shutdown):
//     the operation resumes. What is left to do is found by comparing the plan with a fresh
//     read of the cluster, never by trusting the step: a partition already as planned is
//     done, one still as it was before is done now, one found in a third state was changed
//     by someone else since and is skipped with that reason. Reassignments the entry lists
//     are ours and are waited for (adopted), not treated as foreign; throttles are not
//     re-read (what they hold now is ours): the values to restore come from the entry.
//   - An entry of another event whose result is not stored: its holder is gone (the lock is
//     ours). That operation is finished first, exactly as its own redelivery would finish
//     it, its result is published once (stored atomically: a result that is already there
//     wins), and the entry deleted; then this event runs.
//   - An entry of another event whose result is stored: the holder published and died
//     before deleting the entry (step done: the entry is deleted), or gave up without
//     finishing (the leftovers are rolled back as on a final failure, then deleted).
//
// A delivery whose lock is held by a worker finishing this same event's operation waits
// for it instead of retrying, and then replays the stored result.
//
// # Finish or roll back, per step
//
// Operations go forward: an interrupted reorder is elected, an interrupted copy is waited
// for. They are rolled back only on a final failure — a permanent error, the operation's
// timeout, or a transient error on the last attempt — so that the cluster ends in the
// requested state or the state before the event, never between:
//
//   - reorder and election (preferred-leader, broker-overloaded): a partition reordered
//     whose election did not take effect gets its replica order back (api, zk-reassign);
//     with zk-nudge, topic znodes rewritten before a failover that did not happen are put
//     back (version-checked); an order the controller took after the one failover allowed
//     per event stays, and the result says so.
//   - replication factor: reassignments of ours still running are cancelled (KIP-455: the
//     replica set goes back), partitions that finished stay, throttles are restored.
//   - log-dir moves: future replicas of ours still copying are dropped (AlterReplicaLogDirs
//     back to the current directory), moves that finished stay, the broker's
//     replica.alter.log.dirs.io.max.bytes.per.second is restored.
//
// Never cancelled or restored: on a graceful shutdown (SIGTERM) the lock is released, the
// journal and the copies in flight are left, and the next holder adopts them; when the lock
// is lost nothing is written at all (the next holder resumes from the journal).
//
// # Throttles: compare-and-restore
//
// Only the keys this operation sets are recorded and restored, and only where they still
// hold the value we set; a value someone else set since is left alone and named in the
// result (throttles_kept, and a note).
//
// # Results tell the truth
//
// A change counts only when a fresh read shows it; a read that fails is a transient failure,
// never a success. A result's changes are the journaled partitions whose state differs from
// the state before the first attempt, as a fresh read shows them: every change made by every
// attempt (noop only when no attempt changed anything).
package handlers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// Cluster is what handlers need of one configured Kafka cluster.
type Cluster struct {
	Name   string
	Client *kgo.Client
	// ZK is the session on the cluster's own ZooKeeper (nil for KRaft or when not
	// configured); its lock lives in the same ensemble, so ZooKeeper writes are fenced.
	ZK     *locks.Session
	Chroot string
	// Locker takes the cluster's lock: ZooKeeper (locks.ZK) or NATS key-value
	// (*locks.KVLocker). ZooKeeper strategies need the ZooKeeper lock, whose leases fence
	// their znode writes.
	Locker   locks.Backend
	Strategy kafka.Strategy // the configured default
}

// reader reads the cluster with what it has (caps): its ongoing reassignments through the
// API (Kafka 2.4+), else from /admin/reassign_partitions in its ZooKeeper.
func (c *Cluster) reader(caps kafka.Capabilities) kafka.Reader {
	r := kafka.Reader{Client: c.Client, Caps: caps, Chroot: c.Chroot}
	if c.ZK != nil {
		r.ZK = c.ZK.Conn()
	}
	return r
}

// Config configures the handlers. It is copied and completed with defaults by New; the
// handlers never change it afterwards, so they are safe for concurrent use.
type Config struct {
	Clusters map[string]*Cluster
	// Journal is the operation journal. Required.
	Journal *journal.Store
	// JS holds the broker-overloaded cool-down records (OverloadedBucket) and the hourly
	// operation records of the guardrails (GuardrailsBucket). Required.
	JS      jetstream.JetStream
	Logger  *zap.Logger
	Metrics *metrics.Metrics
	// BlockedWait is how long to wait for partitions under reassignment before skipping
	// them (preferred-leader; broker-overloaded with WaitForReassignment). Default 1m.
	BlockedWait time.Duration
	// VerifyTimeout bounds the wait for metadata to show new orders and leaders. Default 30s.
	VerifyTimeout time.Duration
	// ApplyTimeout bounds retries of a reorder or an election. Default 2m.
	ApplyTimeout time.Duration
	// RF tunes replication-factor changes.
	RF RFOptions
	// LogDir tunes log-dir moves.
	LogDir LogDirOptions
	// Overloaded tunes broker-overloaded.
	Overloaded OverloadedOptions
	// Guardrails are the limits every event must stay within.
	Guardrails GuardrailOptions
	// Hook, when set, is called at named steps of an operation (see the Step* constants):
	// fault tests stop or kill a worker there. Nil in production.
	Hook func(step string)
}

// Named steps at which Config.Hook is called.
const (
	StepJournalWritten  = "journal-written"  // the plan is journaled; no cluster write yet
	StepReordered       = "reordered"        // reorders done; elections not sent
	StepThrottled       = "throttled"        // throttles set; no reassignment submitted yet
	StepCopying         = "copying"          // a batch of reassignments is submitted and copying
	StepBeforeResult    = "before-result"    // the outcome is journaled as done; result not published
	StepResultPublished = "result-published" // the result is stored; the journal entry not deleted
	// StepAwaitingReassignments: a final failure's result is published; the reassignments
	// it left running (the cluster cannot cancel them) are being waited for, throttles set.
	StepAwaitingReassignments = "awaiting-reassignments"
)

// OverloadedOptions tunes broker-overloaded.
type OverloadedOptions struct {
	// CoolDown: another alert for the same broker within it is a noop naming the event
	// that acted (alerting systems re-send alerts every minute). Default 10m.
	CoolDown time.Duration
	// ElectionBatch caps the partitions of one election request; 0 = all in one.
	ElectionBatch int
	// WaitForReassignment waits (up to BlockedWait) for partitions under reassignment
	// instead of skipping them at once.
	WaitForReassignment bool
}

// Handlers carries out every event type; it is the pipeline.Handler of each.
type Handlers struct {
	cfg      Config
	log      *zap.Logger
	clusters []string
	cool     *coolDown
	guard    *guardrails.Rules
	ops      *opLog
}

var _ pipeline.Handler = (*Handlers)(nil)

// New completes cfg with defaults and checks it.
func New(cfg Config) (*Handlers, error) {
	if cfg.Journal == nil {
		return nil, errors.New("handlers: a journal is required")
	}
	if cfg.JS == nil {
		return nil, errors.New("handlers: JetStream is required (cool-down records)")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.BlockedWait == 0 {
		cfg.BlockedWait = time.Minute
	}
	if cfg.VerifyTimeout == 0 {
		cfg.VerifyTimeout = 30 * time.Second
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 2 * time.Minute
	}
	if cfg.Overloaded.CoolDown == 0 {
		cfg.Overloaded.CoolDown = 10 * time.Minute
	}
	cfg.RF.defaults()
	cfg.LogDir.defaults()
	cfg.Guardrails = cfg.Guardrails.clone()
	guard, err := newRules(cfg.Guardrails)
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	if cfg.Hook == nil {
		cfg.Hook = func(string) {}
	}
	clusters := make(map[string]*Cluster, len(cfg.Clusters))
	names := make([]string, 0, len(cfg.Clusters))
	for name, c := range cfg.Clusters {
		clusters[name] = c
		names = append(names, name)
	}
	sort.Strings(names)
	cfg.Clusters = clusters
	return &Handlers{cfg: cfg, log: cfg.Logger, clusters: names,
		cool:  &coolDown{js: cfg.JS, ttl: cfg.Overloaded.CoolDown},
		guard: guard, ops: &opLog{js: cfg.JS, limit: cfg.Guardrails.MaxOperationsPerHour, now: time.Now}}, nil
}

// Types lists the event types these handlers carry out.
func (h *Handlers) Types() []string {
	return []string{events.TypeBrokerOverloaded, events.TypeReplicaChangeRequested, events.TypeLogDirMoveRequested}
}

// task is one event's operation, prepared (checked, not planned) outside the lock.
type task interface {
	// plan reads the cluster and plans, writing nothing: dry runs and fresh runs.
	plan(ctx context.Context) (*model.Snapshot, plan.Plan, error)
	// start runs a fresh operation under the lock: it plans and, when there is something
	// to change, journals the plan (x.begin) and carries it out.
	start(ctx context.Context, x *exec) error
	// resume carries out the journaled operation x.op (fresh from start, or left by an
	// earlier attempt) to its end, filling x.res.
	resume(ctx context.Context, x *exec) error
	// rollback undoes what is half-done of x.op after a final failure, says what it did,
	// and sets x.res.Changes to the changes that remain (a fresh read).
	rollback(ctx context.Context, x *exec) (string, error)
}

// Handle implements pipeline.Handler.
func (h *Handlers) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	ev := job.Event
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster}
	defer h.cfg.Metrics.Handling(ev.Cluster, ev.Type)()
	defer func() { h.cfg.Metrics.Operation(res) }()
	log := h.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
	// The guardrails first: a source that may not send the event gets no answer from the
	// cool-down either.
	if err := h.admit(ctx, ev, log); err != nil {
		return asResult(res, err)
	}
	if req, ok := ev.Payload.(*events.BrokerOverloaded); ok && !ev.DryRun() {
		if _, known := h.cfg.Clusters[ev.Cluster]; known {
			if noop, err := h.coolingDown(ctx, job, req, res); noop || err != nil {
				return res, err
			}
		}
	}
	t, c, err := h.prepare(ctx, job, res, log)
	if err != nil {
		return asResult(res, err)
	}
	if ev.DryRun() {
		return h.dryRun(ctx, res, t)
	}
	out, err := h.locked(ctx, job, c, t, res, log)
	if out != nil && out != res {
		*res = *out // for the metrics
	}
	return out, err
}

// prepare checks the request against the configuration and the cluster's capabilities
// and builds its task. Errors are rejections or transient failures.
func (h *Handlers) prepare(ctx context.Context, job *pipeline.Job, res *events.Result, log *zap.Logger) (task, *Cluster, error) {
	ev := job.Event
	c, ok := h.cfg.Clusters[ev.Cluster]
	if !ok {
		return nil, nil, reject("unknown cluster %q", ev.Cluster)
	}
	switch req := ev.Payload.(type) {
	case *events.ReplicaChange:
		res.Reason = req.Reason
		log = log.With(zap.String("topic", req.Topic))
		if req.ReplicationFactor != nil {
			t, err := h.newRF(ctx, job, c, req, res, log)
			return t, c, err
		}
		t, err := h.newPreferred(ctx, job, c, req, res, log)
		return t, c, err
	case *events.BrokerOverloaded:
		res.Reason = req.Reason
		t, err := h.newOverloaded(ctx, job, c, req, res, log.With(zap.Int32("broker", *req.Broker)))
		return t, c, err
	case *events.LogDirMove:
		res.Reason = req.Reason
		t, err := h.newLogDir(ctx, job, c, req, res, log.With(zap.Int32("broker", *req.Broker)))
		return t, c, err
	}
	return nil, nil, fmt.Errorf("this worker has no handler for %s events", ev.Type)
}

// rejected is a request that cannot be carried out as asked: result "rejected".
type rejected struct{ reason string }

func (r *rejected) Error() string { return r.reason }

func reject(format string, args ...any) error { return &rejected{fmt.Sprintf(format, args...)} }

func isRejection(err error) bool {
	var r *rejected
	var pr *plan.RejectError
	var gv *guardrails.Violation
	return errors.As(err, &r) || errors.As(err, &pr) || errors.As(err, &gv)
}

// asResult turns a rejection (ours, the planner's or a guardrail's) into a rejected result.
func asResult(res *events.Result, err error) (*events.Result, error) {
	if isRejection(err) {
		res.Status, res.Error = events.StatusRejected, err.Error()
		return res, nil
	}
	return res, err
}

// dryRun answers a dry run: the plan, with nothing changed and no lock taken. A plan over
// the partition cap is rejected as the real run would be; the hourly cap is not consulted
// (a dry run writes nothing, so it does not count either).
func (h *Handlers) dryRun(ctx context.Context, res *events.Result, t task) (*events.Result, error) {
	snap, p, err := t.plan(ctx)
	if err == nil {
		err = h.guard.Partitions(len(p.Changes))
	}
	if err != nil {
		return asResult(res, err)
	}
	res.Status, res.Changes = events.StatusPlanned, p.Changes
	planned(res, snap, p, 0)
	if n, ok := t.(interface{ summaryNote() string }); ok {
		res.AddNote(n.summaryNote())
	}
	return res, nil
}

// planned records in res what plan p found already so (noop) and what it skips, the
// partitions still under reassignment after waiting waited included.
func planned(res *events.Result, snap *model.Snapshot, p plan.Plan, waited time.Duration) {
	res.Noop = p.Noop
	res.Skipped = append(p.Skipped, blockedSkips(snap, p.Blocked, waited)...)
}

// planFunc reads the cluster and plans.
type planFunc func(ctx context.Context) (*model.Snapshot, plan.Plan, error)

// planUntilUnblocked plans, and plans again every 2s while the plan has partitions under
// reassignment (or offline), for at most wait; the partitions still blocked then are the caller's to
// skip.
func planUntilUnblocked(ctx context.Context, wait time.Duration, planOnce planFunc, log *zap.Logger) (*model.Snapshot, plan.Plan, error) {
	end := time.Now().Add(wait)
	for {
		snap, p, err := planOnce(ctx)
		if err != nil || len(p.Blocked) == 0 || time.Now().After(end) {
			return snap, p, err
		}
		log.Info("partitions under reassignment or offline; waiting", zap.Int("partitions", len(p.Blocked)), zap.Stringer("first", p.Blocked[0]))
		select {
		case <-ctx.Done():
			return nil, plan.Plan{}, context.Cause(ctx)
		case <-time.After(2 * time.Second):
		}
	}
}

// settle sets the status from what was done (ok changes verified) and what was skipped.
func settle(res *events.Result, ok int) *events.Result {
	switch {
	case len(res.Skipped) == 0 && ok == 0 && len(res.Changes) == 0:
		res.Status = events.StatusNoop
	case len(res.Skipped) == 0:
		res.Status = events.StatusSucceeded
	case ok > 0 || len(res.Noop) > 0:
		res.Status = events.StatusPartial
	default:
		res.Status = events.StatusFailed
		var reasons []string
		for _, s := range res.Skipped {
			reasons = append(reasons, s.TopicPartition.String()+": "+s.Reason)
		}
		res.Error = "nothing could be changed: " + strings.Join(reasons, "; ")
	}
	return res
}

func blockedSkips(snap *model.Snapshot, blocked []model.TopicPartition, waited time.Duration) []plan.Skip {
	var out []plan.Skip
	for _, tp := range blocked {
		p, _ := snap.Partition(tp)
		if p.Leader < 0 && !p.Reassigning() {
			out = append(out, plan.Skip{TopicPartition: tp, Code: plan.SkipNoLeader, Reason: fmt.Sprintf(
				"no leader (offline; replicas %v, isr %v), still after waiting %s", p.Replicas, p.ISR, waited)})
			continue
		}
		out = append(out, plan.Skip{TopicPartition: tp, Code: plan.SkipReassigning, Reason: fmt.Sprintf(
			"under reassignment (%s), still after waiting %s", p.Reassignment(), waited)})
	}
	return out
}

// strategyFor resolves the strategy of a request: the event's, else the cluster's. A
// ZooKeeper strategy is refused (rejected: nothing was written) when /controller names a
// KRaft controller: the cluster is being migrated, and would ignore the znodes.
func strategyFor(ctx context.Context, c *Cluster, asked string) (kafka.Strategy, kafka.Capabilities, error) {
	want := c.Strategy
	if asked != "" {
		s, err := kafka.ParseStrategy(asked)
		if err != nil {
			return "", kafka.Capabilities{}, reject("strategy: %v", err)
		}
		if s != kafka.StrategyAuto {
			want = s
		}
	}
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return "", caps, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	strategy, err := kafka.Choose(want, caps, c.ZK != nil)
	if err != nil {
		return "", caps, reject("cluster %s: %v", c.Name, err)
	}
	if strategy == kafka.StrategyZKReassign || strategy == kafka.StrategyZKNudge {
		err := kafka.CheckZKController(ctx, c.ZK.Conn(), c.Chroot)
		if errors.Is(err, kafka.ErrKRaftController) {
			return "", caps, reject("cluster %s: strategy %s: %v", c.Name, strategy, err)
		}
		if err != nil {
			return "", caps, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
		}
	}
	return strategy, caps, nil
}
