package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// NudgeState and NudgeZnode are kept in the operation journal (package model: plain data).
type (
	NudgeState = model.NudgeState
	NudgeZnode = model.NudgeZnode
)

// NudgeJournal keeps a zk-nudge reorder's progress durably: State is what an earlier
// attempt of the same event recorded (nil: none), Record is called before each write it
// describes and must fail when the caller has lost its lock.
type NudgeJournal interface {
	State() *NudgeState
	Record(ctx context.Context, st *NudgeState) error
}

// ErrNudgeNotApplied: after the one controller failover allowed per event, the controller
// did not show the new order; the topic znodes were put back (where still ours). Permanent.
var ErrNudgeNotApplied = errors.New("the new controller did not apply the order written to the topic znode")

// memNudge keeps zk-nudge progress in memory: enough for one backend, not for a crash.
type memNudge struct{ st *NudgeState }

func (m *memNudge) State() *NudgeState { return m.st }

func (m *memNudge) Record(_ context.Context, st *NudgeState) error {
	m.st = st
	return nil
}

// reorderByNudge rewrites the topic znodes with the new orders and fails the controller
// over, so that the new controller loads them; at most once per event: the progress is
// recorded (cfg.Nudge) before each write, and an event whose failover already happened
// only checks whether the order was applied, putting the znodes back if not.
func (b *ZKBackend) reorderByNudge(ctx context.Context, orders map[TopicPartition][]int32, topics map[string]*TopicZnode) error {
	st := b.cfg.Nudge.State()
	if st != nil && st.FailoverStarted {
		b.failover = true
		return b.finishNudge(ctx, orders, st)
	}
	ctrl, err := ReadController(b.cfg.Conn, b.cfg.Chroot)
	if err != nil {
		return err
	}
	if ctrl.KRaft() {
		return ErrKRaftController
	}
	// A controller that is reassigning rewrites topic znodes from memory and would undo ours.
	if ok, _, err := b.cfg.Conn.Exists(b.reassignPath()); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s exists: %w", b.reassignPath(), ErrReassignmentInProgress)
	}
	if b.cfg.Caps.ListReassignments {
		ongoing, err := ListReassignments(ctx, b.cfg.Client, topicsOf(orders))
		if err != nil {
			return err
		}
		if len(ongoing) > 0 {
			return fmt.Errorf("%d partitions of these topics are being reassigned: %w", len(ongoing), ErrReassignmentInProgress)
		}
	}
	epoch, err := readControllerEpoch(b.cfg.Conn, b.cfg.Chroot)
	if err != nil {
		return err
	}
	if st == nil || !nudgeWritten(st, topics) {
		if st, err = b.writeNudge(ctx, orders, topics, epoch); err != nil {
			return err
		}
	}
	// The controller ignores order changes of existing partitions until it fails over.
	st.ControllerEpoch = epoch
	st.FailoverStarted = true
	if err := b.cfg.Nudge.Record(ctx, st); err != nil {
		return err
	}
	b.failover = true
	_, err = b.cfg.Writer.Multi(ctx, &zk.DeleteRequest{Path: b.p("controller"), Version: ctrl.Stat.Version})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		// The controller moved by itself since we read it: that failover loads our znodes
		// too if it happened after our write; finishNudge waits for an epoch above ours.
	case err != nil:
		return fmt.Errorf("delete %s: %w", b.p("controller"), err)
	}
	return b.finishNudge(ctx, orders, st)
}

// nudgeWritten reports whether the topic znodes hold what st says we wrote.
func nudgeWritten(st *NudgeState, topics map[string]*TopicZnode) bool {
	for _, z := range st.Znodes {
		found := false
		for _, t := range topics {
			if t.Path == z.Path {
				found = true
				data, err := t.Encode()
				if err != nil || z.Version == 0 || t.Stat.Version != z.Version || !jsonEqual(data, []byte(z.After)) {
					return false
				}
			}
		}
		if !found {
			return false
		}
	}
	return len(st.Znodes) > 0
}

// writeNudge records, then writes, the topic znodes with the new orders: one version-checked
// transaction for every topic, fenced by the lock.
func (b *ZKBackend) writeNudge(ctx context.Context, orders map[TopicPartition][]int32, topics map[string]*TopicZnode, epoch int64) (*NudgeState, error) {
	st := &NudgeState{ControllerEpoch: epoch}
	var ops []any
	for _, t := range topicsOf(orders) {
		z := topics[t]
		before, err := z.Encode()
		if err != nil {
			return nil, err
		}
		for _, tp := range sortedKeys(orders) {
			if tp.Topic == t {
				z.SetReplicas(tp.Partition, orders[tp])
			}
		}
		after, err := z.Encode()
		if err != nil {
			return nil, err
		}
		st.Znodes = append(st.Znodes, NudgeZnode{Path: z.Path, Before: string(before), After: string(after)})
		ops = append(ops, &zk.SetDataRequest{Path: z.Path, Data: after, Version: z.Stat.Version})
	}
	if err := b.cfg.Nudge.Record(ctx, st); err != nil {
		return nil, err
	}
	resp, err := b.cfg.Writer.Multi(ctx, ops...)
	if err != nil {
		if errors.Is(err, zk.ErrBadVersion) {
			return nil, fmt.Errorf("a topic znode changed while we rewrote it (retry): %w", retry.Transient(err))
		}
		return nil, fmt.Errorf("rewrite topic znodes: %w", err)
	}
	for i := range st.Znodes {
		if i < len(resp) && resp[i].Stat != nil {
			st.Znodes[i].Version = resp[i].Stat.Version
		}
	}
	if err := b.cfg.Nudge.Record(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// finishNudge waits, after the one failover, for a new controller and for metadata to show
// the orders; when they do not come within NudgeApplyWait, it puts the topic znodes back
// (where still ours) and fails with ErrNudgeNotApplied.
func (b *ZKBackend) finishNudge(ctx context.Context, orders map[TopicPartition][]int32, st *NudgeState) error {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.NudgeApplyWait)
	defer cancel()
	why := b.waitNewController(wctx, st.ControllerEpoch)
	if why == nil {
		// The controller rewrites a topic znode from memory when it touches the topic:
		// before the failover, that would have lost our order.
		for _, z := range st.Znodes {
			data, _, err := b.cfg.Conn.Get(z.Path)
			if err != nil {
				why = fmt.Errorf("read %s: %w", z.Path, err)
				break
			}
			if !jsonEqual(data, []byte(z.After)) {
				why = fmt.Errorf("%s was rewritten before the failover (our order was lost)", z.Path)
				break
			}
		}
	}
	if why == nil {
		if why = WaitForOrders(wctx, b.cfg.Client, orders); why == nil {
			return nil
		}
	}
	if ctx.Err() != nil {
		// Interrupted from outside (shutdown, lost lock, attempt bound): the next attempt
		// of this event comes back here, without another failover.
		return fmt.Errorf("after the controller failover: %w", why)
	}
	// Metadata may show it only now; look once more before undoing anything.
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	err := WaitForOrders(lctx, b.cfg.Client, orders)
	lcancel()
	if err == nil {
		return nil
	}
	kept, err := b.RestoreNudge(ctx, st)
	if err != nil {
		return fmt.Errorf("%w (%v); putting the topic znodes back failed: %v", ErrNudgeNotApplied, why, err)
	}
	msg := fmt.Sprintf("%v (%v); topic znodes put back", ErrNudgeNotApplied, why)
	if len(kept) > 0 {
		msg += fmt.Sprintf(" except %v (changed since our write)", kept)
	}
	return &nudgeError{msg}
}

type nudgeError struct{ msg string }

func (e *nudgeError) Error() string { return e.msg }
func (e *nudgeError) Unwrap() error { return ErrNudgeNotApplied }

// waitNewController waits for a controller elected with an epoch above before.
func (b *ZKBackend) waitNewController(ctx context.Context, before int64) error {
	for {
		epoch, err := readControllerEpoch(b.cfg.Conn, b.cfg.Chroot)
		if err == nil && epoch > before {
			if ok, _, err := b.cfg.Conn.Exists(b.p("controller")); err == nil && ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no new controller (epoch above %d): %w", before, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RestoreNudge puts the topic znodes of st back to their data before, each only if it
// still has the version our write gave it (a fenced, version-checked write), and records
// it. It returns the znodes left because they changed since.
func (b *ZKBackend) RestoreNudge(ctx context.Context, st *NudgeState) (_ []string, err error) {
	defer func() { err = classify(err) }()
	var kept []string
	for _, z := range st.Znodes {
		if z.Version == 0 {
			continue // never written
		}
		_, err := b.cfg.Writer.Multi(ctx, &zk.SetDataRequest{Path: z.Path, Data: []byte(z.Before), Version: z.Version})
		switch {
		case err == nil:
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			kept = append(kept, z.Path)
		default:
			return kept, fmt.Errorf("put back %s: %w", z.Path, err)
		}
	}
	st.Restored = true
	return kept, b.cfg.Nudge.Record(ctx, st)
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	da, err := DecodeTopicZnode(a)
	if err != nil {
		return false
	}
	db, err := DecodeTopicZnode(b)
	if err != nil {
		return false
	}
	ea, _ := da.Encode()
	eb, _ := db.Encode()
	return string(ea) == string(eb)
}
