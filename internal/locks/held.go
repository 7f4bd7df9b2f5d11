package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Held is a lock taken by Acquire, valid until it is released or lost. Its Context is
// cancelled, and Lost closed, at the first of: Release; the end of its ZooKeeper session
// (expired, closed, or cut off longer than SessionConfig.LossAfterDisconnect); the
// deletion of its claim node; a fenced write that found the claim gone. context.Cause
// tells which (ErrReleased or ErrLost). A Held is never valid again after that: acquire a
// new one.
type Held struct {
	l       *Locker
	g       *Generation
	cluster string
	c       *claim
	node    string
	version int32
	info    Holder
	logger  *zap.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc

	releaseOnce sync.Once
	loseOnce    sync.Once
}

func newHeld(l *Locker, g *Generation, cluster string, c *claim, node string, version int32, info Holder, parent context.Context) *Held {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	h := &Held{
		l: l, g: g, cluster: cluster, c: c, node: node, version: version, info: info,
		logger: l.logger.With(zap.String("cluster", cluster), zap.String("event", info.Event),
			zap.String("node", node), zap.String("session", g.String())),
		ctx: ctx, cancel: cancel,
	}
	go h.watch()
	return h
}

// Cluster is the cluster whose lock this is.
func (h *Held) Cluster() string { return h.cluster }

// Node is the path of the claim node.
func (h *Held) Node() string { return h.node }

// Info is what the claim node says: worker, event, when the lock was taken.
func (h *Held) Info() Holder { return h.info }

// SessionID is the id of the ZooKeeper session the claim lives in.
func (h *Held) SessionID() int64 { return h.g.ID() }

// Context is cancelled when the lock is released or lost; context.Cause wraps ErrReleased
// or ErrLost. It carries the values of the context given to Acquire, not its deadline.
func (h *Held) Context() context.Context { return h.ctx }

// Lost is closed when the lock is no longer held: lost, or released.
func (h *Held) Lost() <-chan struct{} { return h.ctx.Done() }

// Err is nil while the lock is held, then why it is not (wrapping ErrLost or ErrReleased).
func (h *Held) Err() error {
	if h.ctx.Err() == nil {
		return nil
	}
	return mark(context.Cause(h.ctx))
}

// Fence returns the check to put first in a zk Multi so that the Multi applies only while
// this claim exists, unchanged, in ZooKeeper: when the session has expired, the claim node
// is gone and the Multi fails with zk.ErrNoNode as a whole. The check is done by the
// server, so it holds even before this process learns of the loss. Multi does this for you.
func (h *Held) Fence() *zk.CheckVersionRequest {
	return &zk.CheckVersionRequest{Path: h.node, Version: h.version}
}

// Multi runs ops (*zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest,
// *zk.CheckVersionRequest) as one ZooKeeper transaction fenced by the lock: all or none
// apply, and none unless the claim still exists. It returns the responses of ops (without
// the fence's). It fails at once, wrapping ErrLost or ErrReleased, when the lock is known
// to be gone; when the fence fails, it marks the lock lost and returns an error wrapping
// ErrLost. A Multi given up on (ctx) may still apply, but only while the claim exists, and
// before a Release of this Held completes (ZooKeeper runs a session's requests in order).
func (h *Held) Multi(ctx context.Context, ops ...any) (_ []zk.MultiResponse, err error) {
	defer func() { err = mark(err) }()
	if err := h.Err(); err != nil {
		return nil, fmt.Errorf("fenced write under lock of cluster %s: %w", h.cluster, err)
	}
	all := append([]any{h.Fence()}, ops...)
	res, err := call(ctx, h.g, func() ([]zk.MultiResponse, error) {
		return h.l.conn.Multi(all...)
	})
	if errors.Is(err, ErrLost) {
		h.lose(err)
		return nil, fmt.Errorf("fenced write under lock of cluster %s: %w", h.cluster, err)
	}
	if err == nil {
		return res[1:], nil
	}
	if h.fenceFailed(ctx, res, err) {
		cause := fmt.Errorf("%w: fence failed: claim node %s is gone or changed: %w", ErrLost, h.node, err)
		h.lose(cause)
		return nil, fmt.Errorf("fenced write under lock of cluster %s: %w", h.cluster, cause)
	}
	if len(res) > 0 {
		res = res[1:]
	}
	return res, fmt.Errorf("fenced write under lock of cluster %s: %w", h.cluster, err)
}

// fenceFailed tells whether a failed Multi failed because of its fence.
func (h *Held) fenceFailed(ctx context.Context, res []zk.MultiResponse, err error) bool {
	if len(res) > 0 {
		return res[0].Error != nil
	}
	if !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
		return false
	}
	// No per-op results: look at the claim node itself.
	stat, serr := call(ctx, h.g, func() (*zk.Stat, error) {
		ok, st, err := h.l.conn.Exists(h.node)
		if err == nil && !ok {
			return nil, zk.ErrNoNode
		}
		return st, err
	})
	return errors.Is(serr, zk.ErrNoNode) || errors.Is(serr, ErrLost) || (serr == nil && stat.Version != h.version)
}

// Release gives the lock up: it cancels Context and deletes the claim node, waiting for
// the deletion as long as ctx allows (after that the deletion goes on in the background).
// It may be called any number of times, also after the lock was lost, and returns nil
// once the claim node is gone (or its session is over, which removes it).
func (h *Held) Release(ctx context.Context) (err error) {
	defer func() { err = mark(err) }()
	h.cancel(fmt.Errorf("lock of cluster %s: %w", h.cluster, ErrReleased))
	removed := h.l.remove(h.c)
	h.releaseOnce.Do(func() {
		go func() {
			<-removed
			switch {
			case h.c.removeErr != nil:
			case errors.Is(h.Err(), ErrLost):
				h.logger.Info("claim of the lost lock removed")
			default:
				h.logger.Info("lock released", zap.Duration("held", time.Since(h.info.Since())))
			}
		}()
	})
	select {
	case <-removed:
		if err := h.c.removeErr; err != nil {
			return fmt.Errorf("release lock of cluster %s: %w", h.cluster, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("release lock of cluster %s: claim %s not removed yet: %w", h.cluster, h.node, context.Cause(ctx))
	}
}

// lose marks the lock lost, unless it is already released or lost, and deletes the claim
// node in the background: when the session lives on (a long disconnection), the node
// would otherwise keep others out until Release.
func (h *Held) lose(cause error) {
	h.loseOnce.Do(func() {
		h.cancel(fmt.Errorf("lock of cluster %s: %w", h.cluster, cause))
		if !errors.Is(context.Cause(h.ctx), ErrLost) {
			return // released before
		}
		h.logger.Warn("lock lost: stop before the next write", zap.Error(cause))
		h.l.remove(h.c)
	})
}

// watch marks the lock lost when its session ends or its claim node is deleted, until the
// lock is released.
func (h *Held) watch() {
	bo := newBackoff()
	for {
		ch, err := call(h.ctx, h.g, func() (<-chan zk.Event, error) {
			_, _, ch, err := h.l.conn.GetW(h.node)
			return ch, err
		})
		switch {
		case h.ctx.Err() != nil:
			return
		case errors.Is(err, ErrLost):
			h.lose(err)
			return
		case errors.Is(err, zk.ErrNoNode):
			h.lose(fmt.Errorf("%w: claim node %s was deleted", ErrLost, h.node))
			return
		case err != nil:
			h.logger.Debug("cannot watch the claim node; trying again", zap.Error(err))
			if err := pause(h.ctx, h.g, bo.NextBackOff()); err != nil {
				if errors.Is(err, ErrLost) {
					h.lose(err)
				}
				return
			}
			continue
		}
		bo.Reset()
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNodeDeleted {
				h.lose(fmt.Errorf("%w: claim node %s was deleted", ErrLost, h.node))
				return
			}
			// Changed, or not watched any more (the session is ending): look again.
		case <-h.g.Expired():
			h.lose(lostSession(h.g))
			return
		case <-h.ctx.Done():
			return
		}
	}
}
