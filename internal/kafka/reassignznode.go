package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/go-zookeeper/zk"
)

// ZKReader is what reading znodes needs of a ZooKeeper connection (*zk.Conn has it).
type ZKReader interface {
	Get(path string) ([]byte, *zk.Stat, error)
}

// reassignDoc is /admin/reassign_partitions and /admin/preferred_replica_election as Kafka
// writes and reads them (version 1; an election lists no replicas).
type reassignDoc struct {
	Version    int               `json:"version"`
	Partitions []reassignPartDoc `json:"partitions"`
}

type reassignPartDoc struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"`
}

// EncodeReassignZnode renders /admin/reassign_partitions for targets, the target replica
// list of each partition: {"version":1,"partitions":[{"topic":…,"partition":…,"replicas":[…]}]},
// in (topic, partition) order.
func EncodeReassignZnode(targets map[TopicPartition][]int32) ([]byte, error) {
	entries, err := reassignEntries(targets)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reassignDoc{Version: 1, Partitions: entries})
}

// reassignEntries lists targets as /admin/reassign_partitions entries, in (topic,
// partition) order.
func reassignEntries(targets map[TopicPartition][]int32) ([]reassignPartDoc, error) {
	if len(targets) == 0 {
		return nil, errors.New("encode /admin/reassign_partitions: no partitions (the controller would do nothing)")
	}
	var out []reassignPartDoc
	for _, tp := range sortedKeys(targets) {
		if len(targets[tp]) == 0 {
			return nil, fmt.Errorf("encode /admin/reassign_partitions: %s: no replicas", tp)
		}
		out = append(out, reassignPartDoc{Topic: tp.Topic, Partition: tp.Partition, Replicas: targets[tp]})
	}
	return out, nil
}

// EncodeElectionZnode renders /admin/preferred_replica_election for tps, never empty (an
// empty list would elect every partition of the cluster): {"version":1,"partitions":[{"topic":…,"partition":…}]}.
func EncodeElectionZnode(tps []TopicPartition) ([]byte, error) {
	entries, err := electionEntries(tps)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reassignDoc{Version: 1, Partitions: entries})
}

// electionEntries lists tps as /admin/preferred_replica_election entries, in (topic,
// partition) order, each once.
func electionEntries(tps []TopicPartition) ([]reassignPartDoc, error) {
	if len(tps) == 0 {
		return nil, ErrEmptyElection
	}
	var out []reassignPartDoc
	for _, tp := range uniqueSorted(tps) {
		out = append(out, reassignPartDoc{Topic: tp.Topic, Partition: tp.Partition})
	}
	return out, nil
}

// DecodeReassignZnode reads /admin/reassign_partitions as a controller before Kafka 2.4 (and
// every tool that writes it) has it: each listed partition with its target replicas. The
// controller deletes a partition from it when its reassignment completes, and the znode
// when none is left. Fields it does not know (log_dirs, written by some tools) are
// ignored, as the controller ignores them; a partition listed twice, or without a topic
// or replicas, is an error.
func DecodeReassignZnode(data []byte) (map[TopicPartition][]int32, error) {
	var doc struct {
		Version    *int `json:"version"`
		Partitions *[]struct {
			Topic     *string  `json:"topic"`
			Partition *int32   `json:"partition"`
			Replicas  *[]int32 `json:"replicas"`
		} `json:"partitions"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", truncate(data, 200), err)
	}
	if doc.Version == nil || *doc.Version != 1 {
		return nil, fmt.Errorf("decode %s: version %v, want 1", truncate(data, 200), deref(doc.Version))
	}
	if doc.Partitions == nil {
		return nil, fmt.Errorf("decode %s: no partitions array", truncate(data, 200))
	}
	out := make(map[TopicPartition][]int32, len(*doc.Partitions))
	for i, p := range *doc.Partitions {
		switch {
		case p.Topic == nil || *p.Topic == "":
			return nil, fmt.Errorf("decode %s: entry %d has no topic", truncate(data, 200), i)
		case p.Partition == nil || *p.Partition < 0:
			return nil, fmt.Errorf("decode %s: entry %d has no partition", truncate(data, 200), i)
		case p.Replicas == nil || len(*p.Replicas) == 0:
			return nil, fmt.Errorf("decode %s: entry %d has no replicas", truncate(data, 200), i)
		}
		tp := TopicPartition{Topic: *p.Topic, Partition: *p.Partition}
		if _, dup := out[tp]; dup {
			return nil, fmt.Errorf("decode %s: %s is listed twice", truncate(data, 200), tp)
		}
		out[tp] = slices.Clone(*p.Replicas)
	}
	return out, nil
}

func deref(v *int) any {
	if v == nil {
		return "missing"
	}
	return *v
}

// ReassignPath is /admin/reassign_partitions under chroot.
func ReassignPath(chroot string) string {
	return path.Join("/", chroot, "admin", "reassign_partitions")
}

// ReadZKReassignments reads /admin/reassign_partitions: the reassignments a controller
// carries out from it, each partition's target replicas; empty when the znode does not
// exist (none runs).
func ReadZKReassignments(conn ZKReader, chroot string) (_ map[TopicPartition][]int32, err error) {
	defer func() { err = classify(err) }()
	p := ReassignPath(chroot)
	data, _, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return map[TopicPartition][]int32{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	out, err := DecodeReassignZnode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return out, nil
}
