package handlers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// attemptTimeout bounds one attempt of a reorder or an election.
const attemptTimeout = 45 * time.Second

type execOptions struct {
	apply  time.Duration // bound on retries of the reorder and of the elections
	verify time.Duration // bound on waiting for metadata to show the result
	batch  int           // partitions per election request; 0: all in one
}

// execute applies a plan through the backend: every reorder in one request, then the
// preferred elections in one batch (chunked above opts.batch), then re-reads the changed
// partitions. It fills res.Changes with the partitions as they stand after, and adds a
// skip for each that does not show the planned order and leader, and returns how many do.
// res.ControllerFailover says whether the backend failed the controller over.
func execute(ctx context.Context, be kafka.Reorderer, c *Cluster, p plan.Plan, res *events.Result, opts execOptions, log *zap.Logger) (int, error) {
	// Each attempt has its own deadline: a request the controller never answers (its
	// event queue was dropped when it resigned, e.g. in a controller failover) must not
	// hang the operation; the next attempt finds the new controller.
	apply := func(op func(ctx context.Context) error) error {
		actx, cancel := context.WithTimeout(ctx, opts.apply)
		defer cancel()
		return retry.Do(actx, opts.apply, func() error {
			tctx, cancel := context.WithTimeout(actx, attemptTimeout)
			defer cancel()
			err := op(tctx)
			if err != nil && tctx.Err() != nil && actx.Err() == nil {
				return retry.Transient(fmt.Errorf("no answer within %s: %w", attemptTimeout, err))
			}
			return err
		}, func(err error, next time.Duration) {
			log.Warn("retrying", zap.Error(err), zap.Duration("in", next))
		})
	}
	if reorders := p.Reorders(); len(reorders) > 0 {
		err := apply(func(ctx context.Context) error { return be.Reorder(ctx, reorders) })
		res.ControllerFailover = be.ControllerFailover()
		if err != nil {
			return 0, fmt.Errorf("reorder replicas: %w", err)
		}
	}
	electErrs := map[kafka.TopicPartition]error{}
	elections := p.Elections()
	for len(elections) > 0 {
		chunk := elections
		if opts.batch > 0 && len(chunk) > opts.batch {
			chunk = chunk[:opts.batch]
		}
		elections = elections[len(chunk):]
		err := apply(func(ctx context.Context) error {
			out, err := be.ElectPreferred(ctx, chunk)
			if err != nil {
				return err
			}
			for tp, e := range out {
				if e != nil {
					electErrs[tp] = e
				} else {
					delete(electErrs, tp)
				}
			}
			return nil
		})
		if err != nil {
			// The reorders are done: report them, as they stand now.
			res.Changes = observe(ctx, c, p.Changes, 0, nil)
			return 0, fmt.Errorf("preferred election: %w", err)
		}
	}
	res.Changes = observe(ctx, c, p.Changes, opts.verify, electErrs)
	verified := 0
	for i, ch := range res.Changes {
		want := p.Changes[i]
		if slices.Equal(ch.ReplicasAfter, want.ReplicasAfter) && ch.LeaderAfter == want.LeaderAfter {
			verified++
			continue
		}
		skip := plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified, Reason: fmt.Sprintf(
			"after the change: replicas %v, leader %d (wanted %v led by %d)", ch.ReplicasAfter, ch.LeaderAfter, want.ReplicasAfter, want.LeaderAfter)}
		if e := electErrs[ch.TopicPartition]; e != nil {
			skip.Code, skip.Reason = plan.SkipElectionFailed, fmt.Sprintf("replicas reordered to %v but the election failed: %v", ch.ReplicasAfter, e)
		}
		res.Skipped = append(res.Skipped, skip)
	}
	return verified, nil
}

// observe re-reads the changed partitions until they show the planned order and leader
// (or timeout passes; partitions in skip are not waited for) and reports them as they are.
func observe(ctx context.Context, c *Cluster, planned []plan.Change, timeout time.Duration, skip map[kafka.TopicPartition]error) []plan.Change {
	deadline := time.Now().Add(timeout)
	topics := map[string]bool{}
	for _, ch := range planned {
		topics[ch.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	var out []plan.Change
	for {
		out = out[:0]
		done := true
		snap, err := kafka.ReadSnapshot(ctx, c.Client, names...)
		for _, ch := range planned {
			got := ch
			if err == nil {
				if part, ok := snap.Partition(ch.TopicPartition); ok {
					got.ReplicasAfter, got.LeaderAfter = part.Replicas, part.Leader
				}
			}
			waitFor := skip[ch.TopicPartition] == nil
			if err != nil || waitFor && (!slices.Equal(got.ReplicasAfter, ch.ReplicasAfter) || got.LeaderAfter != ch.LeaderAfter) {
				done = false
			}
			out = append(out, got)
		}
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}
