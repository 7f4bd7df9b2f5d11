// Package scale serves a modelled Kafka cluster of any size (100,000 partitions and more)
// from an in-process fake, for measuring kafkamender's own cost at scale: reading the
// cluster, planning and verifying, without a real cluster that two cores could not hold.
//
// The fake is franz-go's kfake: real listeners on loopback, the real wire protocol, so the
// worker's client encodes, sends and decodes exactly as against Kafka. kfake answers
// ApiVersions, ListPartitionReassignments and most other requests itself. Its own
// placement cannot express a real cluster (every broker is in rack "krack", a partition's
// replicas are its leader and the next brokers in node order, the leader is always the
// head of its replicas, and every replica is in sync), so the placement lives in this
// package's model and control hooks (kfake.ControlKey) answer the requests that read or
// change it:
//
//   - Metadata: brokers with their racks, topics with their true assignment, ISR and
//     leaders, from the model. No topic is ever created automatically.
//   - AlterPartitionReassignments: kfake accepts and does nothing. Here the reassignment is
//     validated as Kafka does (unknown partition, empty or duplicate or unknown replicas,
//     v1's AllowReplicationFactorChange, cancel with none in progress) and completes at
//     once: the new replicas are in sync at once (the model's partitions hold no data), the
//     removed ones leave the ISR, the leader stays unless it was removed.
//   - ElectLeaders: kfake moves every leader to the next broker whatever was asked. Here a
//     preferred election makes the head of the replicas the leader when it is live and in
//     sync (PREFERRED_LEADER_NOT_AVAILABLE otherwise, ELECTION_NOT_NEEDED when it leads
//     already); an unclean one elects only a partition without a leader.
//   - DescribeConfigs of topics: kfake knows no topic of the model. Here a topic's
//     configuration is the model's (min.insync.replicas); other resources go to kfake.
//
// ListPartitionReassignments is kfake's own answer, none in progress, which is the truth
// here: reassignments complete at once.
package scale

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Shape describes the modelled cluster.
type Shape struct {
	Partitions int   // in all topics, Big's included
	PerTopic   int   // partitions of each topic but Big
	Big        int   // partitions of topic BigTopic
	Racks      int   // racks r1, r2, …
	PerRack    int   // brokers per rack: brokers 1..Racks·PerRack, rack by rack
	RF         int   // replicas per partition
	Skewed     int32 // the broker that leads about a quarter of all partitions
	Seed       uint64
}

// BigTopic is the name of the topic of Shape.Big partitions.
const BigTopic = "big"

// Shape100k is 6 brokers in 3 racks, 1,980 topics of 50 partitions and "big" of 1,000:
// 100,000 partitions of 3 replicas, one per rack, leadership skewed to broker 1.
var Shape100k = Shape{Partitions: 100_000, PerTopic: 50, Big: 1_000, Racks: 3, PerRack: 2, RF: 3, Skewed: 1, Seed: 1}

// Scaled returns the shape with n partitions (Big keeps its size when n allows).
func (s Shape) Scaled(n int) Shape {
	s.Partitions = n
	s.Big = min(s.Big, n/10)
	return s
}

// Cluster is a modelled cluster served by kfake.
type Cluster struct {
	kf    *kfake.Cluster
	shape Shape
	addrs []string

	mu      sync.Mutex
	brokers []kmsg.MetadataResponseBroker
	racks   map[int32]string
	topics  []*topic // by name
	byName  map[string]*topic
	byID    map[[16]byte]*topic

	requests [128]atomic.Int64 // requests answered, by key
}

// topic is one topic of the model. Its partitions are copied on write: a response being
// encoded may still hold the slice, and kfake encodes outside the hooks.
type topic struct {
	name    string
	id      [16]byte
	configs map[string]string
	parts   []kmsg.MetadataResponseTopicPartition
}

// Start builds the model of shape and serves it on loopback (ports chosen by the system).
func Start(shape Shape) (*Cluster, error) {
	nb := shape.Racks * shape.PerRack
	if nb < 1 || shape.RF < 1 || shape.RF > nb || shape.PerTopic < 1 || shape.Big < 0 || shape.Big > shape.Partitions ||
		(shape.Partitions-shape.Big)%shape.PerTopic != 0 {
		return nil, fmt.Errorf("scale: shape %+v is not one this package builds", shape)
	}
	kf, err := kfake.NewCluster(kfake.NumBrokers(nb), kfake.ClusterID("scale"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{kf: kf, shape: shape, addrs: kf.ListenAddrs()}
	for i, addr := range c.addrs {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			kf.Close()
			return nil, err
		}
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = int32(i+1), host, int32(p)
		b.Rack = kmsg.StringPtr(fmt.Sprintf("r%d", i/shape.PerRack+1))
		c.brokers = append(c.brokers, b)
	}
	c.Reset()
	c.hook(kmsg.Metadata, func(r kmsg.Request) kmsg.Response { return c.metadata(r.(*kmsg.MetadataRequest)) })
	c.hook(kmsg.AlterPartitionAssignments, func(r kmsg.Request) kmsg.Response {
		return c.alterAssignments(r.(*kmsg.AlterPartitionAssignmentsRequest))
	})
	c.hook(kmsg.ElectLeaders, func(r kmsg.Request) kmsg.Response { return c.elect(r.(*kmsg.ElectLeadersRequest)) })
	c.hook(kmsg.DescribeConfigs, func(r kmsg.Request) kmsg.Response { return c.describeConfigs(r.(*kmsg.DescribeConfigsRequest)) })
	// Count what kfake answers itself (ApiVersions, ListPartitionReassignments, …).
	kf.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.requests[r.Key()&127].Add(1)
		return nil, nil, false
	})
	return c, nil
}

// hook answers every request of key with fn; a nil response leaves the request to kfake.
func (c *Cluster) hook(key kmsg.Key, fn func(kmsg.Request) kmsg.Response) {
	c.kf.ControlKey(int16(key), func(r kmsg.Request) (kmsg.Response, error, bool) {
		resp := fn(r)
		if resp == nil {
			return nil, nil, false
		}
		c.kf.KeepControl()
		c.requests[key&127].Add(1)
		return resp, nil, true
	})
}

// Close stops the fake.
func (c *Cluster) Close() { c.kf.Close() }

// Addrs are the brokers' addresses, broker 1 first.
func (c *Cluster) Addrs() []string { return slices.Clone(c.addrs) }

// Client returns a client of the cluster, as the worker makes one (plus opts).
func (c *Cluster) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...), kgo.ClientID("kafkamender")}, opts...)...)
}

// Requests returns how many requests of key the cluster answered so far.
func (c *Cluster) Requests(key kmsg.Key) int64 { return c.requests[key&127].Load() }

// Racks maps each broker to its rack.
func (c *Cluster) Racks() map[int32]string {
	out := map[int32]string{}
	for _, b := range c.brokers {
		out[b.NodeID] = *b.Rack
	}
	return out
}

// Reset puts the model back to its initial assignment (the same for the same shape).
//
// Each partition's head rotates over the brokers in rack-alternating order, so every
// broker heads as many partitions; the other replicas are in distinct other racks (one
// per rack while racks last), each a random broker of its rack, in random order. One
// partition in 50 has its last replica out of sync. Leadership is skewed to the Skewed
// broker S: a tenth of the partitions S heads are led by their second replica (S came
// back from a restart and no preferred election ran), and S leads 3 in 10 of the
// partitions where it is an in-sync follower; with 3 racks of 2 that is a quarter of all
// partitions.
func (c *Cluster) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shape
	r := rand.New(rand.NewPCG(s.Seed, 0x5ca1e))
	nb := len(c.brokers)
	rackOf := func(id int32) int { return (int(id) - 1) / s.PerRack }
	order := make([]int32, 0, nb) // r1's first, r2's first, …, r1's second, …
	for k := range s.PerRack {
		for rk := range s.Racks {
			order = append(order, int32(rk*s.PerRack+k+1))
		}
	}
	c.racks = map[int32]string{}
	for _, b := range c.brokers {
		c.racks[b.NodeID] = *b.Rack
	}
	c.topics, c.byName, c.byID = nil, map[string]*topic{}, map[[16]byte]*topic{}
	add := func(name string, n int) {
		t := &topic{name: name, configs: map[string]string{"min.insync.replicas": strconv.Itoa(min(2, s.RF))}}
		for i := range t.id {
			t.id[i] = byte(r.Uint32())
		}
		t.parts = make([]kmsg.MetadataResponseTopicPartition, n)
		c.topics = append(c.topics, t)
		c.byName[name], c.byID[t.id] = t, t
	}
	if s.Big > 0 {
		add(BigTopic, s.Big)
	}
	for i := range (s.Partitions - s.Big) / s.PerTopic {
		add(fmt.Sprintf("t%05d", i), s.PerTopic)
	}
	slices.SortFunc(c.topics, func(a, b *topic) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	g := 0
	backing := make([]int32, 0, 2*s.RF*s.Partitions) // one array for every replica and ISR list
	take := func(ids []int32) []int32 {
		lo := len(backing)
		backing = append(backing, ids...)
		return backing[lo:len(backing):len(backing)]
	}
	var reps []int32
	for _, t := range c.topics {
		for i := range t.parts {
			head := order[g%nb]
			reps = append(reps[:0], head)
			racks := r.Perm(s.Racks)
			for _, rk := range racks {
				if len(reps) < s.RF && rk != rackOf(head) {
					reps = append(reps, int32(rk*s.PerRack+r.IntN(s.PerRack)+1))
				}
			}
			for len(reps) < s.RF { // more replicas than racks
				if id := int32(r.IntN(nb) + 1); !slices.Contains(reps, id) {
					reps = append(reps, id)
				}
			}
			isr := reps
			if g%50 == 17 && len(reps) > 1 {
				isr = reps[:len(reps)-1]
			}
			leader := head
			switch {
			case head == s.Skewed && len(isr) > 1 && r.IntN(10) == 0:
				leader = reps[1]
			case head != s.Skewed && slices.Contains(isr, s.Skewed) && r.IntN(10) < 3:
				leader = s.Skewed
			}
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = int32(i), leader, 1
			p.Replicas = take(reps)
			p.ISR = take(isr)
			p.OfflineReplicas = []int32{}
			t.parts[i] = p
			g++
		}
	}
}

// metadata answers from the model, as Kafka with auto.create.topics.enable=false.
func (c *Cluster) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = slices.Clone(c.brokers)
	resp.ClusterID = kmsg.StringPtr("scale")
	resp.ControllerID = c.brokers[0].NodeID
	answer := func(t *topic) {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(t.name), t.id
		rt.IsInternal = len(t.name) > 2 && t.name[:2] == "__"
		rt.Partitions = t.parts // copied on write: never changed in place
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Topics == nil {
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(c.topics))
		for _, t := range c.topics {
			answer(t)
		}
		return resp
	}
	seen := map[*topic]bool{}
	for _, rt := range req.Topics {
		var t *topic
		switch {
		case rt.TopicID != [16]byte{}:
			if t = c.byID[rt.TopicID]; t == nil {
				e := kmsg.NewMetadataResponseTopic()
				e.TopicID, e.ErrorCode = rt.TopicID, kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, e)
				continue
			}
		case rt.Topic != nil:
			if t = c.byName[*rt.Topic]; t == nil {
				e := kmsg.NewMetadataResponseTopic()
				e.Topic, e.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, e)
				continue
			}
		default:
			continue
		}
		if !seen[t] {
			seen[t] = true
			answer(t)
		}
	}
	return resp
}

// writable returns t's partitions to change: a copy, installed in t (copy on write), once
// per request (copied records which topics were copied in this request).
func writable(t *topic, copied map[*topic]bool) []kmsg.MetadataResponseTopicPartition {
	if !copied[t] {
		copied[t] = true
		t.parts = slices.Clone(t.parts)
	}
	return t.parts
}

// alterAssignments validates and completes reassignments at once (see the package doc).
func (c *Cluster) alterAssignments(req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	copied := map[*topic]bool{}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t := c.byName[rt.Topic]
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			code, msg := c.reassign(t, rp, req.Version >= 1 && !req.AllowReplicationFactorChange, copied)
			if code != 0 {
				sp.ErrorCode, sp.ErrorMessage = code, kmsg.StringPtr(msg)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (c *Cluster) reassign(t *topic, rp kmsg.AlterPartitionAssignmentsRequestTopicPartition, fixedRF bool, copied map[*topic]bool) (int16, string) {
	if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts) {
		return kerr.UnknownTopicOrPartition.Code, "unknown topic or partition"
	}
	if rp.Replicas == nil {
		return kerr.NoReassignmentInProgress.Code, "no reassignment in progress" // they complete at once
	}
	target := rp.Replicas
	if len(target) == 0 {
		return kerr.InvalidReplicaAssignment.Code, "empty replica list"
	}
	for i, id := range target {
		if _, ok := c.racks[id]; !ok {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("broker %d does not exist", id)
		}
		if slices.Contains(target[:i], id) {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("broker %d is listed twice", id)
		}
	}
	old := t.parts[rp.Partition]
	if fixedRF && len(target) != len(old.Replicas) {
		return kerr.InvalidReplicationFactor.Code, "the replication factor may not change"
	}
	p := &writable(t, copied)[rp.Partition]
	p.Replicas = slices.Clone(target)
	isr := make([]int32, 0, len(target))
	for _, id := range old.ISR { // the old in-sync replicas that stay, then the new ones
		if slices.Contains(target, id) {
			isr = append(isr, id)
		}
	}
	for _, id := range target {
		if !slices.Contains(old.Replicas, id) {
			isr = append(isr, id)
		}
	}
	p.ISR = isr
	if !slices.Contains(target, p.Leader) {
		p.Leader = -1
		for _, id := range target {
			if slices.Contains(isr, id) {
				p.Leader = id
				break
			}
		}
		p.LeaderEpoch++
	}
	return 0, ""
}

// elect runs preferred (or unclean) elections on the model (see the package doc).
func (c *Cluster) elect(req *kmsg.ElectLeadersRequest) kmsg.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	copied := map[*topic]bool{}
	one := func(t *topic, part int32) (int16, string) {
		if t == nil || part < 0 || int(part) >= len(t.parts) {
			return kerr.UnknownTopicOrPartition.Code, "unknown topic or partition"
		}
		p := t.parts[part]
		if req.ElectionType == 1 { // unclean: only a partition without a leader
			if p.Leader >= 0 {
				return kerr.ElectionNotNeeded.Code, "the partition has a leader"
			}
			if len(p.Replicas) == 0 {
				return kerr.EligibleLeadersNotAvailable.Code, "no replica"
			}
			w := &writable(t, copied)[part]
			w.Leader, w.ISR = p.Replicas[0], []int32{p.Replicas[0]}
			w.LeaderEpoch++
			return 0, ""
		}
		if len(p.Replicas) == 0 {
			return kerr.PreferredLeaderNotAvailable.Code, "no replica"
		}
		head := p.Replicas[0]
		switch {
		case p.Leader == head:
			return kerr.ElectionNotNeeded.Code, "the preferred replica leads"
		case !slices.Contains(p.ISR, head):
			return kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("preferred replica %d is not in sync", head)
		}
		w := &writable(t, copied)[part]
		w.Leader = head
		w.LeaderEpoch++
		return 0, ""
	}
	add := func(name string, part int32, code int16, msg string) {
		if len(resp.Topics) == 0 || resp.Topics[len(resp.Topics)-1].Topic != name {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = name
			resp.Topics = append(resp.Topics, st)
		}
		st := &resp.Topics[len(resp.Topics)-1]
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition, sp.ErrorCode = part, code
		if code != 0 {
			sp.ErrorMessage = kmsg.StringPtr(msg)
		}
		st.Partitions = append(st.Partitions, sp)
	}
	if req.Topics == nil { // every partition: Kafka leaves out those that need none
		for _, t := range c.topics {
			for i := range t.parts {
				if code, msg := one(t, int32(i)); code != kerr.ElectionNotNeeded.Code {
					add(t.name, int32(i), code, msg)
				}
			}
		}
		return resp
	}
	for _, rt := range req.Topics {
		for _, part := range rt.Partitions {
			code, msg := one(c.byName[rt.Topic], part)
			add(rt.Topic, part, code, msg)
		}
	}
	return resp
}

// describeConfigs answers topics' configurations from the model; a request naming any
// other resource is left to kfake whole.
func (c *Cluster) describeConfigs(req *kmsg.DescribeConfigsRequest) kmsg.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rr := range req.Resources {
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			return nil
		}
	}
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		st := kmsg.NewDescribeConfigsResponseResource()
		st.ResourceType, st.ResourceName = rr.ResourceType, rr.ResourceName
		t := c.byName[rr.ResourceName]
		if t == nil {
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
			st.ErrorMessage = kmsg.StringPtr("unknown topic")
			resp.Resources = append(resp.Resources, st)
			continue
		}
		names := make([]string, 0, len(t.configs))
		for k := range t.configs {
			if rr.ConfigNames == nil || slices.Contains(rr.ConfigNames, k) {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		for _, k := range names {
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			rc.Name, rc.Value = k, kmsg.StringPtr(t.configs[k])
			rc.Source = kmsg.ConfigSourceDynamicTopicConfig
			st.Configs = append(st.Configs, rc)
		}
		resp.Resources = append(resp.Resources, st)
	}
	return resp
}
