package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// RFOptions tunes replication-factor changes.
type RFOptions struct {
	// Throttle is the default replication throttle (bytes/s) when the event sets none;
	// 0: no throttle.
	Throttle int64
	// Timeout is the default bound of the whole change when the event sets none. Default 1h.
	Timeout time.Duration
	// MaxMovesPerBroker caps the partitions copying to one broker at a time. Default 4.
	MaxMovesPerBroker int
	// ForeignWait is how long to wait for reassignments started by someone else before
	// failing with their list. Default 1m.
	ForeignWait time.Duration
	// AllowInternal lets the factor of internal topics (__consumer_offsets, …) change.
	AllowInternal bool
	// Poll is the interval of progress checks. Default 2s.
	Poll time.Duration
}

func (o *RFOptions) defaults() {
	if o.Timeout == 0 {
		o.Timeout = time.Hour
	}
	if o.MaxMovesPerBroker == 0 {
		o.MaxMovesPerBroker = 4
	}
	if o.ForeignWait == 0 {
		o.ForeignWait = time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
}

// Progress is published on kafkamender.progress.<id> while replicas copy.
type Progress struct {
	ID              string `json:"id"`
	Batch           int    `json:"batch"`
	Batches         int    `json:"batches"`
	PartitionsDone  int    `json:"partitions_done"`
	PartitionsTotal int    `json:"partitions_total"`
	BytesCopied     int64  `json:"bytes_copied"`
	BytesExpected   int64  `json:"bytes_expected"`
}

// replicationFactor raises or lowers the topic's replication factor: append (only the new
// replicas copy data, leadership stays) or trim (out-of-sync first, never the leader),
// throttled, in batches, with progress, a timeout that cancels what is still running, and
// the throttles that were there before put back on every way out.
func (h *ReplicaChange) replicationFactor(ctx context.Context, job *pipeline.Job, c *Cluster, req *events.ReplicaChange,
	res *events.Result, caps kafka.Capabilities, strategy kafka.Strategy, log *zap.Logger) (*events.Result, error) {
	o := h.RF
	o.defaults()
	if strategy == kafka.StrategyZKNudge {
		return asResult(res, reject("strategy zk-nudge never changes a replica set (the controller would not start or stop replicas): use api or zk-reassign"))
	}
	if *req.ReplicationFactor < 1 {
		return asResult(res, reject("replication_factor %d: must be at least 1", *req.ReplicationFactor))
	}
	minISR, err := minInsyncReplicas(ctx, c, req.Topic)
	if err != nil {
		return asResult(res, err)
	}
	rfReq := plan.RFRequest{Topic: req.Topic, Partitions: req.Partitions, Factor: *req.ReplicationFactor, MinISR: minISR, AllowInternal: o.AllowInternal}
	planOnce := func(ctx context.Context) (*kafka.Snapshot, plan.Plan, error) {
		snap, err := kafka.ReadSnapshot(ctx, c.Client) // every topic: balance is cluster-wide
		if err != nil {
			return nil, plan.Plan{}, retry.Transient(err)
		}
		p, err := plan.ReplicationFactor(snap, rfReq)
		return snap, p, err
	}
	lctx, release, finished, err := begin(ctx, c, job, res, req.DryRun, planOnce, log)
	if finished {
		return res, err
	}
	defer release()
	timeout := o.Timeout
	if req.Timeout.Duration > 0 {
		timeout = req.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(lctx, timeout)
	defer cancel()

	if err := waitForeign(ctx, c, o.ForeignWait, log); err != nil {
		return res, err
	}
	snap, p, err := planUntilUnblocked(ctx, 0, planOnce, log)
	if err != nil {
		return asResult(res, err)
	}
	res.Noop = p.Noop
	res.Skipped = append(p.Skipped, blockedSkips(snap, p.Blocked, 0)...)
	if len(p.Changes) == 0 {
		return finish(res, 0), nil
	}

	rate := o.Throttle
	if req.ThrottleBytesPerSec > 0 {
		rate = req.ThrottleBytesPerSec
	}
	if rate > 0 {
		spec := kafka.ThrottleSpec{Topic: req.Topic, Rate: rate, Leaders: map[int32][]int32{}, Followers: map[int32][]int32{}}
		for _, ch := range p.Changes {
			if added := minus(ch.ReplicasAfter, ch.ReplicasBefore); len(added) > 0 {
				spec.Followers[ch.Partition] = added
				spec.Leaders[ch.Partition] = slices.Clone(ch.ReplicasBefore)
			}
		}
		if len(spec.Followers) > 0 {
			restore, err := kafka.Throttle(ctx, c.Client, spec)
			if err != nil {
				return res, fmt.Errorf("throttle: %w", err)
			}
			defer func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := restore(rctx); err != nil {
					log.Error("restore throttles", zap.Error(err))
					res.Error = strings.TrimPrefix(res.Error+"; "+err.Error(), "; ")
				}
			}()
		}
	}

	batches := batchMoves(p.Changes, o.MaxMovesPerBroker)
	adm := kadm.NewClient(c.Client)
	expected := expectedBytes(ctx, adm, req.Topic, p.Changes)
	done := 0
	for bi, batch := range batches {
		if err := submit(ctx, c, strategy, batch); err != nil {
			res.Changes = observe(context.WithoutCancel(ctx), c, p.Changes, 0, nil)
			return res, fmt.Errorf("submit batch %d of %d: %w", bi+1, len(batches), err)
		}
		for {
			pending, err := pendingMoves(ctx, c, batch)
			if err == nil && len(pending) == 0 {
				break
			}
			prog := Progress{ID: job.Event.ID, Batch: bi + 1, Batches: len(batches), PartitionsDone: done + len(batch) - len(pending),
				PartitionsTotal: len(p.Changes), BytesExpected: expected, BytesCopied: copiedBytes(ctx, adm, req.Topic, p.Changes)}
			job.Progress(prog)
			select {
			case <-ctx.Done():
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				cancelErr := cancelMoves(cctx, c, pending)
				res.Changes = observe(cctx, c, p.Changes, 0, nil)
				ccancel()
				why := context.Cause(ctx)
				if errors.Is(ctx.Err(), context.DeadlineExceeded) && lctx.Err() == nil {
					why = fmt.Errorf("timeout after %s", timeout)
				}
				return res, fmt.Errorf("%w: cancelled %d unfinished reassignments (%v); %d of %d partitions finished%s",
					why, len(pending), tpsOf(pending), done+len(batch)-len(pending), len(p.Changes), errSuffix(cancelErr))
			case <-time.After(o.Poll):
			}
		}
		done += len(batch)
	}
	res.Changes = observe(ctx, c, p.Changes, 30*time.Second, nil)
	verified := 0
	for i, ch := range res.Changes {
		want := p.Changes[i]
		if slices.Equal(ch.ReplicasAfter, want.ReplicasAfter) {
			verified++
			continue
		}
		res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipUnverified,
			Reason: fmt.Sprintf("after the change: replicas %v (wanted %v)", ch.ReplicasAfter, want.ReplicasAfter)})
	}
	return finish(res, verified), nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; cancel failed: " + err.Error()
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// minInsyncReplicas reads the topic's effective min.insync.replicas.
func minInsyncReplicas(ctx context.Context, c *Cluster, topic string) (int, error) {
	rcs, err := kadm.NewClient(c.Client).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, retry.Transient(fmt.Errorf("describe configs of %s: %w", topic, err))
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return 0, reject("topic %q does not exist", topic)
	}
	if err != nil {
		return 0, retry.Transient(fmt.Errorf("describe configs of %s: %w", topic, err))
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "min.insync.replicas" && cfg.Value != nil {
			return strconv.Atoi(*cfg.Value)
		}
	}
	return 1, nil
}

// waitForeign waits until no reassignment runs on the cluster, backing off, for at most
// wait; then it fails with the list of those still running.
func waitForeign(ctx context.Context, c *Cluster, wait time.Duration, log *zap.Logger) error {
	end := time.Now().Add(wait)
	delay := time.Second
	for {
		ongoing, err := kafka.ListReassignments(ctx, c.Client, nil)
		if err != nil {
			return retry.Transient(err)
		}
		if len(ongoing) == 0 {
			return nil
		}
		var list []string
		for tp, r := range ongoing {
			list = append(list, fmt.Sprintf("%s (adding %v, removing %v)", tp, r.Adding, r.Removing))
		}
		sort.Strings(list)
		if time.Now().After(end) {
			return fmt.Errorf("refusing to start: %d reassignments started by someone else are running: %s", len(list), strings.Join(list, ", "))
		}
		log.Info("waiting for foreign reassignments", zap.Strings("partitions", list))
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// batchMoves splits the changes into batches in which no broker receives more than max
// new replicas; trims (nothing to copy) all go in the first batch.
func batchMoves(changes []plan.Change, max int) [][]plan.Change {
	var batches [][]plan.Change
	var trims []plan.Change
	var moves []plan.Change
	for _, ch := range changes {
		if len(minus(ch.ReplicasAfter, ch.ReplicasBefore)) == 0 {
			trims = append(trims, ch)
		} else {
			moves = append(moves, ch)
		}
	}
	current, load := trims, map[int32]int{}
	for _, ch := range moves {
		added := minus(ch.ReplicasAfter, ch.ReplicasBefore)
		full := false
		for _, b := range added {
			if load[b] >= max {
				full = true
			}
		}
		if full {
			batches = append(batches, current)
			current, load = nil, map[int32]int{}
		}
		current = append(current, ch)
		for _, b := range added {
			load[b]++
		}
	}
	if len(current) > 0 {
		batches = append(batches, current)
	}
	return batches
}

// submit starts the reassignments of a batch.
func submit(ctx context.Context, c *Cluster, strategy kafka.Strategy, batch []plan.Change) error {
	targets := map[kafka.TopicPartition][]int32{}
	for _, ch := range batch {
		targets[ch.TopicPartition] = ch.ReplicasAfter
	}
	if strategy == kafka.StrategyZKReassign {
		held := heldFrom(ctx)
		if held == nil || c.ZK == nil {
			return errors.New("strategy zk-reassign needs the cluster's zookeeper and a lock in it")
		}
		return kafka.SubmitZKReassignment(ctx, c.ZK.Conn(), c.Chroot, held, targets)
	}
	return kafka.SubmitReassignment(ctx, c.Client, targets)
}

// pendingMoves lists the batch's partitions not yet at their target replicas (or still
// being reassigned).
func pendingMoves(ctx context.Context, c *Cluster, batch []plan.Change) ([]plan.Change, error) {
	topics := map[string]bool{}
	for _, ch := range batch {
		topics[ch.Topic] = true
	}
	var names []string
	for t := range topics {
		names = append(names, t)
	}
	snap, err := kafka.ReadSnapshot(ctx, c.Client, names...)
	if err != nil {
		return batch, err
	}
	var out []plan.Change
	for _, ch := range batch {
		p, ok := snap.Partition(ch.TopicPartition)
		if !ok || p.Reassigning() || !slices.Equal(p.Replicas, ch.ReplicasAfter) {
			out = append(out, ch)
		}
	}
	return out, nil
}

// cancelMoves cancels the reassignments of the pending partitions (KIP-455: the replica
// set goes back to what it was).
func cancelMoves(ctx context.Context, c *Cluster, pending []plan.Change) error {
	if len(pending) == 0 {
		return nil
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, ch := range pending {
		req.CancelAssign(ch.Topic, ch.Partition)
	}
	resp, err := kadm.NewClient(c.Client).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil && !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, r.Err))
		}
	})
	return errors.Join(errs...)
}

func tpsOf(l []plan.Change) []string {
	out := make([]string, len(l))
	for i, ch := range l {
		out[i] = ch.TopicPartition.String()
	}
	return out
}

// expectedBytes is what the new replicas must copy: the leader replica's size, once per
// added replica (best effort: 0 when log dirs cannot be described).
func expectedBytes(ctx context.Context, adm *kadm.Client, topic string, changes []plan.Change) int64 {
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(topic, changes))
	if err != nil {
		return 0
	}
	var total int64
	for _, ch := range changes {
		added := len(minus(ch.ReplicasAfter, ch.ReplicasBefore))
		if added == 0 || ch.LeaderBefore < 0 {
			continue
		}
		if p, ok := dirs[ch.LeaderBefore].LookupPartition(ch.Topic, ch.Partition); ok {
			total += p.Size * int64(added)
		}
	}
	return total
}

// copiedBytes sums the sizes of the added replicas so far (future and current logs).
func copiedBytes(ctx context.Context, adm *kadm.Client, topic string, changes []plan.Change) int64 {
	dirs, err := adm.DescribeAllLogDirs(ctx, moving(topic, changes))
	if err != nil {
		return 0
	}
	var total int64
	for _, ch := range changes {
		for _, b := range minus(ch.ReplicasAfter, ch.ReplicasBefore) {
			if p, ok := dirs[b].LookupPartition(ch.Topic, ch.Partition); ok {
				total += p.Size
			}
		}
	}
	return total
}

func moving(topic string, changes []plan.Change) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for _, ch := range changes {
		s.Add(topic, ch.Partition)
	}
	return s
}
