package handlers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// ReplicaChange handles replica-change-requested events. With preferred_leader it makes a
// broker the preferred leader (head of the assigned replicas) and the leader of partitions:
// AR swap through the cluster's backend, one batched preferred election, verification.
type ReplicaChange struct {
	Clusters map[string]*Cluster
	Logger   *zap.Logger
	Metrics  *Metrics
	// BlockedWait is how long to wait for partitions under reassignment before skipping
	// them. Default 1m.
	BlockedWait time.Duration
	// VerifyTimeout bounds the wait for metadata to show the new orders and leaders.
	// Default 30s.
	VerifyTimeout time.Duration
	// ApplyTimeout bounds retries of a reorder or an election. Default 2m.
	ApplyTimeout time.Duration
	// RF tunes replication-factor changes.
	RF RFOptions
}

var _ pipeline.Handler = (*ReplicaChange)(nil)

func (h *ReplicaChange) defaults() {
	if h.BlockedWait == 0 {
		h.BlockedWait = time.Minute
	}
	if h.VerifyTimeout == 0 {
		h.VerifyTimeout = 30 * time.Second
	}
	if h.ApplyTimeout == 0 {
		h.ApplyTimeout = 2 * time.Minute
	}
	if h.Logger == nil {
		h.Logger = zap.NewNop()
	}
}

// Handle implements pipeline.Handler.
func (h *ReplicaChange) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	h.defaults()
	ev := job.Event
	req := ev.Payload.(*events.ReplicaChange)
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Reason: req.Reason}
	defer func() { h.Metrics.observe(res) }()
	log := h.Logger.With(zap.String("id", ev.ID), zap.String("cluster", ev.Cluster), zap.String("topic", req.Topic))
	c, ok := h.Clusters[ev.Cluster]
	if !ok {
		return asResult(res, reject("unknown cluster %q", ev.Cluster))
	}
	want := c.Strategy
	if req.Strategy != "" {
		s, err := kafka.ParseStrategy(req.Strategy)
		if err != nil {
			return asResult(res, reject("strategy: %v", err))
		}
		if s != kafka.StrategyAuto {
			want = s
		}
	}
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return res, retry.Transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	strategy, err := kafka.Choose(want, caps, c.ZK != nil)
	if err != nil {
		return asResult(res, reject("cluster %s: %v", c.Name, err))
	}
	res.Strategy = string(strategy)
	if req.ReplicationFactor != nil {
		return h.replicationFactor(ctx, job, c, req, res, caps, strategy, log)
	}
	preq := plan.PreferredLeaderRequest{Topic: req.Topic, Partitions: req.Partitions, Broker: *req.PreferredLeader}

	planOnce := func(ctx context.Context) (*kafka.Snapshot, plan.Plan, error) {
		snap, err := kafka.ReadSnapshot(ctx, c.Client, req.Topic)
		if err != nil {
			return nil, plan.Plan{}, retry.Transient(err)
		}
		p, err := plan.PreferredLeader(snap, preq)
		return snap, p, err
	}
	lctx, release, done, err := begin(ctx, c, job, res, req.DryRun, planOnce, log)
	if done {
		return res, err
	}
	defer release()
	ctx = lctx

	snap, p, err := planUntilUnblocked(ctx, h.BlockedWait, planOnce, log)
	if err != nil {
		return asResult(res, err)
	}
	res.Noop = p.Noop
	res.Skipped = append(p.Skipped, blockedSkips(snap, p.Blocked, h.BlockedWait)...)
	if len(p.Changes) == 0 {
		return finish(res, 0), nil
	}

	be, err := backend(ctx, c, strategy, caps)
	if err != nil {
		return res, err
	}
	verified, err := execute(ctx, be, c, p, res, execOptions{apply: h.ApplyTimeout, verify: h.VerifyTimeout}, log)
	if err != nil {
		return res, err
	}
	return finish(res, verified), nil
}

// finish sets the status from what was done (ok changes verified) and what was skipped.
func finish(res *events.Result, ok int) *events.Result {
	switch {
	case len(res.Skipped) == 0 && ok == 0:
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

func blockedSkips(snap *kafka.Snapshot, blocked []kafka.TopicPartition, waited time.Duration) []plan.Skip {
	var out []plan.Skip
	for _, tp := range blocked {
		p, _ := snap.Partition(tp)
		out = append(out, plan.Skip{TopicPartition: tp, Reason: fmt.Sprintf(
			"under reassignment (adding %v, removing %v), still after waiting %s", p.Adding, p.Removing, waited)})
	}
	return out
}
