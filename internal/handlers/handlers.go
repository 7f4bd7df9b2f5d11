// Package handlers holds kafkamender's operations, one task per event type, that the
// operation engine (package operation) carries out under each cluster's lock. A task reads
// as its steps:
//
//	plan (read the cluster, plan; nothing written) → apply (from wherever the cluster
//	stands) → verify (a fresh read) → or rollback (a final failure)
//
// The files are named after what they handle: preferred.go (make a broker the preferred
// leader), overloaded.go (shed a broker's leadership), rf.go (replication factor),
// logdir.go (move replicas between a broker's log directories). reorder.go is the
// reorder-and-elect steps the first two share, throttles.go the throttle life cycle the
// copies share (set from the journal, compare-and-restore), verify.go the verification
// every task shares (fresh reads, what changed, what the operation left), and
// guardrails.go the limits every event must stay within. handlers.go builds the tasks and
// is the engine's lock and guard.
//
// # What tasks rely on
//
// The engine journals a plan before a task's first cluster write, and hands a task that
// is resumed (after a crash, a lost lock, by another worker) the journaled plan: a task
// never trusts the step reached. It compares the plan with a fresh read of the cluster: a
// partition already as planned is done, one still as before is done now, one found in a
// third state was changed by someone else since and is skipped with that reason.
// Reassignments the entry lists are ours and are waited for, not treated as foreign;
// throttles are not re-read (what they hold now is ours): the values to restore come from
// the entry. A task built from an entry whose event no longer decodes verifies or rolls
// back from the entry alone.
//
// # Rollback, per task
//
// Operations go forward: an interrupted reorder is elected, an interrupted copy is waited
// for. They are rolled back only on a final failure, so that the cluster ends in the
// requested state or the state before the event, never between:
//
//   - reorder and election (preferred-leader, broker-overloaded): a partition reordered
//     whose election did not take effect gets its replica order back (api, zk-reassign);
//     with zk-nudge, topic znodes rewritten before a failover that did not happen are put
//     back (version-checked); an order the controller took after the one failover allowed
//     per event stays, and the result says so.
//   - replication factor: reassignments of ours still running are cancelled (KIP-455: the
//     replica set goes back), partitions that finished stay, throttles are restored; a
//     cluster before 2.4 cannot cancel: the copies run to their end, and their throttles
//     are restored then (the engine's await).
//   - log-dir moves: future replicas of ours still copying are dropped (AlterReplicaLogDirs
//     back to the current directory), moves that finished stay, the broker's
//     replica.alter.log.dirs.io.max.bytes.per.second is restored.
//
// # Throttles: compare-and-restore
//
// Only the keys an operation sets are recorded and restored, and only where they still
// hold the value we set; a value someone else set since is left alone and named in the
// result (throttles_kept, and a note).
//
// # Results tell the truth
//
// A change counts only when a fresh read shows it; a read that fails is a transient failure,
// never a success. A result's changes are the journaled partitions whose state differs from
// the state before the first attempt, as a fresh read shows them: every change made by every
// attempt (noop only when no attempt changed anything). Reads are at least as new as what
// the cluster's previous operation left (verify.go), so that a broker whose metadata lags
// is never taken for the cluster.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/retry"
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
	// Capacity is the configured capacity in bytes of the brokers it lists
	// (clusters.<name>.capacity_bytes): such a broker holds the sum of its replicas'
	// sizes against it. Other brokers are bounded by their volumes as they report them.
	Capacity map[int32]int64
	// CapacityThreshold is the share of a broker's capacity no plan may put it above
	// (0: config.DefaultCapacityThreshold).
	CapacityThreshold float64
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
	// JS holds the broker-overloaded cool-down records (events.OverloadedBucket) and the
	// hourly operation records of the guardrails (events.GuardrailsBucket). Required.
	JS      jetstream.JetStream
	Logger  *zap.Logger
	Metrics *metrics.Metrics
	// BlockedWait is how long to wait for partitions under reassignment before skipping
	// them (preferred-leader; broker-overloaded with WaitForReassignment). Default 1m.
	BlockedWait time.Duration
	// VerifyTimeout bounds the wait for metadata to show new orders and leaders, and for
	// a broker whose metadata lags to catch up with what the last operation left.
	// Default 30s.
	VerifyTimeout time.Duration
	// ApplyTimeout bounds retries of a reorder or an election. Default 2m.
	ApplyTimeout time.Duration
	// CopyPoll is the interval of progress reports of a copy (replication-factor changes,
	// log-dir moves), and the longest between two checks of it (the checks begin at 20 ms
	// and back off). Default 2s.
	CopyPoll time.Duration
	// LogDirSubmitWait bounds the retries of an AlterReplicaLogDirs that the broker answers
	// REPLICA_NOT_AVAILABLE (the replica is not created there yet). Default 1m.
	LogDirSubmitWait time.Duration

	// The configuration's sections, as it declares, documents and validates them; their
	// defaults are filled here too, for handlers built without a configuration.

	// RF tunes replication-factor changes.
	RF config.ReplicationFactor
	// LogDir tunes log-dir moves.
	LogDir config.LogDir
	// Overloaded tunes broker-overloaded (its WaitForReassignment waits up to
	// BlockedWait).
	Overloaded config.BrokerOverloaded
	// PartitionOffline tunes partition-offline (whether unclean elections may be made).
	PartitionOffline config.PartitionOffline
	// Guardrails are the limits every event must stay within.
	Guardrails guardrails.Limits
}

// Handlers builds the task of each event type for the engine, and is its lock and guard.
type Handlers struct {
	cfg      Config
	log      *zap.Logger
	clusters []string
	cool     *coolDown
	guard    *guardrails.Rules
	ops      *opLog
	caps     map[string]*capsCache // by cluster
}

var (
	_ operation.Tasks  = (*Handlers)(nil)
	_ operation.Locker = (*Handlers)(nil)
	_ operation.Guard  = (*Handlers)(nil)
)

// New completes cfg with defaults and checks it.
func New(cfg Config) (*Handlers, error) {
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
	if cfg.CopyPoll == 0 {
		cfg.CopyPoll = 2 * time.Second
	}
	if cfg.LogDirSubmitWait == 0 {
		cfg.LogDirSubmitWait = time.Minute
	}
	cfg.Overloaded.SetDefaults()
	cfg.RF.SetDefaults()
	cfg.LogDir.SetDefaults()
	cfg.Guardrails = cfg.Guardrails.Clone() // never the caller's lists
	guard, err := guardrails.New(cfg.Guardrails)
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	clusters := make(map[string]*Cluster, len(cfg.Clusters))
	names := make([]string, 0, len(cfg.Clusters))
	for name, c := range cfg.Clusters {
		clusters[name] = c
		names = append(names, name)
	}
	sort.Strings(names)
	cfg.Clusters = clusters
	caps := make(map[string]*capsCache, len(names))
	for _, name := range names {
		caps[name] = &capsCache{}
	}
	return &Handlers{cfg: cfg, log: cfg.Logger, clusters: names, caps: caps,
		cool:  newCoolDown(cfg.JS, cfg.Overloaded.CoolDown),
		guard: guard, ops: newOpLog(cfg.JS, cfg.Guardrails.MaxOperationsPerHour, time.Now)}, nil
}

// Types lists the event types these handlers build tasks for.
func (h *Handlers) Types() []string {
	return []string{events.TypeBrokerOverloaded, events.TypeReplicaChangeRequested, events.TypeLogDirMoveRequested,
		events.TypeBrokerFailed, events.TypeBrokerDrain, events.TypeBrokerAdded, events.TypePartitionOffline,
		events.TypePlanApproved, events.TypePlanDenied}
}

// Clusters lists the clusters these handlers serve.
func (h *Handlers) Clusters() []string { return slices.Clone(h.clusters) }

// Engine returns the operation engine of these handlers: cfg's Tasks, Locks, Guard,
// Clusters and Absorber are filled with them, its Metrics when unset; the journal, the
// results, the logger and the fault-test hook are cfg's.
func (h *Handlers) Engine(cfg operation.Config) (*operation.Engine, error) {
	cfg.Tasks, cfg.Locks, cfg.Guard, cfg.Clusters = h, h, h, h.Clusters()
	if cfg.Absorber == nil {
		cfg.Absorber = h
	}
	if cfg.Metrics == nil {
		cfg.Metrics = h.cfg.Metrics
	}
	return operation.New(cfg)
}

// Acquire implements operation.Locker with the cluster's lock backend.
func (h *Handlers) Acquire(ctx context.Context, cluster, event string) (operation.Lease, error) {
	c, ok := h.cfg.Clusters[cluster]
	if !ok {
		return nil, fmt.Errorf("unknown cluster %q", cluster)
	}
	lease, err := c.Locker.Acquire(ctx, cluster, event)
	if errors.Is(err, locks.ErrBusy) {
		return nil, fmt.Errorf("%w: %w", operation.ErrBusy, err)
	}
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// New implements operation.Tasks: it checks a fresh request against the configuration
// and the cluster's capabilities and builds its task. Errors are rejections or transient.
func (h *Handlers) New(ctx context.Context, ev *events.Event, res *events.Result) (operation.Task, error) {
	c, ok := h.cfg.Clusters[ev.Cluster]
	if !ok {
		return nil, operation.Reject("unknown cluster %q", ev.Cluster)
	}
	log := h.log.With(zap.String("id", ev.ID), zap.String("type", ev.Type), zap.String("cluster", ev.Cluster))
	switch req := ev.Payload.(type) {
	case *events.ReplicaChange:
		res.Reason = req.Reason
		log = log.With(zap.String("topic", req.Topic))
		if req.ReplicationFactor != nil {
			return h.newRF(ctx, c, ev, req, res, log)
		}
		return h.newPreferred(ctx, c, req, res, log)
	case *events.BrokerOverloaded:
		res.Reason = req.Reason
		return h.newOverloaded(ctx, c, ev, req, res, log.With(zap.Int32("broker", *req.Broker)))
	case *events.LogDirMove:
		res.Reason = req.Reason
		return h.newLogDir(ctx, c, req, res, log.With(zap.Int32("broker", *req.Broker)))
	case *events.BrokerFailed:
		res.Reason = req.Reason
		return h.newBrokerFailed(ctx, c, req, res, log.With(zap.Int32("broker", *req.Broker)))
	case *events.BrokerDrain:
		res.Reason = req.Reason
		return h.newBrokerDrain(ctx, c, req, res, log.With(zap.Int32("broker", *req.Broker)))
	case *events.BrokerAdded:
		res.Reason = req.Reason
		return h.newBrokerAdded(ctx, c, req, res, log.With(zap.Int32s("brokers", req.Added())))
	case *events.PartitionOffline:
		res.Reason = req.Reason
		return h.newPartitionOffline(ctx, c, req, res, log)
	}
	return nil, fmt.Errorf("this worker has no handler for %s events", ev.Type)
}

// Resume implements operation.Tasks: the task of a journaled operation, built from its
// entry (the strategy it began with, its plan), with its event's parameters when the
// event decodes. It refuses nothing the cluster no longer has: only an unreachable
// cluster fails (transient).
func (h *Handlers) Resume(ctx context.Context, ev *events.Event, e *journal.Entry, res *events.Result) (operation.Task, error) {
	c, ok := h.cfg.Clusters[e.Cluster]
	if !ok {
		return nil, fmt.Errorf("journal entry of cluster %s, which this worker does not serve", e.Cluster)
	}
	log := h.log.With(zap.String("id", e.Event), zap.String("type", e.Type), zap.String("cluster", e.Cluster))
	caps, err := h.capabilities(ctx, c)
	if err != nil {
		return nil, err
	}
	strategy := kafka.Strategy(e.Strategy)
	res.Strategy = e.Strategy
	switch e.Type {
	case events.TypeReplicaChangeRequested:
		req, _ := ev.Payload.(*events.ReplicaChange)
		if req != nil {
			res.Reason = req.Reason
		}
		if !reorderEntry(e) {
			return h.resumeRF(c, strategy, caps, req, e, log), nil
		}
		return &preferredTask{reorderOp: h.reorderOp(c, strategy, caps, 0)}, nil
	case events.TypeBrokerOverloaded:
		req, _ := ev.Payload.(*events.BrokerOverloaded)
		t := &overloadedTask{reorderOp: h.reorderOp(c, strategy, caps, h.cfg.Overloaded.ElectionBatchSize), req: req, log: log}
		if req != nil {
			res.Reason = req.Reason
			if t.kv, err = h.cool.bucket.KeyValue(ctx); err != nil {
				return nil, err
			}
		}
		return t, nil
	case events.TypeBrokerFailed, events.TypeBrokerDrain, events.TypeBrokerAdded:
		t := h.resumeRF(c, strategy, caps, nil, e, log)
		timeout, rate := asked(ev.Payload)
		if timeout > 0 {
			t.timeout = timeout
		}
		if rate > 0 {
			t.rate = rate
		}
		t.leaders = e.Type != events.TypeBrokerFailed
		switch req := ev.Payload.(type) {
		case *events.BrokerFailed:
			res.Reason = req.Reason
			t.failed = []int32{*req.Broker}
		case *events.BrokerDrain:
			res.Reason = req.Reason
			t.drained = *req.Broker
		case *events.BrokerAdded:
			res.Reason = req.Reason
		}
		// The event no longer decodes: its plan says which broker it empties.
		if e.Type == events.TypeBrokerDrain && t.drained < 0 {
			t.drained = drainedOf(e.Changes)
		}
		if e.Type == events.TypeBrokerFailed && t.failed == nil {
			if b := drainedOf(e.Changes); b >= 0 {
				t.failed = []int32{b}
			}
		}
		return t, nil
	case events.TypePartitionOffline:
		req, _ := ev.Payload.(*events.PartitionOffline)
		if req != nil {
			res.Reason = req.Reason
		}
		return h.resumeOffline(c, strategy, caps, req, log), nil
	case events.TypeLogDirMoveRequested:
		t := &logDirTask{h: h, c: c, log: log}
		if req, _ := ev.Payload.(*events.LogDirMove); req != nil {
			res.Reason = req.Reason
			t.rate, t.timeout = h.logDirRate(req), h.logDirTimeout(req)
		}
		return t, nil
	}
	return nil, fmt.Errorf("journal entry of a %s event, which this worker has no handler for", e.Type)
}

// strategyFor resolves the strategy of a request: the event's, else the cluster's. A
// ZooKeeper strategy is refused (rejected: nothing was written) when /controller names a
// KRaft controller: the cluster is being migrated, and would ignore the znodes.
func (h *Handlers) strategyFor(ctx context.Context, c *Cluster, asked string) (kafka.Strategy, kafka.Capabilities, error) {
	want := c.Strategy
	if asked != "" {
		s, err := kafka.ParseStrategy(asked)
		if err != nil {
			return "", kafka.Capabilities{}, operation.Reject("strategy: %v", err)
		}
		if s != kafka.StrategyAuto {
			want = s
		}
	}
	caps, err := h.capabilities(ctx, c)
	if err != nil {
		return "", caps, err
	}
	strategy, err := kafka.Choose(want, caps, c.ZK != nil)
	if err != nil {
		return "", caps, operation.Reject("cluster %s: %v", c.Name, err)
	}
	if strategy == kafka.StrategyZKReassign || strategy == kafka.StrategyZKNudge {
		err := kafka.CheckZKController(ctx, c.ZK.Conn(), c.Chroot)
		if errors.Is(err, kafka.ErrKRaftController) {
			return "", caps, operation.Reject("cluster %s: strategy %s: %v", c.Name, strategy, err)
		}
		if err != nil {
			return "", caps, retry.Transient(fmt.Errorf("cluster %s: %w", c.Name, err))
		}
	}
	return strategy, caps, nil
}

// zkWriter is the lease of a run as the fence of ZooKeeper writes: only a ZooKeeper lock
// is one.
func zkWriter(r *operation.Run, c *Cluster) (kafka.FencedWriter, error) {
	w, ok := r.Lease().(kafka.FencedWriter)
	if !ok {
		return nil, fmt.Errorf("cluster %s: ZooKeeper writes need the cluster's lock in ZooKeeper (lock backend zookeeper), which fences them", c.Name)
	}
	return w, nil
}

func transient(err error) error { return retry.Transient(err) }
