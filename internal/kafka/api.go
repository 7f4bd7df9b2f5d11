package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// APIBackend changes a cluster through the admin API (Kafka 2.4+, ZooKeeper mode or KRaft).
type APIBackend struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// NewAPIBackend returns the api strategy on a client of the cluster.
func NewAPIBackend(cl *kgo.Client) *APIBackend {
	return &APIBackend{cl: cl, adm: kadm.NewClient(cl)}
}

func (b *APIBackend) Strategy() Strategy       { return StrategyAPI }
func (b *APIBackend) ControllerFailover() bool { return false }

// Reorder sends one AlterPartitionReassignments request with the same replica sets in the
// new orders. On both controllers a pure reorder completes at once and moves no data; the
// leader stays where it is until an election. It returns once metadata shows every order.
func (b *APIBackend) Reorder(ctx context.Context, orders map[TopicPartition][]int32) error {
	if err := b.ReorderForElection(ctx, orders); err != nil {
		return err
	}
	return WaitForOrders(ctx, b.cl, orders)
}

// ReorderForElection is Reorder returning as soon as the controller lists none of the
// partitions as reassigning, before the brokers' metadata shows the new orders: the
// controller elects from its own state, so a preferred election may follow at once (on
// KRaft the metadata wait was most of a 1,000-partition demotion's cost beyond the bare
// requests). Whoever reads the cluster after it must wait for what it expects to show.
func (b *APIBackend) ReorderForElection(ctx context.Context, orders map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	if len(orders) == 0 {
		return nil
	}
	snap, err := ReadSnapshot(ctx, b.cl, topicsOf(orders)...)
	if err != nil {
		return err
	}
	var busy []string
	for _, tp := range sortedKeys(orders) {
		p, ok := snap.Partition(tp)
		if !ok {
			return fmt.Errorf("reorder %s: %w", tp, kerr.UnknownTopicOrPartition)
		}
		if err := checkPermutation(tp, p.Replicas, orders[tp]); err != nil {
			return err
		}
		if p.Reassigning() {
			busy = append(busy, fmt.Sprintf("%s (%s)", tp, p.Reassignment()))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("reorder: %w: %s", ErrReassignmentInProgress, strings.Join(busy, ", "))
	}
	// The same replica sets in a new order: the reassignments complete at once.
	if err := SubmitReassignment(ctx, b.cl, orders); err != nil {
		return fmt.Errorf("reorder: %w", err)
	}
	return waitControllerDone(ctx, b.cl, orders)
}

// waitControllerDone asks the controller (ListPartitionReassignments, answered by it or
// forwarded to it) until it lists none of the partitions of orders as reassigning.
func waitControllerDone(ctx context.Context, cl *kgo.Client, orders map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	byTopic := map[string][]int32{}
	for tp := range orders {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = topic, byTopic[topic]
		req.Topics = append(req.Topics, rt)
	}
	for i := 0; ; i++ {
		listed, err := listReassignments(ctx, cl, req)
		if err == nil && len(listed) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("wait for the controller to finish the reorders: %w (last answer: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("wait for the controller to finish the reorders: %w: %d partitions still reassigning", ctx.Err(), len(listed))
		case <-time.After(PollDelay(i)):
		}
	}
}

// PollDelay is the wait before poll i+1 of a condition the cluster reaches soon after a
// request: 20 ms, doubling to at most 200 ms. Short at first, since a reorder or an
// election shows within tens of milliseconds on a healthy cluster; longer after, to spare
// a slow one.
func PollDelay(i int) time.Duration {
	return min(20*time.Millisecond<<min(i, 4), 200*time.Millisecond)
}

// WaitForOrders polls metadata until every partition lists its replicas in the given order
// and no reassignment of them is in progress, or ctx ends.
func WaitForOrders(ctx context.Context, cl *kgo.Client, orders map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	var pending []string
	for i := 0; ; i++ {
		snap, err := ReadSnapshot(ctx, cl, topicsOf(orders)...)
		if err == nil {
			pending = pending[:0]
			for _, tp := range sortedKeys(orders) {
				p, ok := snap.Partition(tp)
				if !ok || !slices.Equal(p.Replicas, orders[tp]) || p.Reassigning() {
					pending = append(pending, fmt.Sprintf("%s has %v, want %v", tp, p.Replicas, orders[tp]))
				}
			}
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("wait for new replica orders: %w (last read: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("wait for new replica orders: %w: %s", ctx.Err(), strings.Join(pending, "; "))
		case <-time.After(PollDelay(i)):
		}
	}
}

// ElectPreferred sends one ElectLeaders(PREFERRED) request for all partitions.
func (b *APIBackend) ElectPreferred(ctx context.Context, tps []TopicPartition) (map[TopicPartition]error, error) {
	return electViaAPI(ctx, b.adm, tps)
}

func electViaAPI(ctx context.Context, adm *kadm.Client, tps []TopicPartition) (_ map[TopicPartition]error, err error) {
	defer func() { err = classify(err) }()
	if len(tps) == 0 {
		return nil, ErrEmptyElection
	}
	set := kadm.TopicsSet{}
	for _, tp := range tps {
		set.Add(tp.Topic, tp.Partition)
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return nil, fmt.Errorf("elect preferred leaders: %w", err)
	}
	out := make(map[TopicPartition]error, len(tps))
	for _, tp := range tps {
		r, ok := res[tp.Topic][tp.Partition]
		switch {
		case !ok:
			out[tp] = fmt.Errorf("elect %s: no result in the response", tp)
		case r.Err == nil, errors.Is(r.Err, kerr.ElectionNotNeeded):
			out[tp] = nil
		case errors.Is(r.Err, kerr.PreferredLeaderNotAvailable):
			out[tp] = fmt.Errorf("elect %s: %w", tp, ErrPreferredNotAvailable)
		default:
			out[tp] = fmt.Errorf("elect %s: %w", tp, errWithMessage(r.Err, &r.ErrMessage))
		}
	}
	return classifyEach(out), nil
}

func topicsOf[V any](m map[TopicPartition]V) []string {
	seen := map[string]bool{}
	var out []string
	for tp := range m {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[TopicPartition]V) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	SortTopicPartitions(out)
	return out
}
