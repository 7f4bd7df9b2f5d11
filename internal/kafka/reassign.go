package kafka

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SubmitReassignment starts reassignments to the target replica lists (one
// AlterPartitionReassignments request) and returns without waiting for them.
func SubmitReassignment(ctx context.Context, cl *kgo.Client, targets map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	req := kadm.AlterPartitionAssignmentsReq{}
	for tp, rs := range targets {
		req.Assign(tp.Topic, tp.Partition, rs)
	}
	resp, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("alter partition reassignments: %w", err)
	}
	var errs []error
	resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err == nil {
			return
		}
		e := fmt.Errorf("reassign %s-%d: %w", r.Topic, r.Partition, errWithMessage(r.Err, &r.ErrMessage))
		if errors.Is(r.Err, kerr.ReassignmentInProgress) {
			e = fmt.Errorf("reassign %s-%d: %w: %w", r.Topic, r.Partition, ErrReassignmentInProgress, r.Err)
		}
		errs = append(errs, e)
	})
	return errors.Join(errs...)
}

// SubmitZKReassignment starts reassignments the legacy way: it creates
// /admin/reassign_partitions (only when none exists: one reassignment at a time) in a
// transaction fenced by the caller's lock, unless a KRaft controller owns the cluster
// (ErrKRaftController). The controller deletes each partition from the znode when its
// reassignment completes, and the znode when every one has. Never through
// /brokers/topics: a controller started from an edited topic znode does not start or stop
// replicas. The znode gets the ACL of /admin, as Kafka would give it (see kafkaTreeACL).
func SubmitZKReassignment(ctx context.Context, conn *zk.Conn, chroot string, w FencedWriter, targets map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	data, err := EncodeReassignZnode(targets)
	if err != nil {
		return err
	}
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
