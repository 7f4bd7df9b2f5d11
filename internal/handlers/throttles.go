package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/operation"
)

// The throttle life cycle the copies share (replication factor, log-dir moves): the keys
// an operation sets are journaled, with the values they held, before any is set; they are
// set again idempotently by whoever resumes the operation, and put back by
// compare-and-restore when the copy is over (or rolled back): a key someone else changed
// meanwhile is left as they set it, and named in the result.

// throttles sets and restores one operation's throttles on cluster c.
type throttles struct {
	h *Handlers
	c *Cluster
}

// set sets the operation's throttle keys. A fresh operation (none journaled yet) that
// wants a throttle plans them with planKeys (none: nothing to set) and journals the keys
// and the values they hold before setting any; a resumed one applies the journaled keys
// again, idempotently, and never takes our own values for someone else's. After a fresh
// set it waits settle, so that the brokers put the throttles in force before anything
// copies.
func (t throttles) set(ctx context.Context, r *operation.Run, settle time.Duration, want bool, planKeys func(kafka.Throttler) ([]kafka.ThrottleKey, error)) error {
	e := r.Entry()
	fresh := e.Throttles == nil
	if fresh && !want {
		return nil
	}
	th, err := t.throttler(ctx, r)
	if err != nil {
		return err
	}
	if fresh {
		keys, err := planKeys(th)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		e.Throttles = keys
		if err := r.Save(ctx, journal.StepThrottling); err != nil {
			return err
		}
	}
	kept, err := th.ApplyThrottles(ctx, e.Throttles)
	if err != nil {
		return throttleErr(fmt.Errorf("set throttles: %w", err))
	}
	if fresh {
		t.h.cfg.Metrics.ThrottlesSet(t.c.Name, len(e.Throttles)-len(kept))
	}
	if keepThrottles(r, kept, "before we set it") {
		if err := r.Op.Save(ctx); err != nil {
			return err
		}
	}
	if fresh && settle > 0 {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(settle):
		}
	}
	r.Step(operation.StepThrottled)
	return nil
}

// restore puts back the throttles the operation set, where they still hold our value
// (when names the time a change by someone else happened, for the note). Keys of a topic
// that no longer exists went with it: nothing to put back.
func (t throttles) restore(ctx context.Context, r *operation.Run, when string) error {
	e := r.Entry()
	if len(e.Throttles) == 0 {
		return nil
	}
	th, err := t.throttler(ctx, r)
	if err != nil {
		return err
	}
	kept, err := th.RestoreThrottles(ctx, e.Throttles)
	if err != nil {
		return throttleErr(fmt.Errorf("restore throttles: %w", err))
	}
	t.h.cfg.Metrics.ThrottlesRestored(t.c.Name, len(e.Throttles)-len(kept), len(kept))
	keepThrottles(r, kept, when)
	e.Throttles = nil
	return r.Op.Save(ctx)
}

// throttler is how the cluster's throttles are read and written, chosen for each step from
// what the cluster has now (kafka.ChooseConfigs): its config znodes when the worker has the
// cluster's ZooKeeper and /controller names no KRaft controller (the writes fenced by the
// lease), else IncrementalAlterConfigs.
func (t throttles) throttler(ctx context.Context, r *operation.Run) (kafka.Throttler, error) {
	c := t.c
	caps, err := t.h.capabilities(ctx, c)
	if err != nil {
		return kafka.Throttler{}, err
	}
	zk, err := zkConfigs(ctx, c)
	if err != nil {
		return kafka.Throttler{}, err
	}
	mech, err := kafka.ChooseConfigs(caps, zk)
	if err != nil {
		return kafka.Throttler{}, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	th := kafka.Throttler{Client: c.Client, Mechanism: mech}
	if mech == kafka.ConfigZnodes {
		w, err := zkWriter(r, c)
		if err != nil {
			return kafka.Throttler{}, err
		}
		th.ZK, th.Chroot, th.Writer = c.ZK.Conn(), c.Chroot, w
	}
	return th, nil
}

// zkConfigs reports whether the cluster's throttles can go through its config znodes: the
// worker has its ZooKeeper, and no KRaft controller owns it (a migration: it would ignore
// them, and the brokers take their configs from it).
func zkConfigs(ctx context.Context, c *Cluster) (bool, error) {
	if c.ZK == nil {
		return false, nil
	}
	ctrl, err := kafka.WaitController(ctx, c.ZK.Conn(), c.Chroot)
	if err != nil {
		return false, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	return !ctrl.KRaft(), nil
}

// throttleable rejects a change that asks for a throttle the cluster cannot have set and
// put back safely (kafka.ChooseConfigs).
func throttleable(c *Cluster, caps kafka.Capabilities, rate int64) error {
	if rate <= 0 {
		return nil
	}
	if _, err := kafka.ChooseConfigs(caps, c.ZK != nil); err != nil {
		return operation.Reject("cluster %s: %v", c.Name, err)
	}
	return nil
}

// throttleErr marks a throttle failure transient, unless no retry can help: a broker that
// hides a value, a KRaft controller, a mechanism the cluster lacks.
func throttleErr(err error) error {
	if errors.Is(err, kafka.ErrHiddenConfig) || errors.Is(err, kafka.ErrKRaftController) || errors.Is(err, kafka.ErrUnsupported) {
		return err
	}
	return transient(err)
}

// keepThrottles records throttle keys found holding someone else's value (left alone) and
// reports whether there were any.
func keepThrottles(r *operation.Run, kept []kafka.KeptThrottle, when string) bool {
	e := r.Entry()
	for _, k := range kept {
		if slices.ContainsFunc(e.ThrottlesKept, func(o kafka.KeptThrottle) bool {
			return o.Entity == k.Entity && o.Name == k.Name && o.Key == k.Key
		}) {
			continue
		}
		e.ThrottlesKept = append(e.ThrottlesKept, k)
		cur := "unset"
		if k.Current != nil {
			cur = strconv.Quote(*k.Current)
		}
		r.Op.Note(fmt.Sprintf("Throttle %s of %s %s was changed by someone else %s (now %s, ours %q): left as they set it.", k.Key, k.Entity, k.Name, when, cur, k.Ours))
	}
	return len(kept) > 0
}
