package handlers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// A broker's life cycle (broker-failed, broker-drain, broker-added) is a copy operation
// like a replication-factor change: the same task (rfTask) applies, throttles, verifies
// and rolls back its reassignments, over every topic they touch; only the plan differs
// (plan.Vacate, plan.Drain, plan.Fill), made from a read of every topic. A drain sheds
// the broker's leadership before its copies (rfTask.shed); broker-added elects the
// leaders it moves after them.

// newCopy builds the copy task of a broker life-cycle event: the strategy (zk-nudge
// never changes a replica set), the throttle and the timeout it asks for, else the
// replication_factor defaults.
func (h *Handlers) newCopy(ctx context.Context, c *Cluster, typ string, rate int64, timeout events.Duration, log *zap.Logger, res *events.Result) (*rfTask, error) {
	strategy, caps, err := h.strategyFor(ctx, c, "")
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	if strategy == kafka.StrategyZKNudge {
		return nil, operation.Reject("cluster %s: strategy zk-nudge never changes a replica set, which %s needs: configure api or zk-reassign", c.Name, typ)
	}
	t := h.resumeRF(c, strategy, caps, nil, nil, log)
	if timeout.Duration > 0 {
		t.timeout = timeout.Duration
	}
	if rate > 0 {
		t.rate = rate
	}
	if err := throttleable(c, caps, t.rate); err != nil {
		return nil, err
	}
	return t, nil
}

// newBrokerFailed plans recreating the replicas of a broker gone for good: refused while
// the broker is in the cluster's metadata.
func (h *Handlers) newBrokerFailed(ctx context.Context, c *Cluster, req *events.BrokerFailed, res *events.Result, log *zap.Logger) (operation.Task, error) {
	t, err := h.newCopy(ctx, c, events.TypeBrokerFailed, req.ThrottleBytesPerSec, req.Timeout, log, res)
	if err != nil {
		return nil, err
	}
	broker := *req.Broker
	t.failed = []int32{broker}
	t.planFn = func(ctx context.Context, snap *model.Snapshot) (plan.Plan, []string, error) {
		if b, alive := snap.Brokers[broker]; alive {
			return plan.Plan{}, nil, operation.Reject("broker %d is alive: the cluster's metadata lists it (rack %q); broker-failed moves data only off a broker that is gone for good (to empty a live broker, send broker-drain)", broker, b.Rack)
		}
		if err := knownTopics(snap, req.Topics); err != nil {
			return plan.Plan{}, nil, err
		}
		if !holds(snap, broker) {
			return plan.Plan{}, nil, nil
		}
		vr, notes, err := h.vacateRequest(ctx, c, snap, broker, req.Topics)
		if err != nil {
			return plan.Plan{}, nil, err
		}
		if req.Rack != "" {
			vr.Racks = map[int32]string{broker: req.Rack}
		}
		p, err := plan.Vacate(snap, vr)
		return p, notes, err
	}
	return t, nil
}

// newBrokerDrain plans emptying a live broker: its leadership shed first, then its
// replicas copied elsewhere (plan.Drain); refused when the broker is not live.
func (h *Handlers) newBrokerDrain(ctx context.Context, c *Cluster, req *events.BrokerDrain, res *events.Result, log *zap.Logger) (operation.Task, error) {
	t, err := h.newCopy(ctx, c, events.TypeBrokerDrain, req.ThrottleBytesPerSec, req.Timeout, log, res)
	if err != nil {
		return nil, err
	}
	broker := *req.Broker
	t.drained, t.leaders = broker, true
	t.planFn = func(ctx context.Context, snap *model.Snapshot) (plan.Plan, []string, error) {
		if _, alive := snap.Brokers[broker]; !alive {
			return plan.Plan{}, nil, operation.Reject("broker %d is not in the cluster's metadata (live brokers: %v): only a live broker can be drained (for a broker gone for good, send broker-failed)", broker, liveIDs(snap))
		}
		if err := knownTopics(snap, req.Topics); err != nil {
			return plan.Plan{}, nil, err
		}
		vr, notes, err := h.vacateRequest(ctx, c, snap, broker, req.Topics)
		if err != nil {
			return plan.Plan{}, nil, err
		}
		p, err := plan.Drain(snap, vr)
		return p, notes, err
	}
	return t, nil
}

// vacateRequest is the request that empties broker of topics (nil: every topic), with
// the topics' min.insync.replicas and the brokers' capacity read from the cluster; the
// notes say which brokers are not bounded.
func (h *Handlers) vacateRequest(ctx context.Context, c *Cluster, snap *model.Snapshot, broker int32, topics []string) (plan.VacateRequest, []string, error) {
	vr := plan.VacateRequest{Brokers: []int32{broker}, Topics: topics, Protected: h.protected()}
	var err error
	if vr.MinISR, err = minInsyncReplicasAll(ctx, c, snap); err != nil {
		return vr, nil, err
	}
	notes, err := h.capacity(ctx, c, snap, &vr.Capacity)
	return vr, notes, err
}

// newBrokerAdded plans moving replicas and leadership onto new or empty brokers: each
// must be live.
func (h *Handlers) newBrokerAdded(ctx context.Context, c *Cluster, req *events.BrokerAdded, res *events.Result, log *zap.Logger) (operation.Task, error) {
	t, err := h.newCopy(ctx, c, events.TypeBrokerAdded, req.ThrottleBytesPerSec, req.Timeout, log, res)
	if err != nil {
		return nil, err
	}
	added := req.Added()
	t.leaders = true // the plan moves preferred leaders onto the new brokers: elected after the copies
	t.planFn = func(ctx context.Context, snap *model.Snapshot) (plan.Plan, []string, error) {
		var gone []string
		for _, b := range added {
			if _, ok := snap.Brokers[b]; !ok {
				gone = append(gone, strconv.Itoa(int(b)))
			}
		}
		if len(gone) > 0 {
			return plan.Plan{}, nil, operation.Reject("broker %s is not in the cluster's metadata (live brokers: %v): nothing can move onto it", strings.Join(gone, ", "), liveIDs(snap))
		}
		if err := knownTopics(snap, req.Topics); err != nil {
			return plan.Plan{}, nil, err
		}
		fr := plan.FillRequest{Brokers: added, Topics: req.Topics, Protected: h.protected()}
		notes, err := h.capacity(ctx, c, snap, &fr.Capacity)
		if err != nil {
			return plan.Plan{}, nil, err
		}
		p, err := plan.Fill(snap, fr)
		if err != nil {
			return p, nil, err
		}
		ids, replicas, leaders := plan.Counts(snap, p, fr.Topics)
		notes = append(notes, fmt.Sprintf("after the plan: replicas per broker %s, preferred leaders per broker %s (brokers %v)",
			plan.Spread(ids, replicas), plan.Spread(ids, leaders), ids))
		return p, notes, nil
	}
	return t, nil
}

// holds reports whether some partition lists broker b as a replica.
func holds(snap *model.Snapshot, b int32) bool {
	for _, ps := range snap.Topics {
		for _, p := range ps {
			if slices.Contains(p.Replicas, b) {
				return true
			}
		}
	}
	return false
}

func liveIDs(snap *model.Snapshot) []int32 {
	var out []int32
	for id := range snap.Brokers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// minInsyncReplicasAll returns each topic's effective min.insync.replicas (1 when a
// topic's configs cannot be read: it is then merely less urgent), read in one request.
func minInsyncReplicasAll(ctx context.Context, c *Cluster, snap *model.Snapshot) (func(string) int, error) {
	topics := make([]string, 0, len(snap.Topics))
	for t := range snap.Topics {
		topics = append(topics, t)
	}
	m, err := minInsyncReplicasOf(ctx, c, topics)
	if err != nil {
		return nil, err
	}
	return func(t string) int { return max(m[t], 1) }, nil
}

// capacity fills cp from the brokers' log directories and the cluster's configuration.
// A broker with a configured capacity (Cluster.Capacity) holds the sum of its replicas'
// sizes against it; any other broker's capacity is the total size of the volumes of its
// log directories, and what it uses that less their usable bytes (Kafka 3.3+; a broker
// that reports neither is not bounded). A partition's size is the largest of its
// replicas. The notes say which brokers are unbounded.
func (h *Handlers) capacity(ctx context.Context, c *Cluster, snap *model.Snapshot, cp *plan.Capacity) ([]string, error) {
	dirs, err := kadm.NewClient(c.Client).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return nil, transient(fmt.Errorf("describe log dirs: %w", err))
	}
	cp.Total, cp.Used, cp.Threshold = map[int32]int64{}, map[int32]int64{}, c.CapacityThreshold
	if cp.Threshold <= 0 {
		cp.Threshold = config.DefaultCapacityThreshold
	}
	sizes := map[model.TopicPartition]int64{}
	var unbounded []int32
	for b, ds := range dirs {
		var total, used, replicas int64
		bounded := true
		for _, d := range ds {
			if d.Err != nil || d.TotalBytes < 0 || d.UsableBytes < 0 {
				bounded = false
			} else {
				total += d.TotalBytes
				used += d.TotalBytes - d.UsableBytes
			}
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				tp := model.TopicPartition{Topic: p.Topic, Partition: p.Partition}
				sizes[tp] = max(sizes[tp], p.Size)
				replicas += p.Size
			})
		}
		if _, live := snap.Brokers[b]; !live {
			continue
		}
		if configured, ok := c.Capacity[b]; ok {
			cp.Total[b], cp.Used[b] = configured, replicas
			continue
		}
		if !bounded || total == 0 {
			unbounded = append(unbounded, b)
			continue
		}
		cp.Total[b], cp.Used[b] = total, used
	}
	cp.Size = func(tp model.TopicPartition) int64 { return sizes[tp] }
	if len(unbounded) == 0 {
		return nil, nil
	}
	slices.Sort(unbounded)
	return []string{fmt.Sprintf("brokers %v report no volume sizes (Kafka before 3.3) and have no clusters.%s.capacity_bytes: planned without a capacity bound", unbounded, c.Name)}, nil
}

// drainedOf is the broker a drain's changes empty: the one every change removes (-1 when
// the changes name none).
func drainedOf(changes []plan.Change) int32 {
	count := map[int32]int{}
	for _, ch := range changes {
		for _, b := range minus(ch.ReplicasBefore, ch.ReplicasAfter) {
			count[b]++
		}
		if len(ch.ReplicasBefore) > 0 && !slices.Contains(minus(ch.ReplicasBefore, ch.ReplicasAfter), ch.ReplicasBefore[0]) && ch.LeaderBefore != ch.LeaderAfter {
			count[ch.LeaderBefore]++ // a shed alone: its replica stays
		}
	}
	best, n := int32(-1), 0
	for b, c := range count {
		if c > n || c == n && b < best {
			best, n = b, c
		}
	}
	return best
}

// knownTopics rejects a request naming a topic the cluster does not have.
func knownTopics(snap *model.Snapshot, topics []string) error {
	for _, topic := range topics {
		if _, ok := snap.Topics[topic]; !ok {
			return operation.Reject("topic %q does not exist", topic)
		}
	}
	return nil
}
