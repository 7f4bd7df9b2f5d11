package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// API keys kafkamender relies on.
const (
	keyElectLeaders               = 43 // ElectPreferredLeaders in 2.2–2.3, ElectLeaders from 2.4
	keyIncrementalAlterConfigs    = 44 // KIP-339, Kafka 2.3
	keyAlterPartitionReassignment = 45 // KIP-455, Kafka 2.4
	keyListPartitionReassignments = 46
	keyDescribeQuorum             = 55 // served by KRaft brokers only (KIP-595)
)

// Capabilities says which admin APIs every live broker of a cluster supports. Each path
// that has a choice consults one flag, so an old broker is never sent a request it lacks:
//
//	flag                      Kafka  without it
//	ElectLeaders              2.2    /admin/preferred_replica_election
//	AlterPartitionAssignment  2.4    /admin/reassign_partitions; a running reassignment cannot be cancelled
//	ListReassignments         2.4    /admin/reassign_partitions lists what runs
//	IncrementalAlterConfigs   2.3    throttles only through the config znodes (ChooseConfigs)
type Capabilities struct {
	ElectLeaders             bool // preferred elections through the API (2.2+)
	AlterPartitionAssignment bool // reorders, replica-set changes and cancels through the API (2.4+)
	ListReassignments        bool // ongoing reassignments through the API (2.4+)
	IncrementalAlterConfigs  bool // per-key config writes (2.3+)
	// KRaft: the brokers serve DescribeQuorum, which only KRaft brokers do: the
	// controller is a KRaft one (its preferred election falls back to any live in-sync
	// replica; a ZooKeeper controller's elects only the first replica).
	KRaft bool
}

// Probe asks every broker for its API versions. A capability holds only when all brokers
// have it: during a rolling upgrade the controller may be an old broker.
func Probe(ctx context.Context, cl *kgo.Client) (_ Capabilities, err error) {
	defer func() { err = classify(err) }()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return Capabilities{}, fmt.Errorf("api versions: %w", err)
	}
	c := Capabilities{ElectLeaders: true, AlterPartitionAssignment: true, ListReassignments: true, IncrementalAlterConfigs: true, KRaft: true}
	n := 0
	for _, v := range vs {
		if v.Err != nil {
			continue
		}
		n++
		has := func(key int16) bool { _, ok := v.KeyMaxVersion(key); return ok }
		c.ElectLeaders = c.ElectLeaders && has(keyElectLeaders)
		c.AlterPartitionAssignment = c.AlterPartitionAssignment && has(keyAlterPartitionReassignment)
		c.ListReassignments = c.ListReassignments && has(keyListPartitionReassignments)
		c.IncrementalAlterConfigs = c.IncrementalAlterConfigs && has(keyIncrementalAlterConfigs)
		c.KRaft = c.KRaft && has(keyDescribeQuorum)
	}
	if n == 0 {
		return Capabilities{}, fmt.Errorf("api versions: no broker answered")
	}
	return c, nil
}

// isUnsupported recognises franz-go's error for a request the broker cannot handle
// (unexported in kgo).
func isUnsupported(err error) bool {
	return err != nil && strings.Contains(err.Error(), "broker is too old")
}
