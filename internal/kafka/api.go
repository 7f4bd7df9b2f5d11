package kafka

import (
	"context"
	"errors"
	"fmt"
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
// Every request that carries a partition list goes out in batches (Limits).
type APIBackend struct {
	cl     *kgo.Client
	adm    *kadm.Client
	limits Limits
}

// NewAPIBackend returns the api strategy on a client of the cluster, with the default
// Limits.
func NewAPIBackend(cl *kgo.Client) *APIBackend {
	return NewAPIBackendWithLimits(cl, Limits{})
}

// NewAPIBackendWithLimits returns the api strategy on a client of the cluster, sending at
// most limits.Partitions partitions per request.
func NewAPIBackendWithLimits(cl *kgo.Client, limits Limits) *APIBackend {
	return &APIBackend{cl: cl, adm: controllerAdmin(cl), limits: limits.withDefaults()}
}

func (b *APIBackend) Strategy() Strategy       { return StrategyAPI }
func (b *APIBackend) ControllerFailover() bool { return false }

// Reorder sends AlterPartitionReassignments with the same replica sets in the new orders
// (in requests of at most Limits.Partitions partitions). On both controllers a pure reorder completes at once and moves no data; the
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
	return b.ReorderForElectionFrom(ctx, snap, orders)
}

// ReorderForElectionFrom is ReorderForElection checking the orders against snap, a read
// of the partitions the caller has just made (under the cluster's lock), instead of
// reading them again: each order must be a permutation of the replicas snap shows, and
// no partition under reassignment.
func (b *APIBackend) ReorderForElectionFrom(ctx context.Context, snap *Snapshot, orders map[TopicPartition][]int32) (err error) {
	defer func() { err = classify(err) }()
	if len(orders) == 0 {
		return nil
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
	if err := b.limits.SubmitReassignment(ctx, b.cl, orders); err != nil {
		return fmt.Errorf("reorder: %w", err)
	}
	return waitControllerDone(ctx, b.cl, sortedKeys(orders), b.limits.Partitions)
}

// waitControllerDone asks the controller (ListPartitionReassignments, answered by it or
// forwarded to it, in requests of at most n partitions) until it lists none of tps as
// reassigning.
func waitControllerDone(ctx context.Context, cl *kgo.Client, tps []TopicPartition, n int) (err error) {
	defer func() { err = classify(err) }()
	var reqs []*kmsg.ListPartitionReassignmentsRequest
	for _, batch := range chunks(tps, n) {
		reqs = append(reqs, listRequest(batch))
	}
	for i := 0; ; i++ {
		var listed map[TopicPartition]Reassignment
		for _, req := range reqs {
			if listed, err = listReassignments(ctx, cl, req); err != nil || len(listed) > 0 {
				break // not done: ask again after a pause
			}
		}
		if err == nil && len(listed) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("wait for the controller to finish the reorders: %w (last answer: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("wait for the controller to finish the reorders: %w: %d partitions still reassigning (%s first)", ctx.Err(), len(listed), sortedKeys(listed)[0])
		case <-time.After(PollDelay(i)):
		}
	}
}

// PollDelay is the wait before poll i+1 of a condition the cluster reaches soon after a
// request: 5 ms, doubling to at most 200 ms. Short at first, since a reorder or an
// election shows within milliseconds on a healthy cluster (the bench's traces: a KRaft
// broker's metadata showed an election's leader 5 to 7 ms after the controller's answer,
// so a first pause of 20 ms cost a one-partition change a quarter of its time); longer
// after, to spare a slow one. A small read polled twice more is the whole price.
func PollDelay(i int) time.Duration {
	return min(5*time.Millisecond<<min(i, 6), 200*time.Millisecond)
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
			if err != nil && len(pending) > 0 {
				return fmt.Errorf("wait for new replica orders: %w (last read: %v; the one before: %s)", ctx.Err(), err, strings.Join(pending, "; "))
			}
			if err != nil {
				return fmt.Errorf("wait for new replica orders: %w (last read: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("wait for new replica orders: %w: %s", ctx.Err(), strings.Join(pending, "; "))
		case <-time.After(PollDelay(i)):
		}
	}
}

// ElectPreferred sends ElectLeaders(PREFERRED) for the partitions, in requests of at most
// Limits.Partitions partitions, and merges their answers.
func (b *APIBackend) ElectPreferred(ctx context.Context, tps []TopicPartition) (map[TopicPartition]error, error) {
	return electViaAPI(ctx, b.adm, tps, b.limits.Partitions)
}

// electViaAPI elects the preferred leaders of tps in requests of at most n partitions
// each, in (topic, partition) order. The first request that fails as a whole ends it with
// that error and no result (the requests before it ran: their partitions answer
// ELECTION_NOT_NEEDED when tried again).
func electViaAPI(ctx context.Context, adm *kadm.Client, tps []TopicPartition, n int) (_ map[TopicPartition]error, err error) {
	defer func() { err = classify(err) }()
	if len(tps) == 0 {
		return nil, ErrEmptyElection
	}
	out := make(map[TopicPartition]error, len(tps))
	batches := chunks(uniqueSorted(tps), n)
	for i, batch := range batches {
		set := kadm.TopicsSet{}
		for _, tp := range batch {
			set.Add(tp.Topic, tp.Partition)
		}
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			if len(batches) > 1 {
				return nil, fmt.Errorf("elect preferred leaders (request %d of %d, %d partitions each at most): %w", i+1, len(batches), n, err)
			}
			return nil, fmt.Errorf("elect preferred leaders: %w", err)
		}
		for _, tp := range batch {
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
