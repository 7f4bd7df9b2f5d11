package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// partition-offline: partitions without a leader get one.
//
// Clean: a replica of the last ISR (the ISR the metadata still shows: the controller keeps
// the last in-sync replicas of a partition that lost its leader; see lastISR where it shows
// none) is alive. The worker asks
// the controller for a preferred election: a KRaft controller then elects the preferred
// replica if it is a live in-sync replica, else the first live in-sync replica in replica
// order; a ZooKeeper controller only the preferred replica (a partition whose live in-sync
// replica is not first is skipped, saying so). Either way no record is lost.
//
// Unclean: no replica of the last ISR is alive, but another replica is. Only when the event
// says allow_unclean and the configuration allows it (partition_offline.allow_unclean):
// the controller's unclean election (Kafka 2.4+) elects the first live replica in replica
// order, which Kafka's own rules make the leader whatever its log holds; every record
// after its log end offset that the last ISR held is lost. The result's change says from
// which offset (lost_offsets), and to which when a replica of the last ISR could be read.
// Without both permissions, the event is rejected, naming the last ISR, the live
// candidates and their log end offsets, read from each candidate broker.
//
// An election cannot be undone: a rollback only reports what the cluster shows.

type offlineTask struct {
	h        *Handlers
	c        *Cluster
	strategy kafka.Strategy
	caps     kafka.Capabilities
	req      *events.PartitionOffline // nil on a resume whose event no longer decodes
	unclean  bool                     // the event and the configuration allow an unclean election
	log      *zap.Logger
	fresh    *freshReader
}

func (h *Handlers) newPartitionOffline(ctx context.Context, c *Cluster, req *events.PartitionOffline, res *events.Result, log *zap.Logger) (operation.Task, error) {
	strategy, caps, err := h.strategyFor(ctx, c, "")
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	t := h.resumeOffline(c, strategy, caps, req, log)
	if req.AllowUnclean && !h.cfg.PartitionOffline.AllowUnclean {
		return nil, operation.Reject("allow_unclean: the worker's configuration does not allow unclean elections (partition_offline.allow_unclean is false)")
	}
	return t, nil
}

func (h *Handlers) resumeOffline(c *Cluster, strategy kafka.Strategy, caps kafka.Capabilities, req *events.PartitionOffline, log *zap.Logger) *offlineTask {
	t := &offlineTask{h: h, c: c, strategy: strategy, caps: caps, req: req, log: log}
	t.unclean = req != nil && req.AllowUnclean && h.cfg.PartitionOffline.AllowUnclean
	return t
}

func (t *offlineTask) rd(r *operation.Run) *freshReader {
	if t.fresh == nil {
		t.fresh = newFreshReader(t.c.reader(t.caps), r.Floor(), t.h.cfg.VerifyTimeout, r.Log)
	}
	return t.fresh
}

// Plan reads the partitions the event names (every topic when it names none) and plans an
// election for each one without a leader (plan.Offline); an event whose partitions all need
// an unclean election it may not make is rejected, naming them.
func (t *offlineTask) Plan(ctx context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	var named []string
	if t.req.Topic != "" {
		named = []string{t.req.Topic}
	}
	snap, err := readNamed(ctx, t.c, t.rd(r), named, named...)
	if err != nil {
		return nil, err
	}
	req := plan.OfflineRequest{Topic: t.req.Topic, Partitions: t.req.Partitions, Unclean: t.unclean,
		ZKController: !t.caps.KRaft, Protected: t.h.protected(), LastISR: t.lastISR,
		LogEnd: func(b int32, tp model.TopicPartition) (int64, error) { return logEndOffset(ctx, t.c, b, tp) }}
	if !t.caps.AlterPartitionAssignment { // ElectLeaders v1, with the election type, came with it
		req.UncleanUnsupported = "an unclean election through the API needs Kafka 2.4+"
	}
	p, err := plan.Offline(snap, req)
	if err != nil {
		return nil, err
	}
	if len(p.Changes) == 0 && len(p.Refused) > 0 {
		why := "an unclean election needs allow_unclean in the event and partition_offline.allow_unclean in the configuration"
		if t.unclean {
			why = "no unclean election can be made"
		}
		var refused []string
		for _, s := range p.Refused {
			refused = append(refused, s.TopicPartition.String()+": "+s.Reason)
		}
		return nil, operation.Reject("no in-sync replica is known to be alive, and %s: %s", why, strings.Join(refused, "; "))
	}
	out := &operation.Planned{Changes: p.Changes, Skipped: p.Skipped, Noop: p.Noop}
	if len(p.Changes)+len(p.Skipped)+len(p.Noop) == 0 {
		out.Notes = []string{"no partition is offline"}
	}
	return out, nil
}

// lastISR reads the last ISR of a partition whose metadata shows none. A KRaft controller
// with eligible leader replicas (KIP-966, Kafka 4) empties the ISR of a partition that lost
// its last in-sync replica and keeps those replicas as its eligible (ELR) and last known
// eligible leader replicas, which DescribeTopicPartitions shows; Kafka before 2.4 answers
// an empty ISR in the metadata of such a partition, and a ZooKeeper cluster's controller
// keeps the last one in /brokers/topics/<topic>/partitions/<n>/state.
func (t *offlineTask) lastISR(tp model.TopicPartition) ([]int32, error) {
	if t.caps.KRaft {
		return eligibleLeaders(t.c, tp)
	}
	if t.c.ZK == nil {
		return nil, errors.New("the metadata shows none, as Kafka before 2.4 does for a partition without a leader, and the cluster's zookeeper is not configured")
	}
	conn := t.c.ZK.Conn()
	if conn == nil {
		return nil, errors.New("no ZooKeeper session")
	}
	path := fmt.Sprintf("%s/brokers/topics/%s/partitions/%d/state", t.c.Chroot, tp.Topic, tp.Partition)
	data, _, err := conn.Get(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var st struct {
		Leader int32   `json:"leader"`
		ISR    []int32 `json:"isr"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	if len(st.ISR) == 0 {
		return nil, fmt.Errorf("%s lists no ISR", path)
	}
	return st.ISR, nil
}

// eligibleLeaders reads a KRaft partition's eligible and last known eligible leader
// replicas (DescribeTopicPartitions, Kafka 3.8+): the replicas that held every committed
// record when the ISR emptied.
func eligibleLeaders(c *Cluster, tp model.TopicPartition) ([]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = tp.Topic
	req.Topics = append(req.Topics, rt)
	req.ResponsePartitionLimit = 2000
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return nil, fmt.Errorf("describe topic partitions: %w", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return nil, fmt.Errorf("describe topic partitions of %s: %w", tp.Topic, err)
		}
		for _, p := range rt.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			var out []int32
			for _, b := range append(append(slices.Clone(p.ISR), p.EligibleLeaderReplicas...), p.LastKnownELR...) {
				if !slices.Contains(out, b) {
					out = append(out, b)
				}
			}
			if len(out) == 0 {
				return nil, errors.New("the controller shows no ISR, eligible or last known eligible leader replica")
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("describe topic partitions: no %s", tp)
}

// Apply elects the planned partitions still without a leader: the clean ones by a preferred
// election, the unclean ones by an unclean election.
func (t *offlineTask) Apply(ctx context.Context, r *operation.Run) error {
	e := r.Entry()
	snap, err := t.rd(r).Snapshot(ctx, topicsOf(e.Changes)...)
	if err != nil {
		return transient(err)
	}
	var clean, unclean []model.TopicPartition
	for _, ch := range e.Changes {
		if p, ok := snap.Partition(ch.TopicPartition); !ok || p.Leader >= 0 {
			continue // gone, or led again: by our election of an earlier attempt (journaled) or not
		}
		if ch.LostOffsets != nil {
			unclean = append(unclean, ch.TopicPartition)
		} else {
			clean = append(clean, ch.TopicPartition)
		}
	}
	if len(clean)+len(unclean) == 0 {
		return nil
	}
	// Journaled before they are sent: a partition led afterwards was elected by us (an
	// entry may claim an election that never happened, never the reverse).
	e.Reassignments = append(e.Reassignments, append(slices.Clone(clean), unclean...)...)
	if err := r.Save(ctx, journal.StepElecting); err != nil {
		return stopped(ctx, err)
	}
	if len(clean) > 0 {
		op := t.h.reorderOp(t.c, t.strategy, t.caps, 0)
		be, err := op.backend(r)
		if err != nil {
			return err
		}
		if err := electPreferred(ctx, be, clean, t.log); err != nil {
			return err
		}
	}
	if len(unclean) > 0 {
		set := kadm.TopicsSet{}
		for _, tp := range unclean {
			set.Add(tp.Topic, tp.Partition)
		}
		t.log.Warn("unclean elections", zap.Strings("partitions", tpStrings(unclean)))
		res, err := kadm.NewClient(t.c.Client).ElectLeaders(ctx, kadm.ElectLiveReplica, set)
		if err != nil {
			return transient(fmt.Errorf("unclean election of %d partitions: %w", len(unclean), err))
		}
		for _, ps := range res {
			for _, er := range ps {
				if er.Err != nil && !errors.Is(er.Err, kerr.ElectionNotNeeded) {
					t.log.Warn("unclean election failed", zap.String("topic", er.Topic), zap.Int32("partition", er.Partition), zap.Error(er.Err))
				}
			}
		}
	}
	return nil
}

// Verify reads the planned partitions until each has a leader (or the verify timeout
// passes): a partition led by another broker than planned counts, its change saying so.
func (t *offlineTask) Verify(ctx context.Context, r *operation.Run) (int, error) {
	e, res := r.Entry(), r.Result
	res.Noop, res.Skipped = e.Noop, slices.Clone(e.Skipped)
	deadline := time.Now().Add(t.h.cfg.VerifyTimeout)
	var snap *model.Snapshot
	for i := 0; ; i++ {
		s, err := t.rd(r).Snapshot(ctx, topicsOf(e.Changes)...)
		if err == nil {
			snap = s
			led := true
			for _, ch := range e.Changes {
				if p, ok := s.Partition(ch.TopicPartition); ok && p.Leader < 0 {
					led = false
				}
			}
			if led {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if snap == nil {
				return 0, transient(fmt.Errorf("verify: no fresh read of the cluster: %v", err))
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(kafka.PollDelay(i)):
		}
	}
	verified := 0
	res.Changes = nil
	now := map[model.TopicPartition]model.Partition{}
	for _, ch := range e.Changes {
		p, ok := snap.Partition(ch.TopicPartition)
		if !ok {
			res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: SkipChanged, Reason: "the partition no longer exists (its topic was deleted)"})
			continue
		}
		now[ch.TopicPartition] = p
		if p.Leader < 0 {
			res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipElectionFailed, Reason: fmt.Sprintf(
				"still no leader (replicas %v, isr %v)", p.Replicas, p.ISR)})
			continue
		}
		if !e.Submitted(ch.TopicPartition) {
			verified++ // as the event wants: led
			res.Skipped = append(res.Skipped, plan.Skip{TopicPartition: ch.TopicPartition, Code: plan.SkipHasLeader, Reason: fmt.Sprintf(
				"led by %d before its election was sent (a broker came back, or the controller elected it)", p.Leader)})
			continue
		}
		verified++
		made := ch
		made.ReplicasAfter, made.LeaderAfter = p.Replicas, p.Leader
		if p.Leader != ch.LeaderAfter {
			made.LostOffsets = nil
			made.Note = fmt.Sprintf("%s; the controller elected %d, not %d (planned)", ch.Note, p.Leader, ch.LeaderAfter)
		}
		res.Changes = append(res.Changes, made)
	}
	leave(r, res.Changes, now)
	return verified, nil
}

// Rollback cannot undo an election: it reports what the cluster shows.
func (t *offlineTask) Rollback(ctx context.Context, r *operation.Run) (string, error) {
	e := r.Entry()
	snap, err := t.rd(r).Snapshot(ctx, topicsOf(e.Changes)...)
	if err != nil {
		return "", transient(err)
	}
	r.Result.Changes = nil
	for _, ch := range e.Changes {
		if p, ok := snap.Partition(ch.TopicPartition); ok && p.Leader >= 0 && e.Submitted(ch.TopicPartition) {
			made := ch
			made.LeaderAfter = p.Leader
			if p.Leader != ch.LeaderAfter {
				made.LostOffsets = nil
			}
			r.Result.Changes = append(r.Result.Changes, made)
		}
	}
	return "an election cannot be undone: the partitions that have a leader keep it", nil
}

// logEndOffset reads the log end offset of broker b's replica of tp from b itself (a
// ListOffsets as Kafka's debugging replica, which a follower answers too).
func logEndOffset(ctx context.Context, c *Cluster, b int32, tp model.TopicPartition) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -2 // ListOffsetsRequest.DEBUGGING_REPLICA_ID: not only from the leader; the log end, not the high watermark
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = -1 // latest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, c.Client.Broker(int(b)))
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("broker %d did not answer for %s", b, tp)
}

func tpStrings(tps []model.TopicPartition) []string {
	out := make([]string, len(tps))
	for i, tp := range tps {
		out[i] = tp.String()
	}
	return out
}
