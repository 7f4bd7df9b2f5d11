package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	prior := b.cfg.Nudge.State()
	if prior != nil && prior.FailoverStarted {
		b.failover = true
		return b.finishNudge(ctx, orders, prior)
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
	st, err := b.writeNudge(ctx, prior, orders, topics)
	if err != nil {
		return err
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

// nudgeWrite is one topic znode to rewrite: its new data, against the version read.
type nudgeWrite struct {
	path    string
	data    []byte
	version int32
}

// planNudge decides, without I/O, what a zk-nudge attempt writes: the progress to journal
// and the topic znodes to rewrite, from what an earlier attempt of the event journaled
// (prior, nil: none) and the topic znodes as read now (topics, which it changes).
//
// A znode's Before, once journaled, is never replaced, whatever the znode holds now: an
// attempt that wrote the znode but failed to record that (the journal write after it
// failed) would otherwise read its own order back as the order before, and lose the one
// to put back. Whether a znode holds our write is decided by its content (it equals our
// After, compared as JSON), never by a recorded version. A znode holding neither its
// journaled Before nor our After was changed by someone else since it was journaled: the
// attempt refuses (permanently: a retry would find the same), since Before no longer
// describes it. Every znode prior journaled is kept in the result, so that a rollback
// still finds it.
func planNudge(prior *NudgeState, orders map[TopicPartition][]int32, topics map[string]*TopicZnode) (*NudgeState, []nudgeWrite, error) {
	st := &NudgeState{}
	journaled := map[string]NudgeZnode{}
	if prior != nil {
		st.ControllerEpoch = prior.ControllerEpoch
		for _, z := range prior.Znodes {
			journaled[z.Path] = z
		}
	}
	var writes []nudgeWrite
	planned := map[string]NudgeZnode{}
	for _, t := range topicsOf(orders) {
		z := topics[t]
		current, err := z.Encode()
		if err != nil {
			return nil, nil, err
		}
		before := string(current)
		if j, ok := journaled[z.Path]; ok {
			if !jsonEqual(current, []byte(j.Before)) && !jsonEqual(current, []byte(j.After)) {
				return nil, nil, fmt.Errorf("%s changed since an earlier attempt journaled it (it holds neither the data before nor our order): refusing to rewrite it", z.Path)
			}
			before = j.Before
		}
		for _, tp := range sortedKeys(orders) {
			if tp.Topic == t {
				z.SetReplicas(tp.Partition, orders[tp])
			}
		}
		after, err := z.Encode()
		if err != nil {
			return nil, nil, err
		}
		n := NudgeZnode{Path: z.Path, Before: before, After: string(after)}
		if jsonEqual(current, after) {
			n.Version = z.Stat.Version // holds it already: its version now is that of our data
		} else {
			writes = append(writes, nudgeWrite{path: z.Path, data: after, version: z.Stat.Version})
		}
		planned[z.Path] = n
	}
	// Journaled order first, then the new ones in topic order.
	if prior != nil {
		for _, z := range prior.Znodes {
			if n, ok := planned[z.Path]; ok {
				z = n
				delete(planned, z.Path)
			}
			st.Znodes = append(st.Znodes, z)
		}
	}
	for _, t := range topicsOf(orders) {
		if n, ok := planned[topics[t].Path]; ok {
			st.Znodes = append(st.Znodes, n)
		}
	}
	return st, writes, nil
}

// writeNudge plans (planNudge), records, then writes the topic znodes with the new orders:
// one version-checked transaction for every topic that does not hold its order yet, fenced
// by the lock; then it records the versions our write gave them.
func (b *ZKBackend) writeNudge(ctx context.Context, prior *NudgeState, orders map[TopicPartition][]int32, topics map[string]*TopicZnode) (*NudgeState, error) {
	st, writes, err := planNudge(prior, orders, topics)
	if err != nil {
		return nil, err
	}
	if len(writes) == 0 {
		return st, nil // an earlier attempt wrote them all: its record of the write may have failed
	}
	if err := b.cfg.Nudge.Record(ctx, st); err != nil {
		return nil, err
	}
	ops := make([]any, len(writes))
	for i, w := range writes {
		ops[i] = &zk.SetDataRequest{Path: w.path, Data: w.data, Version: w.version}
	}
	resp, err := b.cfg.Writer.Multi(ctx, ops...)
	if err != nil {
		if errors.Is(err, zk.ErrBadVersion) {
			return nil, fmt.Errorf("a topic znode changed while we rewrote it (retry): %w", retry.Transient(err))
		}
		return nil, fmt.Errorf("rewrite topic znodes: %w", err)
	}
	for i, w := range writes {
		if i >= len(resp) || resp[i].Stat == nil {
			continue
		}
		for j := range st.Znodes {
			if st.Znodes[j].Path == w.path {
				st.Znodes[j].Version = resp[i].Stat.Version
			}
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
			if !slices.ContainsFunc(topicsOf(orders), func(t string) bool { return topicPath(b.cfg.Chroot, t) == z.Path }) {
				continue // journaled by an earlier attempt for a topic this one does not reorder
			}
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
	done, err := b.RestoreNudgeZnodes(ctx, st)
	if err != nil {
		return fmt.Errorf("%w (%v); putting the topic znodes back failed (%s so far): %v", ErrNudgeNotApplied, why, done, err)
	}
	return &nudgeError{fmt.Sprintf("%v (%v); %s", ErrNudgeNotApplied, why, done)}
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

// NudgeRestore says what RestoreNudgeZnodes did with each topic znode of a zk-nudge
// reorder (paths).
type NudgeRestore struct {
	// PutBack held our order: written back to their data before.
	PutBack []string
	// Kept were changed by someone else since our write (or deleted): left as they are.
	Kept []string
	// Unchanged held their data before already (never written by us, or put back before):
	// nothing to write.
	Unchanged []string
}

// String says what was done, truly: "put back" only for znodes a write put back.
func (r NudgeRestore) String() string {
	var parts []string
	if len(r.PutBack) > 0 {
		parts = append(parts, fmt.Sprintf("topic znodes put back: %s", strings.Join(r.PutBack, ", ")))
	}
	if len(r.Kept) > 0 {
		parts = append(parts, fmt.Sprintf("left %s: changed by someone else since our write", strings.Join(r.Kept, ", ")))
	}
	if len(r.Unchanged) > 0 {
		parts = append(parts, fmt.Sprintf("%s already held the data before: nothing to put back", strings.Join(r.Unchanged, ", ")))
	}
	if len(parts) == 0 {
		return "no topic znode to put back"
	}
	return strings.Join(parts, "; ")
}

// nudgeRestoreAction is what to do with a topic znode when putting a zk-nudge back.
type nudgeRestoreAction int

const (
	nudgeUnchanged nudgeRestoreAction = iota // holds its data before: nothing to do
	nudgePutBack                             // holds our order: write its data before
	nudgeKept                                // holds something else: someone else's, leave it
)

// restoreAction decides, by content (compared as JSON), what to do with znode z that holds
// current now.
func restoreAction(z NudgeZnode, current []byte) nudgeRestoreAction {
	switch {
	case jsonEqual(current, []byte(z.Before)):
		return nudgeUnchanged
	case jsonEqual(current, []byte(z.After)):
		return nudgePutBack
	}
	return nudgeKept
}

// RestoreNudgeZnodes puts back the topic znodes of st that hold our order (their content
// equals our After, whatever version st recorded, even none: the record after our write
// may have failed): each with a fenced write checked against the version just read, so
// that a change by someone else in between is not overwritten. A znode changed by someone
// else since our write is left as it is. Then it records st as restored. The result says
// which znodes were put back, left and unchanged (so far, when it fails).
func (b *ZKBackend) RestoreNudgeZnodes(ctx context.Context, st *NudgeState) (done NudgeRestore, err error) {
	defer func() { err = classify(err) }()
	for _, z := range st.Znodes {
		data, stat, err := b.cfg.Conn.Get(z.Path)
		if errors.Is(err, zk.ErrNoNode) {
			done.Kept = append(done.Kept, z.Path) // the topic was deleted
			continue
		}
		if err != nil {
			return done, fmt.Errorf("read %s: %w", z.Path, err)
		}
		switch restoreAction(z, data) {
		case nudgeUnchanged:
			done.Unchanged = append(done.Unchanged, z.Path)
			continue
		case nudgeKept:
			done.Kept = append(done.Kept, z.Path)
			continue
		}
		_, err = b.cfg.Writer.Multi(ctx, &zk.SetDataRequest{Path: z.Path, Data: []byte(z.Before), Version: stat.Version})
		switch {
		case err == nil:
			done.PutBack = append(done.PutBack, z.Path)
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			done.Kept = append(done.Kept, z.Path) // changed (or deleted) since we read it
		default:
			return done, fmt.Errorf("put back %s: %w", z.Path, err)
		}
	}
	st.Restored = true
	return done, b.cfg.Nudge.Record(ctx, st)
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
