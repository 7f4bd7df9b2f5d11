package handlers

import (
	"context"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// preferredTask makes a broker the preferred leader (head of the assigned replicas) and the
// leader of partitions: a replica-change-requested event with preferred_leader.
type preferredTask struct {
	reorderOp
	req plan.PreferredLeaderRequest
	log *zap.Logger
}

func (h *Handlers) newPreferred(ctx context.Context, _ *pipeline.Job, c *Cluster, req *events.ReplicaChange, res *events.Result, log *zap.Logger) (task, error) {
	strategy, caps, err := strategyFor(ctx, c, req.Strategy)
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	return &preferredTask{
		reorderOp: reorderOp{h: h, c: c, strategy: strategy, caps: caps},
		req:       plan.PreferredLeaderRequest{Topic: req.Topic, Partitions: req.Partitions, Broker: *req.PreferredLeader},
		log:       log,
	}, nil
}

func (t *preferredTask) plan(ctx context.Context) (*model.Snapshot, plan.Plan, error) {
	snap, err := t.rd().Snapshot(ctx, t.req.Topic)
	if err != nil {
		return nil, plan.Plan{}, transient(err)
	}
	p, err := plan.PreferredLeader(snap, t.req)
	return snap, p, err
}

func (t *preferredTask) start(ctx context.Context, x *exec) error {
	wait := t.h.cfg.BlockedWait
	snap, p, err := planUntilUnblocked(ctx, wait, t.plan, t.log)
	if err != nil {
		return err
	}
	planned(x.res, snap, p, wait)
	if len(p.Changes) == 0 {
		settle(x.res, 0)
		return nil
	}
	if err := x.begin(ctx, journal.Entry{Changes: p.Changes}); err != nil {
		return err
	}
	return t.resume(ctx, x)
}

func (t *preferredTask) resume(ctx context.Context, x *exec) error {
	verified, err := t.run(ctx, x)
	if err != nil {
		return err
	}
	settle(x.res, verified)
	return nil
}
