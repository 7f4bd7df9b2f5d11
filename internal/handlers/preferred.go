package handlers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// preferredTask makes a broker the preferred leader (head of the assigned replicas) and the
// leader of partitions: a replica-change-requested event with preferred_leader.
type preferredTask struct {
	reorderOp
	req plan.PreferredLeaderRequest
	log *zap.Logger
}

func (h *Handlers) newPreferred(ctx context.Context, c *Cluster, req *events.ReplicaChange, res *events.Result, log *zap.Logger) (operation.Task, error) {
	strategy, caps, err := h.strategyFor(ctx, c, req.Strategy)
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	return &preferredTask{
		reorderOp: h.reorderOp(c, strategy, caps, 0),
		req:       plan.PreferredLeaderRequest{Topic: req.Topic, Partitions: req.Partitions, Broker: *req.PreferredLeader},
		log:       log,
	}, nil
}

// Plan reads the topic and plans; a fresh run waits up to BlockedWait for partitions under
// reassignment (or offline), planning again every 2s, and skips those still blocked.
func (t *preferredTask) Plan(ctx context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	wait := t.h.cfg.BlockedWait
	if dry {
		wait = 0
	}
	return planUntilUnblocked(ctx, wait, func(ctx context.Context) (*model.Snapshot, plan.Plan, error) {
		snap, err := readNamed(ctx, t.c, t.rd(r), []string{t.req.Topic}, t.req.Topic)
		if err != nil {
			return nil, plan.Plan{}, err
		}
		p, err := plan.PreferredLeader(snap, t.req)
		if !dry {
			t.planned = snap
		}
		return snap, p, err
	}, t.log)
}

// planFunc reads the cluster and plans.
type planFunc func(ctx context.Context) (*model.Snapshot, plan.Plan, error)

// planUntilUnblocked plans, and plans again every 2s while the plan has partitions under
// reassignment (or offline), for at most wait; the partitions still blocked then are
// skipped, with why.
func planUntilUnblocked(ctx context.Context, wait time.Duration, planOnce planFunc, log *zap.Logger) (*operation.Planned, error) {
	end := time.Now().Add(wait)
	for {
		snap, p, err := planOnce(ctx)
		if err != nil {
			return nil, err
		}
		if len(p.Blocked) == 0 || !time.Now().Before(end) {
			return &operation.Planned{Changes: p.Changes, Noop: p.Noop, Skipped: append(p.Skipped, blockedSkips(snap, p.Blocked, wait)...)}, nil
		}
		log.Info("partitions under reassignment or offline; waiting", zap.Int("partitions", len(p.Blocked)), zap.Stringer("first", p.Blocked[0]))
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(2 * time.Second):
		}
	}
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
		if !p.Reassigning() {
			// Blocked for a replica catching up (plan.PreferredLeader).
			out = append(out, plan.Skip{TopicPartition: tp, Code: plan.SkipNotInSync, Reason: fmt.Sprintf(
				"the broker is not in the ISR %v, still after waiting %s: a preferred election would fail", p.ISR, waited)})
			continue
		}
		out = append(out, plan.Skip{TopicPartition: tp, Code: plan.SkipReassigning, Reason: fmt.Sprintf(
			"under reassignment (%s), still after waiting %s", p.Reassignment(), waited)})
	}
	return out
}

// readNamed reads topics (none: every topic) at least as new as the last operation left,
// making sure the topics a request names show: a broker whose metadata lags behind their
// creation reads them as absent, which must not become "does not exist" while another
// broker knows them. It reads again (backing off) while some broker knows a named topic
// the read lacks, up to VerifyTimeout, then fails transiently; a topic no broker knows is
// left for the planner to reject.
func readNamed(ctx context.Context, c *Cluster, rd *freshReader, topics []string, named ...string) (*model.Snapshot, error) {
	deadline := time.Now().Add(rd.wait)
	for i := 0; ; i++ {
		snap, err := rd.Snapshot(ctx, topics...)
		if err != nil {
			return nil, transient(err)
		}
		var absent []string
		for _, t := range named {
			if _, ok := snap.Topics[t]; !ok {
				absent = append(absent, t)
			}
		}
		if len(absent) == 0 {
			return snap, nil
		}
		known, err := kafka.KnownBy(ctx, c.Client, absent)
		if err != nil {
			return nil, err
		}
		if len(known) == 0 {
			return snap, nil
		}
		if time.Now().After(deadline) {
			return nil, transient(fmt.Errorf("the cluster's metadata does not show topics %v yet, which some brokers know (%v): it lags", absent, known))
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}
