package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replication throttle configs (KAFKA.md, "Throttling a reassignment").
const (
	LeaderThrottledRate       = "leader.replication.throttled.rate"
	FollowerThrottledRate     = "follower.replication.throttled.rate"
	LeaderThrottledReplicas   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicas = "follower.replication.throttled.replicas"
)

// ThrottleSpec is what to throttle for one topic's moving replicas: Leaders[p] are the
// replicas partition p copies from (its current replicas), Followers[p] the replicas
// being added.
type ThrottleSpec struct {
	Topic     string
	Rate      int64 // bytes per second, on every broker concerned
	Leaders   map[int32][]int32
	Followers map[int32][]int32
}

// prior is a config's dynamic value before we touched it; nil when it had none.
type prior struct {
	resource string // topic name, or broker id
	broker   bool
	key      string
	value    *string
}

// Throttle sets the replication throttle of spec and returns a function that restores
// exactly the values that were there before: a dynamic value somebody else set is put
// back as it was, a config that had none is deleted. Kafka's tool overwrites others'
// throttles and its --verify deletes them all; this never does either. Topic throttled
// replicas are merged with those already listed, so another operation's throttle keeps
// working meanwhile. Call restore on every way out (success, failure, timeout, cancel),
// with a context that is still alive.
func Throttle(ctx context.Context, cl *kgo.Client, spec ThrottleSpec) (restore func(context.Context) error, err error) {
	adm := kadm.NewClient(cl)
	var leaderBrokers, followerBrokers []int32
	for _, rs := range spec.Leaders {
		leaderBrokers = append(leaderBrokers, rs...)
	}
	for _, rs := range spec.Followers {
		followerBrokers = append(followerBrokers, rs...)
	}
	leaderBrokers, followerBrokers = uniq(leaderBrokers), uniq(followerBrokers)
	all := uniq(append(slices.Clone(leaderBrokers), followerBrokers...))

	var priors []prior
	brokerCfgs, err := adm.DescribeBrokerConfigs(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("describe broker configs: %w", err)
	}
	for _, rc := range brokerCfgs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describe configs of broker %s: %w", rc.Name, rc.Err)
		}
		for _, key := range []string{LeaderThrottledRate, FollowerThrottledRate} {
			priors = append(priors, prior{resource: rc.Name, broker: true, key: key, value: dynamicValue(rc.Configs, key, kmsg.ConfigSourceDynamicBrokerConfig)})
		}
	}
	topicCfgs, err := adm.DescribeTopicConfigs(ctx, spec.Topic)
	if err != nil {
		return nil, fmt.Errorf("describe configs of topic %s: %w", spec.Topic, err)
	}
	rc, err := topicCfgs.On(spec.Topic, nil)
	if err != nil || rc.Err != nil {
		return nil, fmt.Errorf("describe configs of topic %s: %w", spec.Topic, errors.Join(err, rc.Err))
	}
	for _, key := range []string{LeaderThrottledReplicas, FollowerThrottledReplicas} {
		priors = append(priors, prior{resource: spec.Topic, key: key, value: dynamicValue(rc.Configs, key, kmsg.ConfigSourceDynamicTopicConfig)})
	}

	restore = func(ctx context.Context) error {
		var errs []error
		for _, p := range priors {
			op, v := kadm.DeleteConfig, (*string)(nil)
			if p.value != nil {
				op, v = kadm.SetConfig, p.value
			}
			errs = append(errs, alterOne(ctx, adm, p, kadm.AlterConfig{Op: op, Name: p.key, Value: v}))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("restore throttles: %w", err)
		}
		return nil
	}

	rate := kadm.StringPtr(strconv.FormatInt(spec.Rate, 10))
	var errs []error
	for _, p := range priors {
		var v *string
		switch {
		case p.broker && p.key == LeaderThrottledRate && contains(leaderBrokers, p.resource):
			v = rate
		case p.broker && p.key == FollowerThrottledRate && contains(followerBrokers, p.resource):
			v = rate
		case p.key == LeaderThrottledReplicas:
			v = kadm.StringPtr(mergeReplicas(p.value, spec.Leaders))
		case p.key == FollowerThrottledReplicas:
			v = kadm.StringPtr(mergeReplicas(p.value, spec.Followers))
		default:
			continue
		}
		errs = append(errs, alterOne(ctx, adm, p, kadm.AlterConfig{Op: kadm.SetConfig, Name: p.key, Value: v}))
	}
	if err := errors.Join(errs...); err != nil {
		// Leave nothing half-set behind.
		return nil, errors.Join(fmt.Errorf("set throttles: %w", err), restore(context.WithoutCancel(ctx)))
	}
	return restore, nil
}

func alterOne(ctx context.Context, adm *kadm.Client, p prior, c kadm.AlterConfig) error {
	var (
		resp kadm.AlterConfigsResponses
		err  error
	)
	if p.broker {
		id, _ := strconv.Atoi(p.resource)
		resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{c}, int32(id))
	} else {
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{c}, p.resource)
	}
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = errWithMessage(r.Err, &r.ErrMessage)
			}
		}
	}
	if err != nil {
		what := "topic " + p.resource
		if p.broker {
			what = "broker " + p.resource
		}
		return fmt.Errorf("%s %s: %w", what, p.key, err)
	}
	return nil
}

// dynamicValue returns the value of key when it is set at the given dynamic source (not
// a default or a static config), else nil.
func dynamicValue(cfgs []kadm.Config, key string, source kmsg.ConfigSource) *string {
	for _, c := range cfgs {
		if c.Key == key && c.Source == source && c.Value != nil {
			v := *c.Value
			return &v
		}
	}
	return nil
}

// mergeReplicas renders "p:b,p:b" for the union of the entries in prev and ours; "*"
// (every replica) stays "*".
func mergeReplicas(prev *string, ours map[int32][]int32) string {
	set := map[string]bool{}
	if prev != nil {
		for _, e := range strings.Split(*prev, ",") {
			e = strings.TrimSpace(e)
			if e == "*" {
				return "*"
			}
			if e != "" {
				set[e] = true
			}
		}
	}
	for p, bs := range ours {
		for _, b := range bs {
			set[fmt.Sprintf("%d:%d", p, b)] = true
		}
	}
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func uniq(l []int32) []int32 {
	slices.Sort(l)
	return slices.Compact(l)
}

func contains(ids []int32, s string) bool {
	id, err := strconv.Atoi(s)
	return err == nil && slices.Contains(ids, int32(id))
}
