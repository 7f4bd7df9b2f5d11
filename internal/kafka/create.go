package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopic creates topic with an explicit replica assignment: assignment[p] is the
// ordered replica list of partition p (kadm's CreateTopics takes only a count and a
// factor). Tests, the demo and the benchmark use it to start from a known placement, and
// wait for the placement after it.
//
// A busy controller (a ZooKeeper-mode one still deleting another topic of 1,000
// partitions) may answer REQUEST_TIMED_OUT: the creation may have been taken and go on, or
// not (KRaft's controller queue). The request is sent again until it is answered: a
// TOPIC_ALREADY_EXISTS then is the earlier request's topic.
func CreateTopic(ctx context.Context, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) (err error) {
	timedOut := false
	for i := 0; ; i++ {
		err := createTopic(ctx, cl, topic, assignment, configs)
		switch {
		case errors.Is(err, kerr.RequestTimedOut) && ctx.Err() == nil:
			timedOut = true
			select {
			case <-ctx.Done():
				return err
			case <-time.After(PollDelay(i)):
			}
			continue
		case timedOut && errors.Is(err, kerr.TopicAlreadyExists):
			return nil
		}
		return err
	}
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) (err error) {
	defer func() { err = classify(err) }()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = -1
	rt.ReplicationFactor = -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition = int32(p)
		ra.Replicas = replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, errWithMessage(err, r.ErrorMessage))
		}
	}
	return nil
}
