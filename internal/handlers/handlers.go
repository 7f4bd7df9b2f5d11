// Package handlers holds one handler per event type. Each follows the same steps:
// lock(cluster) → read → plan → guard → apply → verify, and returns a result that says
// what was done and what was left alone, with reasons.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// Cluster is what handlers need of one configured Kafka cluster.
type Cluster struct {
	Name   string
	Client *kgo.Client
	// ZK is the session on the cluster's own ZooKeeper (nil for KRaft or when not
	// configured); its lock lives in the same ensemble, so ZooKeeper writes are fenced.
	ZK       *locks.Session
	Chroot   string
	Locker   *locks.Locker
	Strategy kafka.Strategy // the configured default
}

// rejected is a request that cannot be carried out as asked: result "rejected".
type rejected struct{ reason string }

func (r *rejected) Error() string { return r.reason }

func reject(format string, args ...any) error { return &rejected{fmt.Sprintf(format, args...)} }

// asResult turns a rejection (ours or the planner's) into a rejected result.
func asResult(res *events.Result, err error) (*events.Result, error) {
	var r *rejected
	var pr *plan.RejectError
	switch {
	case errors.As(err, &r), errors.As(err, &pr):
		res.Status, res.Error = events.StatusRejected, err.Error()
		return res, nil
	}
	return res, err
}

// lock takes the cluster lock for the job and returns a context that ends when the job's
// context ends or the lock is lost, and the release function to defer. When another
// worker finished the same event meanwhile, res becomes that earlier result and replayed
// is true. Otherwise res's times become those of the work under the lock (StartedAt now,
// FinishedAt when released), so that results show that operations on one cluster never
// overlap.
func lock(ctx context.Context, c *Cluster, job *pipeline.Job, res *events.Result, log *zap.Logger) (_ context.Context, release func(), replayed bool, _ error) {
	held, err := c.Locker.Acquire(ctx, c.Name, job.Event.ID)
	if err != nil {
		return nil, nil, false, fmt.Errorf("lock cluster %s: %w", c.Name, err)
	}
	log.Debug("lock acquired", zap.String("node", held.Node()))
	lctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(held.Context(), func() { cancel(context.Cause(held.Context())) })
	unlock := func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		if err := held.Release(rctx); err != nil {
			log.Warn("release lock", zap.Error(err))
		}
	}
	earlier, ok, err := job.Earlier(lctx)
	if err != nil {
		unlock()
		return nil, nil, false, err
	}
	if ok {
		earlier.Replayed = true
		*res = *earlier
		return lctx, unlock, true, nil
	}
	res.StartedAt = time.Now()
	release = func() {
		res.FinishedAt = time.Now()
		unlock()
	}
	return context.WithValue(lctx, heldKey{}, held), release, false, nil
}

// begin answers a dry run with the plan (no lock), or takes the cluster lock (see lock).
// done means res is complete (a dry run, or the replay of an earlier result) or err is
// set; otherwise the caller works under the returned context and defers release.
func begin(ctx context.Context, c *Cluster, job *pipeline.Job, res *events.Result, dry bool, planOnce planFunc, log *zap.Logger) (_ context.Context, release func(), done bool, _ error) {
	if dry {
		_, err := dryRun(ctx, res, planOnce)
		return nil, nil, true, err
	}
	lctx, release, replayed, err := lock(ctx, c, job, res, log)
	if err != nil {
		return nil, nil, true, err
	}
	if replayed {
		release()
		return nil, nil, true, nil
	}
	return lctx, release, false, nil
}

type heldKey struct{}

func heldFrom(ctx context.Context) *locks.Held {
	h, _ := ctx.Value(heldKey{}).(*locks.Held)
	return h
}

// backend builds the cluster backend for a chosen strategy.
func backend(ctx context.Context, c *Cluster, strategy kafka.Strategy, caps kafka.Capabilities) (kafka.Reorderer, error) {
	if strategy == kafka.StrategyAPI {
		return kafka.NewAPIBackend(c.Client), nil
	}
	held := heldFrom(ctx)
	if held == nil || c.ZK == nil {
		return nil, fmt.Errorf("strategy %s needs the cluster's zookeeper and a lock in it", strategy)
	}
	return kafka.NewZKBackend(strategy, kafka.ZKConfig{Conn: c.ZK.Conn(), Chroot: c.Chroot, Writer: held, Client: c.Client, Caps: caps})
}

// planFunc reads the cluster and plans.
type planFunc func(ctx context.Context) (*kafka.Snapshot, plan.Plan, error)

// dryRun answers a dry run: the plan, with nothing changed and no lock taken.
func dryRun(ctx context.Context, res *events.Result, planOnce planFunc) (*events.Result, error) {
	snap, p, err := planOnce(ctx)
	if err != nil {
		return asResult(res, err)
	}
	res.Status, res.Changes, res.Noop = events.StatusPlanned, p.Changes, p.Noop
	res.Skipped = append(p.Skipped, blockedSkips(snap, p.Blocked, 0)...)
	return res, nil
}

// planUntilUnblocked plans, and plans again every 2s while the plan has partitions under
// reassignment, for at most wait; the partitions still blocked then are the caller's to
// skip.
func planUntilUnblocked(ctx context.Context, wait time.Duration, planOnce planFunc, log *zap.Logger) (*kafka.Snapshot, plan.Plan, error) {
	end := time.Now().Add(wait)
	for {
		snap, p, err := planOnce(ctx)
		if err != nil || len(p.Blocked) == 0 || time.Now().After(end) {
			return snap, p, err
		}
		log.Info("partitions under reassignment; waiting", zap.Int("partitions", len(p.Blocked)), zap.Stringer("first", p.Blocked[0]))
		select {
		case <-ctx.Done():
			return nil, plan.Plan{}, context.Cause(ctx)
		case <-time.After(2 * time.Second):
		}
	}
}
