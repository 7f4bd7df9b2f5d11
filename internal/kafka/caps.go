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
	keyAlterPartitionReassignment = 45 // KIP-455, Kafka 2.4
	keyListPartitionReassignments = 46
)

// Capabilities says which admin APIs every live broker of a cluster supports.
type Capabilities struct {
	ElectLeaders             bool // preferred elections through the API (2.2+)
	AlterPartitionAssignment bool // reorders and replica-set changes through the API (2.4+)
	ListReassignments        bool
}

// Probe asks every broker for its API versions. A capability holds only when all brokers
// have it: during a rolling upgrade the controller may be an old broker.
func Probe(ctx context.Context, cl *kgo.Client) (_ Capabilities, err error) {
	defer func() { err = classify(err) }()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return Capabilities{}, fmt.Errorf("api versions: %w", err)
	}
	c := Capabilities{ElectLeaders: true, AlterPartitionAssignment: true, ListReassignments: true}
	n := 0
	for _, v := range vs {
		if v.Err != nil {
			continue
		}
		n++
		_, ok := v.KeyMaxVersion(keyElectLeaders)
		c.ElectLeaders = c.ElectLeaders && ok
		_, ok = v.KeyMaxVersion(keyAlterPartitionReassignment)
		c.AlterPartitionAssignment = c.AlterPartitionAssignment && ok
		_, ok = v.KeyMaxVersion(keyListPartitionReassignments)
		c.ListReassignments = c.ListReassignments && ok
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
