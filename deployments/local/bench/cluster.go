package main

// What the contenders share on a cluster: topics made for one run, reads of their
// placement, and the check that a contender did the planned change.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// cluster is one Kafka cluster of the stack, as the bench reaches it.
type cluster struct {
	stack.Cluster
	cl        *kgo.Client
	adm       *kadm.Client
	classpath string
}

func (c *cluster) brokerIDs() []int32 {
	ids := make([]int32, 0, len(c.Brokers))
	for _, b := range c.Brokers {
		ids = append(ids, b.ID)
	}
	return ids
}

// ledBy is an assignment of n partitions of 3 replicas, each headed by b, the others
// spread evenly over the other brokers.
func ledBy(b int32, brokers []int32, n int) [][]int32 {
	o := slices.DeleteFunc(slices.Clone(brokers), func(id int32) bool { return id == b })
	out := make([][]int32, n)
	for i := range out {
		out[i] = []int32{b, o[i%len(o)], o[(i+1)%len(o)]}
	}
	return out
}

// until calls check, pausing as kafkamender does between its reads (kafka.PollDelay: the
// floor waits as the worker waits), until it returns nil, or fails with its last error
// when timeout passes.
func until(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for i := 0; ; i++ {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// placement is a partition's replicas and leader, read from a broker's metadata.
type placement struct {
	replicas, isr []int32
	leader        int32
}

// read asks a broker (never franz-go's metadata cache) for topic's partitions.
func (c *cluster) read(ctx context.Context, topic string) (map[int32]placement, error) {
	return c.readFrom(ctx, -1, topic)
}

// readFrom is read from broker id (any broker when id is -1).
func (c *cluster) readFrom(ctx context.Context, id int32, topic string) (map[int32]placement, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	var resp *kmsg.MetadataResponse
	if id < 0 {
		r, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return nil, err
		}
		resp = r
	} else {
		r, err := c.cl.Broker(int(id)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		resp = r.(*kmsg.MetadataResponse)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	out := make(map[int32]placement, len(t.Partitions))
	for _, p := range t.Partitions {
		out[p.Partition] = placement{replicas: p.Replicas, isr: p.ISR, leader: p.Leader}
	}
	return out, nil
}

// createTopic creates topic with assignment and waits until every partition is led by
// the head of its replicas, all of them in sync.
func (c *cluster) createTopic(ctx context.Context, topic string, assignment [][]int32) error {
	if err := kafka.CreateTopic(ctx, c.cl, topic, assignment, nil); err != nil {
		return err
	}
	// Every broker's metadata: a contender (or the worker) may ask any of them.
	return until(ctx, 3*time.Minute, "topic "+topic+" placed", func(ctx context.Context) error {
		for _, id := range c.brokerIDs() {
			ps, err := c.readFrom(ctx, id, topic)
			if err != nil {
				return fmt.Errorf("broker %d: %w", id, err)
			}
			if len(ps) != len(assignment) {
				return fmt.Errorf("broker %d: %d of %d partitions", id, len(ps), len(assignment))
			}
			for i, r := range assignment {
				p := ps[int32(i)]
				if !slices.Equal(p.replicas, r) || p.leader != r[0] || len(p.isr) != len(r) {
					return fmt.Errorf("broker %d: partition %d: replicas %v leader %d isr %v", id, i, p.replicas, p.leader, p.isr)
				}
			}
		}
		return nil
	})
}

// deleteTopic deletes topic and waits until the cluster no longer lists it, so that the
// next contender plans on the same cluster as this one did, and until no broker keeps a
// replica of it. A ZooKeeper-mode controller drops a topic from the metadata first and
// stops and deletes its replicas after, one broker request at a time: for 1,000
// partitions that is seconds of work that the next contender's requests would queue
// behind. Contenders run in a fixed cycle (kafkamender after the floor, the floor after
// the CLIs, whose JVMs take seconds to start), so without this wait the floor always began
// on a settled controller and kafkamender never did.
func (c *cluster) deleteTopic(ctx context.Context, topic string) error {
	if _, err := c.adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete %s: %w", topic, err)
	}
	return until(ctx, 3*time.Minute, "topic "+topic+" deleted", func(ctx context.Context) error {
		for _, id := range c.brokerIDs() {
			_, err := c.readFrom(ctx, id, topic)
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue
			}
			if err == nil {
				err = errors.New("still listed")
			}
			return fmt.Errorf("broker %d: %w", id, err)
		}
		dirs, err := c.adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			return err
		}
		for broker, ds := range dirs {
			for _, d := range ds {
				if n := len(d.Topics[topic]); n > 0 {
					return fmt.Errorf("broker %d keeps %d replicas of it in %s", broker, n, d.Dir)
				}
			}
		}
		return nil
	})
}

// target is a planned change without its topic's name: what each contender must do to
// its own fresh topic, comparable across them.
type target struct {
	partition int32
	replicas  []int32
	leader    int32
}

func targetOf(p plan.Plan) []target {
	out := make([]target, 0, len(p.Changes))
	for _, ch := range p.Changes {
		out = append(out, target{ch.Partition, ch.ReplicasAfter, ch.LeaderAfter})
	}
	slices.SortFunc(out, func(a, b target) int { return int(a.partition - b.partition) })
	return out
}

func sameTarget(a, b []target) bool {
	return slices.EqualFunc(a, b, func(x, y target) bool {
		return x.partition == y.partition && x.leader == y.leader && slices.Equal(x.replicas, y.replicas)
	})
}

// shows checks that topic's partitions are as p planned (replicas, order and leader).
func (c *cluster) shows(ctx context.Context, topic string, p plan.Plan) error {
	ps, err := c.read(ctx, topic)
	if err != nil {
		return err
	}
	for _, ch := range p.Changes {
		got := ps[ch.Partition]
		if !slices.Equal(got.replicas, ch.ReplicasAfter) || got.leader != ch.LeaderAfter {
			return fmt.Errorf("%s: replicas %v led by %d, planned %v led by %d", ch.TopicPartition, got.replicas, got.leader, ch.ReplicasAfter, ch.LeaderAfter)
		}
	}
	return nil
}

// waitShows waits until topic shows p.
func (c *cluster) waitShows(ctx context.Context, topic string, p plan.Plan) error {
	return until(ctx, 5*time.Minute, "metadata agrees with the plan", func(ctx context.Context) error { return c.shows(ctx, topic, p) })
}

// planShed plans what kafkamender's broker-overloaded handler would for topic: a shed of
// broker b, balanced against every topic of the cluster.
func (c *cluster) planShed(ctx context.Context, topic string, b int32) (plan.Plan, error) {
	snap, err := kafka.ReadSnapshot(ctx, c.cl)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Shed(snap, plan.ShedRequest{Broker: b, Topics: []string{topic}})
}

// planPreferred plans what the preferred-leader handler would: b the preferred leader
// (and leader) of partition 0 of topic.
func (c *cluster) planPreferred(ctx context.Context, topic string, b int32) (plan.Plan, error) {
	snap, err := kafka.ReadSnapshot(ctx, c.cl, topic)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.PreferredLeader(snap, plan.PreferredLeaderRequest{Topic: topic, Partitions: []int32{0}, Broker: b})
}
