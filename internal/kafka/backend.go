package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// Strategy names a backend.
type Strategy string

const (
	StrategyAuto       Strategy = "auto"
	StrategyAPI        Strategy = "api"
	StrategyZKReassign Strategy = "zk-reassign"
	StrategyZKNudge    Strategy = "zk-nudge"
)

// Strategies lists the valid strategy names.
var Strategies = []Strategy{StrategyAuto, StrategyAPI, StrategyZKReassign, StrategyZKNudge}

// ParseStrategy checks a strategy name; "" means auto.
func ParseStrategy(s string) (Strategy, error) {
	if s == "" {
		return StrategyAuto, nil
	}
	if slices.Contains(Strategies, Strategy(s)) {
		return Strategy(s), nil
	}
	names := make([]string, len(Strategies))
	for i, st := range Strategies {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown strategy %q (want %s)", s, strings.Join(names, ", "))
}

// Reorderer applies new orders of partitions' replica lists (the same set of brokers) and
// runs preferred-leader elections. It is what the preferred-leader and broker-overloaded
// handlers need of a backend.
type Reorderer interface {
	Strategy() Strategy
	// Reorder stores the new replica order of each partition and returns once the cluster
	// reports it. Every order must be a permutation of the partition's current replicas.
	Reorder(ctx context.Context, orders map[TopicPartition][]int32) error
	// ElectPreferred runs one preferred-leader election for the partitions (never empty)
	// and returns the per-partition outcome: nil for elected or already leading.
	ElectPreferred(ctx context.Context, tps []TopicPartition) (map[TopicPartition]error, error)
	// ControllerFailover reports whether the backend forced a controller failover.
	ControllerFailover() bool
}

// ElectionReorderer is a Reorderer that can return as soon as the controller has the new
// orders (APIBackend), before the brokers' metadata shows them; ReorderForElectionFrom
// checks the orders against a read the caller has just made instead of reading again.
type ElectionReorderer interface {
	ReorderForElection(ctx context.Context, orders map[TopicPartition][]int32) error
	ReorderForElectionFrom(ctx context.Context, snap *Snapshot, orders map[TopicPartition][]int32) error
}

var _ ElectionReorderer = (*APIBackend)(nil)

var (
	_ Reorderer = (*APIBackend)(nil)
	_ Reorderer = (*ZKBackend)(nil)
)

// Errors callers classify. Transient ones are worth retrying later; they carry the marker
// package retry looks for (see classify).
var (
	// ErrEmptyElection: an election with no partitions would elect every partition.
	ErrEmptyElection = errors.New("refusing a preferred election with no partitions: Kafka would elect every partition in the cluster")
	// ErrReassignmentInProgress: another reassignment blocks ours (transient: it carries
	// package retry's marker).
	ErrReassignmentInProgress error = retry.Transient(errors.New("a partition reassignment is in progress"))
	// ErrKRaftController: /controller says a KRaft controller owns the cluster (migration);
	// the ZooKeeper paths must not be used.
	ErrKRaftController = errors.New("a KRaft controller owns this cluster (ZooKeeper migration): ZooKeeper strategies are refused")
	// ErrNotReorder: an order that is not a permutation of the current replicas.
	ErrNotReorder = errors.New("not a reorder of the current replicas")
	// ErrPreferredNotAvailable: the preferred leader is not alive or not in the ISR.
	ErrPreferredNotAvailable = errors.New("preferred leader not available (not alive or not in the ISR)")
	// ErrUnsupported: the cluster lacks what the strategy needs.
	ErrUnsupported = errors.New("not supported by this cluster")
)

// checkPermutation verifies that order has the same brokers as current, once each.
func checkPermutation(tp TopicPartition, current, order []int32) error {
	a, b := slices.Clone(current), slices.Clone(order)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) || len(slices.Compact(b)) != len(order) {
		return fmt.Errorf("%s: %v -> %v: %w", tp, current, order, ErrNotReorder)
	}
	return nil
}

// Choose resolves auto: api when every broker supports AlterPartitionReassignments, else
// zk-reassign (which needs the cluster's ZooKeeper). An explicit choice is checked against
// what the cluster can do.
func Choose(want Strategy, caps Capabilities, hasZooKeeper bool) (Strategy, error) {
	switch want {
	case StrategyAuto, "":
		if caps.AlterPartitionAssignment {
			return StrategyAPI, nil
		}
		if hasZooKeeper {
			return StrategyZKReassign, nil
		}
		return "", fmt.Errorf("cluster has no AlterPartitionReassignments (Kafka < 2.4) and no zookeeper is configured: %w", ErrUnsupported)
	case StrategyAPI:
		if !caps.AlterPartitionAssignment {
			return "", fmt.Errorf("strategy api needs AlterPartitionReassignments (Kafka 2.4+): %w", ErrUnsupported)
		}
		return want, nil
	case StrategyZKReassign, StrategyZKNudge:
		if !hasZooKeeper {
			return "", fmt.Errorf("strategy %s needs the cluster's zookeeper in the config: %w", want, ErrUnsupported)
		}
		return want, nil
	}
	return "", fmt.Errorf("unknown strategy %q", want)
}
