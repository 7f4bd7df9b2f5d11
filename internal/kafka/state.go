package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The placement model's types (package model: plain data, no I/O), under the names the
// backends use.
type (
	TopicPartition = model.TopicPartition
	Partition      = model.Partition
	Broker         = model.Broker
	Snapshot       = model.Snapshot
)

// SortTopicPartitions sorts by topic, then partition.
func SortTopicPartitions(tps []TopicPartition) { model.SortTopicPartitions(tps) }

// ReadSnapshot reads brokers, the given topics' partitions and, when the cluster supports
// it (Kafka 2.4+), their ongoing reassignments. It always asks a broker: kadm's Metadata
// answers from franz-go's cache for up to MetadataMinAge (5s by default), which would make
// a verification see the state from before the change.
//
// With no topics named it reads every topic of the cluster (internal ones included): what
// balancing leadership across the cluster needs.
//
// On a cluster before 2.4 it sees no reassignment: use a Reader with the cluster's
// ZooKeeper there.
func ReadSnapshot(ctx context.Context, cl *kgo.Client, topics ...string) (_ *Snapshot, err error) {
	defer func() { err = classify(err) }()
	return readSnapshot(ctx, cl, true, topics)
}

// Reader reads a cluster's placement with what it has. Ongoing reassignments come from
// ListPartitionReassignments when every broker has it (Kafka 2.4+, Caps.ListReassignments);
// before, from /admin/reassign_partitions in the cluster's ZooKeeper: such a controller
// shows a reassignment's target replicas in the metadata as soon as it starts, so the
// metadata cannot tell a running reassignment from a finished one, and the znode can (the
// controller deletes each partition from it when it completes).
type Reader struct {
	Client *kgo.Client
	Caps   Capabilities
	// ZK reads the cluster's ZooKeeper (paths without chroot); nil when none is configured.
	// Without it, a cluster before 2.4 shows no reassignment.
	ZK     ZKReader
	Chroot string
}

// fromZnode reports whether ongoing reassignments are read from /admin/reassign_partitions.
func (r Reader) fromZnode() bool { return !r.Caps.ListReassignments && r.ZK != nil }

// Snapshot is ReadSnapshot with the reassignments from where the cluster keeps them. Before
// 2.4 the znode is read first, then the metadata: a reassignment that completes between the
// two reads is seen as still running (one more poll), never as not begun.
func (r Reader) Snapshot(ctx context.Context, topics ...string) (_ *Snapshot, err error) {
	defer func() { err = classify(err) }()
	if !r.fromZnode() {
		return readSnapshot(ctx, r.Client, r.Caps.ListReassignments, topics)
	}
	targets, err := ReadZKReassignments(r.ZK, r.Chroot)
	if err != nil {
		return nil, err
	}
	s, err := readSnapshot(ctx, r.Client, false, topics)
	if err != nil {
		return nil, err
	}
	for tp, target := range targets {
		if ps, ok := s.Topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(ps) {
			p := &ps[tp.Partition]
			p.Target = slices.Clone(target)
			p.Removing = minusInt32(p.Replicas, target)
		}
	}
	return s, nil
}

// Placement reads what the metadata shows (brokers, replicas, leaders, ISR) without asking
// which reassignments are ongoing: one round trip instead of two, for a read that need not
// tell a running reassignment from a finished one. A reorder's verification is one: its
// reassignment adds and removes nothing, and completes at once (the controller finishes it
// within the request, the replicas all in sync). Before 2.4 it is Snapshot: such a
// controller shows a reassignment's target at once, and the znode is cheap to read.
func (r Reader) Placement(ctx context.Context, topics ...string) (_ *Snapshot, err error) {
	if r.fromZnode() {
		return r.Snapshot(ctx, topics...)
	}
	defer func() { err = classify(err) }()
	return readSnapshot(ctx, r.Client, false, topics)
}

// Reassignments lists the ongoing reassignments of the named topics, or of the whole
// cluster when topics is nil: through the API (2.4+), or from /admin/reassign_partitions
// (Target set, the rest unknown).
func (r Reader) Reassignments(ctx context.Context, topics []string) (_ map[TopicPartition]Reassignment, err error) {
	defer func() { err = classify(err) }()
	if !r.fromZnode() {
		if !r.Caps.ListReassignments {
			return nil, fmt.Errorf("list reassignments: the cluster has no ListPartitionReassignments (Kafka < 2.4) and no zookeeper is configured: %w", ErrUnsupported)
		}
		return ListReassignments(ctx, r.Client, topics)
	}
	targets, err := ReadZKReassignments(r.ZK, r.Chroot)
	if err != nil {
		return nil, err
	}
	out := map[TopicPartition]Reassignment{}
	for tp, target := range targets {
		if topics == nil || slices.Contains(topics, tp.Topic) {
			out[tp] = Reassignment{Target: target}
		}
	}
	return out, nil
}

func minusInt32(a, b []int32) []int32 { return model.Minus(a, b) }

// readSnapshot is ReadSnapshot; with list false it does not ask for reassignments.
func readSnapshot(ctx context.Context, cl *kgo.Client, list bool, topics []string) (*Snapshot, error) {
	md, err := freshMetadata(ctx, cl, topics)
	if err != nil {
		return nil, err
	}
	all := len(topics) == 0
	if all {
		for _, t := range md.Topics {
			if t.Topic != nil {
				topics = append(topics, *t.Topic)
			}
		}
		sort.Strings(topics)
	}
	// A broker learns of a new topic a moment after the controller: before saying that a
	// topic does not exist, ask again (another broker, a little later).
	for try := 0; !all && try < 5 && missingTopic(md, topics); try++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(100<<try) * time.Millisecond):
		}
		if md, err = freshMetadata(ctx, cl, topics); err != nil {
			return nil, err
		}
	}
	s := &Snapshot{Controller: md.ControllerID, Brokers: map[int32]Broker{}, Topics: map[string][]Partition{}, Missing: map[string]error{}}
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		s.Brokers[b.NodeID] = Broker{ID: b.NodeID, Rack: rack}
	}
	byName := map[string]*kmsg.MetadataResponseTopic{}
	for i := range md.Topics {
		if t := md.Topics[i].Topic; t != nil {
			byName[*t] = &md.Topics[i]
		}
	}
	for _, name := range topics {
		td, ok := byName[name]
		if !ok {
			s.Missing[name] = classify(kerr.UnknownTopicOrPartition)
			continue
		}
		if err := kerr.ErrorForCode(td.ErrorCode); err != nil {
			s.Missing[name] = classify(err)
			continue
		}
		ps := make([]Partition, len(td.Partitions))
		for _, pd := range td.Partitions {
			if pd.Partition < 0 || int(pd.Partition) >= len(ps) {
				return nil, fmt.Errorf("metadata of %s: partition %d of %d", name, pd.Partition, len(ps))
			}
			// A partition without a leader is part of the state. Kafka before 2.4 answers
			// LISTENER_NOT_FOUND for it (no leader endpoint), not LEADER_NOT_AVAILABLE.
			if err := kerr.ErrorForCode(pd.ErrorCode); err != nil && err != kerr.LeaderNotAvailable && err != kerr.ReplicaNotAvailable &&
				(err != kerr.ListenerNotFound || pd.Leader >= 0) {
				return nil, fmt.Errorf("metadata of %s-%d: %w", name, pd.Partition, err)
			}
			ps[pd.Partition] = Partition{
				TopicPartition: TopicPartition{Topic: name, Partition: pd.Partition},
				Replicas:       slices.Clone(pd.Replicas), ISR: slices.Clone(pd.ISR), Offline: slices.Clone(pd.OfflineReplicas),
				Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
			}
		}
		s.Topics[name] = ps
	}
	if len(s.Topics) == 0 || !list {
		return s, nil
	}
	// Listed after the metadata is read, never while it is: a list older than the metadata
	// could miss a reassignment the metadata shows begun (its replicas already the target)
	// and make a copy in progress look done.
	//
	// One request for the whole cluster, or for the partitions just read (in requests of
	// at most DefaultBatchPartitions): asking metadata for them again (as
	// ListReassignments does) would double the read.
	var reqs []*kmsg.ListPartitionReassignmentsRequest
	if all {
		reqs = append(reqs, kmsg.NewPtrListPartitionReassignmentsRequest())
	} else {
		var tps []TopicPartition
		for _, name := range topicNames(s.Topics) {
			for i := range s.Topics[name] {
				tps = append(tps, TopicPartition{Topic: name, Partition: int32(i)})
			}
		}
		for _, batch := range chunks(tps, DefaultBatchPartitions) {
			reqs = append(reqs, listRequest(batch))
		}
	}
	ongoing := map[TopicPartition]Reassignment{}
	for _, req := range reqs {
		listed, err := listReassignments(ctx, cl, req)
		if err == errReassignmentsUnsupported {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(ongoing, listed)
	}
	for tp, r := range ongoing {
		if ps, ok := s.Topics[tp.Topic]; ok && int(tp.Partition) < len(ps) {
			ps[tp.Partition].Adding = r.Adding
			ps[tp.Partition].Removing = r.Removing
		}
	}
	return s, nil
}

// missingTopic reports whether the response lacks one of topics or says it is unknown.
func missingTopic(md *kmsg.MetadataResponse, topics []string) bool {
	known := map[string]bool{}
	for _, t := range md.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			known[*t.Topic] = true
		}
	}
	for _, t := range topics {
		if !known[t] {
			return true
		}
	}
	return false
}

// freshMetadata sends a metadata request for topics (bypassing franz-go's cache).
func freshMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest() // no topics: every topic
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return resp, nil
}

// BrokerMetadata asks the cluster, with a request of its own, for its brokers and
// controller (no topics). kadm's BrokerMetadata may answer from the client's metadata
// cache, which says nothing about which brokers answer now.
func BrokerMetadata(ctx context.Context, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return resp, nil
}

func topicNames(m map[string][]Partition) []string {
	out := make([]string, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Reassignment is an ongoing reassignment of one partition: Replicas, Adding and Removing
// from the API (2.4+), or only Target, from /admin/reassign_partitions (before 2.4).
type Reassignment struct {
	Replicas, Adding, Removing []int32
	Target                     []int32
}

// To is the replica set the reassignment goes to.
func (r Reassignment) To() []int32 {
	if r.Target != nil {
		return r.Target
	}
	return minusInt32(r.Replicas, r.Removing)
}

// String describes the reassignment for messages.
func (r Reassignment) String() string {
	if r.Target != nil {
		return fmt.Sprintf("to %v (/admin/reassign_partitions)", r.Target)
	}
	return fmt.Sprintf("adding %v, removing %v", r.Adding, r.Removing)
}

var errReassignmentsUnsupported = fmt.Errorf("ListPartitionReassignments is not supported (Kafka < 2.4)")

// ListReassignments lists ongoing reassignments of the named topics, or of the whole
// cluster when topics is nil (kadm sends no request for an empty set, so this builds the
// request itself). Named topics are asked partition by partition, in requests of at most
// DefaultBatchPartitions partitions.
func ListReassignments(ctx context.Context, cl *kgo.Client, topics []string) (_ map[TopicPartition]Reassignment, err error) {
	defer func() { err = classify(err) }()
	if topics == nil {
		return listReassignments(ctx, cl, kmsg.NewPtrListPartitionReassignmentsRequest())
	}
	// Partitions must be listed; ask metadata for them.
	md, err := freshMetadata(ctx, cl, topics)
	if err != nil {
		return nil, err
	}
	var tps []TopicPartition
	for _, td := range md.Topics {
		if td.Topic == nil || kerr.ErrorForCode(td.ErrorCode) != nil {
			continue
		}
		for _, p := range td.Partitions {
			tps = append(tps, TopicPartition{Topic: *td.Topic, Partition: p.Partition})
		}
	}
	out := map[TopicPartition]Reassignment{}
	for _, batch := range chunks(uniqueSorted(tps), DefaultBatchPartitions) {
		listed, err := listReassignments(ctx, cl, listRequest(batch))
		if err != nil {
			return nil, err
		}
		maps.Copy(out, listed)
	}
	return out, nil
}

// listRequest is a ListPartitionReassignments request of exactly tps (sorted).
func listRequest(tps []TopicPartition) *kmsg.ListPartitionReassignmentsRequest {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, tp.Partition)
	}
	return req
}

// listReassignments sends req (its topics nil: the whole cluster) and returns the ongoing
// reassignments it lists.
func listReassignments(ctx context.Context, cl *kgo.Client, req *kmsg.ListPartitionReassignmentsRequest) (map[TopicPartition]Reassignment, error) {
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		if err == kerr.UnsupportedVersion || isUnsupported(err) {
			return nil, errReassignmentsUnsupported
		}
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", errWithMessage(err, resp.ErrorMessage))
	}
	out := map[TopicPartition]Reassignment{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{Topic: t.Topic, Partition: p.Partition}] = Reassignment{Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas}
		}
	}
	return out, nil
}

func errWithMessage(err error, msg *string) error {
	if msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}
