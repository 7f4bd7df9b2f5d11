package kafka

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// SubmitReassignment starts reassignments to the target replica lists and returns without
// waiting for them: AlterPartitionReassignments in requests of at most
// DefaultBatchPartitions partitions (Limits.SubmitReassignment for others).
func SubmitReassignment(ctx context.Context, cl *kgo.Client, targets map[TopicPartition][]int32) error {
	return Limits{}.SubmitReassignment(ctx, cl, targets)
}

// SubmitReassignment starts reassignments to the target replica lists, in requests of at
// most l.Partitions partitions, in (topic, partition) order, and returns without waiting
// for them. The per-partition errors of every request are joined into the one error
// (REASSIGNMENT_IN_PROGRESS as ErrReassignmentInProgress); a request that fails as a whole
// stops the rest, and its error is joined to those (the requests before it were sent).
func (l Limits) SubmitReassignment(ctx context.Context, cl *kgo.Client, targets map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	perPartition, err := alterReassignments(ctx, cl, targets, l.withDefaults().Partitions)
	errs := make([]error, 0, len(perPartition)+1)
	for _, tp := range sortedKeys(perPartition) {
		e := perPartition[tp]
		if errors.Is(e, kerr.ReassignmentInProgress) {
			e = fmt.Errorf("%w: %w", ErrReassignmentInProgress, e)
		}
		errs = append(errs, fmt.Errorf("reassign %s: %w", tp, e))
	}
	return errors.Join(append(errs, err)...)
}

// CancelReassignments cancels the reassignments of tps (KIP-455, Kafka 2.4+: each replica
// set goes back to what it was before), in requests of at most DefaultBatchPartitions
// partitions (Limits.CancelReassignments for others).
func CancelReassignments(ctx context.Context, cl *kgo.Client, tps []TopicPartition) error {
	return Limits{}.CancelReassignments(ctx, cl, tps)
}

// CancelReassignments cancels the reassignments of tps, in requests of at most
// l.Partitions partitions. A partition with no reassignment running
// (NO_REASSIGNMENT_IN_PROGRESS) is not an error; the other per-partition errors of every
// request are joined into the one error. A request that fails as a whole stops the rest
// and is transient (worth a retry: the partitions cancelled already answer
// NO_REASSIGNMENT_IN_PROGRESS then).
func (l Limits) CancelReassignments(ctx context.Context, cl *kgo.Client, tps []TopicPartition) (err error) {
	defer func() { err = classify(err) }()
	cancels := make(map[TopicPartition][]int32, len(tps))
	for _, tp := range tps {
		cancels[tp] = nil
	}
	perPartition, err := alterReassignments(ctx, cl, cancels, l.withDefaults().Partitions)
	errs := make([]error, 0, len(perPartition)+1)
	for _, tp := range sortedKeys(perPartition) {
		if e := perPartition[tp]; !errors.Is(e, kerr.NoReassignmentInProgress) {
			errs = append(errs, fmt.Errorf("cancel the reassignment of %s: %w", tp, e))
		}
	}
	if err != nil && !retry.Marked(err) {
		err = retry.Transient(err)
	}
	return errors.Join(append(errs, err)...)
}

// alterReassignments sends AlterPartitionReassignments for targets (a nil list cancels)
// in requests of at most n partitions, in (topic, partition) order. It returns the error
// of each partition that failed, and the error of the first request that failed as a
// whole, after which it sends no more.
func alterReassignments(ctx context.Context, cl *kgo.Client, targets map[TopicPartition][]int32, n int) (map[TopicPartition]error, error) {
	failed := map[TopicPartition]error{}
	batches := chunks(sortedKeys(targets), n)
	adm := controllerAdmin(cl)
	for i, batch := range batches {
		req := kadm.AlterPartitionAssignmentsReq{}
		for _, tp := range batch {
			req.Assign(tp.Topic, tp.Partition, targets[tp])
		}
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			if len(batches) > 1 {
				return failed, fmt.Errorf("alter partition reassignments (request %d of %d, %d partitions each at most): %w", i+1, len(batches), n, err)
			}
			return failed, fmt.Errorf("alter partition reassignments: %w", err)
		}
		for _, tp := range batch {
			r, ok := resp[tp.Topic][tp.Partition]
			switch {
			case !ok:
				failed[tp] = errors.New("no result in the response")
			case r.Err != nil:
				failed[tp] = errWithMessage(r.Err, &r.ErrMessage)
			}
		}
	}
	return failed, nil
}

// controllerTimeout is how long the controller may take over a reassignment or an
// election request before it answers. kadm's default (15 s, and franz-go reads the answer
// for 10 s more) is less than a ZooKeeper-mode controller takes over 1,000 partitions of a
// cluster with many topics: the request timed out at the client while the controller went
// on, and was sent again, doubling the time.
const controllerTimeout = time.Minute

// controllerAdmin is an admin client whose requests to the controller wait
// controllerTimeout.
func controllerAdmin(cl *kgo.Client) *kadm.Client {
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(controllerTimeout.Milliseconds()))
	return adm
}

// SubmitZKReassignment starts reassignments the legacy way, through
// /admin/reassign_partitions, in znodes of at most DefaultBatchPartitions partitions and
// DefaultZnodeBytes bytes (Limits.SubmitZKReassignment for others).
func SubmitZKReassignment(ctx context.Context, conn *zk.Conn, chroot string, w FencedWriter, targets map[TopicPartition][]int32) error {
	return Limits{}.SubmitZKReassignment(ctx, conn, chroot, w, targets)
}

// SubmitZKReassignment starts reassignments the legacy way: it creates
// /admin/reassign_partitions (only when none exists: one reassignment at a time) in a
// transaction fenced by the caller's lock, unless a KRaft controller owns the cluster
// (ErrKRaftController). The controller deletes each partition from the znode when its
// reassignment completes, and the znode when every one has. Never through
// /brokers/topics: a controller started from an edited topic znode does not start or stop
// replicas. The znode gets the ACL of /admin, as Kafka would give it (see kafkaTreeACL).
//
// Targets too many for one znode (l.Partitions entries, l.ZnodeBytes bytes) go in several,
// one after the other (see writeReassignZnodes): each but the first is written once the
// controller has deleted the one before, that is once all of its reassignments completed,
// so then this waits for those copies (bounded by ctx). It returns once the last is
// written and the controller has surely read it. A znode found at the first write is
// ErrReassignmentInProgress at once, as is one of someone else's found between two of ours
// (the ones before it were written).
func (l Limits) SubmitZKReassignment(ctx context.Context, conn *zk.Conn, chroot string, w FencedWriter, targets map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	create := func(ctx context.Context, data []byte) error { return createReassignZnode(ctx, conn, chroot, w, data) }
	return writeReassignZnodes(ctx, conn, chroot, targets, l, create, false)
}

// reassignZnodeSettle is how long a reassignment znode written right after the controller
// deleted one of ours is watched before it counts as read (see writeReassignZnodes).
const reassignZnodeSettle = 3 * time.Second

// reassignZnodeAttempts bounds how often the partitions of one znode are written.
const reassignZnodeAttempts = 3

// writeReassignZnodes writes targets to /admin/reassign_partitions in znodes of at most l
// (create writes one, fenced), each once the controller has deleted the one before, and
// checks that each was carried out: a controller before 2.4 deletes the znode a second
// time at the end of an event in which the last of its reassignments completed at once (a
// reorder, a shrink of in-sync replicas: maybeTriggerPartitionReassignment ends with
// removePartitionsFromReassignedPartitions of no partition, which deletes the znode when
// none is left), and so deletes a znode written a few milliseconds after the first
// deletion, unread. Seen on Kafka 2.3.1: the third of three reorder znodes written back to
// back was lost so, in two runs of three. So once a znode of ours is gone, every one of
// its partitions must show its target replicas in its topic znode (the controller writes
// them there before it removes the partition); those that do not are written again, up
// to reassignmentZnodeAttempts times in all.
//
// With waitLast, it returns once the controller has deleted the last znode too (a
// reorder: it completes at once). Without, it returns once the last is written; when it
// followed one of ours, only after watching it for reassignZnodeSettle: gone by then, it
// is checked as above, else the controller has read it (the second deletion comes within
// the same controller event as the first).
func writeReassignZnodes(ctx context.Context, conn *zk.Conn, chroot string, targets map[TopicPartition][]int32, l Limits,
	create func(ctx context.Context, data []byte) error, waitLast bool) error {
	entries, err := reassignEntries(targets)
	if err != nil {
		return err
	}
	batches, err := splitAdminZnode(entries, l)
	if err != nil {
		return fmt.Errorf("/admin/reassign_partitions: %w", err)
	}
	p := ReassignPath(chroot)
	type queued struct {
		znodeBatch
		attempt int
	}
	var queue []queued
	for _, b := range batches {
		queue = append(queue, queued{b, 1})
	}
	for i := 0; i < len(queue); i++ {
		b := queue[i]
		which := ""
		if len(queue) > 1 || b.attempt > 1 {
			which = fmt.Sprintf(" (znode %d of %d, %d partitions, attempt %d)", i+1, len(queue), len(b.tps), b.attempt)
		}
		if err := create(ctx, b.data); err != nil {
			return fmt.Errorf("%w%s", err, which)
		}
		if i == len(queue)-1 && !waitLast {
			if i == 0 {
				return nil
			}
			if gone, err := absentWithin(ctx, conn, p, reassignZnodeSettle); err != nil || !gone {
				return err
			}
		} else if err := waitAbsent(ctx, conn, p); err != nil {
			return fmt.Errorf("wait for the controller to carry out %s%s: %w", p, which, err)
		}
		missing, err := notCarriedOut(conn, chroot, targets, b.tps)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			continue
		}
		if b.attempt == reassignZnodeAttempts {
			return fmt.Errorf("the controller deleted %s%s without carrying out %d of its reassignments (%s first) %d times",
				p, which, len(missing), missing[0], reassignZnodeAttempts)
		}
		again := map[TopicPartition][]int32{}
		for _, tp := range missing {
			again[tp] = targets[tp]
		}
		entries, err := reassignEntries(again)
		if err != nil {
			return err
		}
		rebatched, err := splitAdminZnode(entries, l)
		if err != nil {
			return err
		}
		for _, r := range rebatched {
			queue = append(queue, queued{r, b.attempt + 1})
		}
	}
	return nil
}

// notCarriedOut returns the partitions of tps whose topic znode does not list their target
// replicas (in order), in (topic, partition) order.
func notCarriedOut(conn *zk.Conn, chroot string, targets map[TopicPartition][]int32, tps []TopicPartition) ([]TopicPartition, error) {
	topics := map[string]*TopicZnode{}
	var out []TopicPartition
	for _, tp := range tps {
		z, ok := topics[tp.Topic]
		if !ok {
			var err error
			if z, err = ReadTopicZnode(conn, chroot, tp.Topic); err != nil {
				return nil, err
			}
			topics[tp.Topic] = z
		}
		if r, err := z.Replicas(tp.Partition); err != nil || !slices.Equal(r, targets[tp]) {
			out = append(out, tp)
		}
	}
	return out, nil
}

// absentWithin reports whether the znode at p is gone within d (false when it still
// exists then).
func absentWithin(ctx context.Context, conn *zk.Conn, p string, d time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := waitAbsent(wctx, conn, p)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, err
	case wctx.Err() != nil:
		return false, nil
	}
	return false, err
}

// createReassignZnode creates /admin/reassign_partitions under chroot with data, fenced,
// unless it exists or a KRaft controller owns the cluster.
func createReassignZnode(ctx context.Context, conn *zk.Conn, chroot string, w FencedWriter, data []byte) error {
	p := ReassignPath(chroot)
	if err := CheckZKController(ctx, conn, chroot); err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if ok, _, err := conn.Exists(p); err != nil {
		return fmt.Errorf("exists %s: %w", p, err)
	} else if ok {
		owner, _, _ := conn.Get(p)
		return fmt.Errorf("%s exists (%s): %w", p, truncate(owner, 300), ErrReassignmentInProgress)
	}
	acl, err := kafkaTreeACL(conn, path.Dir(p))
	if err != nil {
		return err
	}
	if _, err := w.Multi(ctx, &zk.CreateRequest{Path: p, Data: data, Acl: acl}); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("%s was created meanwhile: %w", p, ErrReassignmentInProgress)
		}
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}
