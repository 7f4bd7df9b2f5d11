package kafka

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Big requests go out in batches a controller accepts.
//
// A KRaft controller (3.x and 4.x alike) refuses to write more than
// QuorumController.MAX_RECORDS_PER_USER_OP = 10,000 metadata records for one request:
// ReplicationControlManager collects them in a BoundedList of that length. What happens
// past it differs by request (read in the 3.9 source, measured on the 4.1 `kraft` stack):
//
//   - ElectLeaders: the overflow escapes the request, and the whole request fails with
//     POLICY_VIOLATION "Unable to perform excessively large batch operation" (every
//     partition of the response carries it); nothing is elected.
//   - AlterPartitionReassignments (reorders, new replica sets, cancels): each partition is
//     tried on its own, so the first 10,000 that change something are written and every
//     later one fails with UNKNOWN_SERVER_ERROR: a silent half.
//   - CreateTopics: POLICY_VIOLATION "Request parameters do not satisfy the configured
//     policy".
//
// Each partition of these requests writes at most one record (a PartitionChangeRecord),
// so a request of at most 10,000 partitions always fits; DefaultBatchPartitions keeps half
// of that, for records a future controller may add per partition.
//
// A ZooKeeper-mode controller has no such cap on the API, but the admin znodes of the
// zk-reassign strategy (/admin/reassign_partitions, /admin/preferred_replica_election)
// are bounded by ZooKeeper's jute.maxbuffer (1 MiB less one byte by default, on the
// server and on the brokers' ZooKeeper client, which must read the znode back): the
// server refuses a larger request by closing the connection. Only one of each znode may exist at a time, so a big one is written in parts,
// each after the controller consumed (deleted) the one before. The controller before 2.4
// also rewrites /admin/reassign_partitions, shorter by one partition, each time a
// reassignment completes: smaller znodes also keep that quadratic rewrite small.

// DefaultBatchPartitions is the most partitions one request of a partition list carries
// (AlterPartitionReassignments, ElectLeaders, ListPartitionReassignments) and the most
// entries one admin znode lists: half a KRaft controller's cap of 10,000 records per
// request (QuorumController.MAX_RECORDS_PER_USER_OP in Kafka 3.x and 4.x).
const DefaultBatchPartitions = 5000

// DefaultZnodeBytes is the most bytes of data one admin znode write carries: ZooKeeper's
// default jute.maxbuffer (1 MiB less one byte, the bound of a whole request packet) less
// 100 KiB for the rest of the packet (the fenced transaction's lock check, the paths, the
// ACL) and for a server configured a little lower.
const DefaultZnodeBytes = 1<<20 - 100<<10

// Limits bounds the size of the requests and znode writes that carry partition lists.
// Zero or negative fields take the defaults. A value is copied into whatever uses it
// (APIBackend, ZKConfig), so it never changes under a running operation.
type Limits struct {
	// Partitions is the most partitions per request or admin znode. Default
	// DefaultBatchPartitions.
	Partitions int
	// ZnodeBytes is the most bytes of data per admin znode write. Default
	// DefaultZnodeBytes.
	ZnodeBytes int
}

func (l Limits) withDefaults() Limits {
	if l.Partitions <= 0 {
		l.Partitions = DefaultBatchPartitions
	}
	if l.ZnodeBytes <= 0 {
		l.ZnodeBytes = DefaultZnodeBytes
	}
	return l
}

// chunks splits items into consecutive runs of at most n (n < 1: one run), in order.
func chunks[T any](items []T, n int) [][]T {
	if len(items) == 0 {
		return nil
	}
	if n < 1 {
		n = len(items)
	}
	return slices.Collect(slices.Chunk(items, n))
}

// uniqueSorted returns tps sorted by topic and partition, each once.
func uniqueSorted(tps []TopicPartition) []TopicPartition {
	out := slices.Clone(tps)
	SortTopicPartitions(out)
	return slices.Compact(out)
}

// znodeBatch is one write of an admin znode: the partitions it lists and its data.
type znodeBatch struct {
	tps  []TopicPartition
	data []byte
}

// emptyAdminZnode is the length of {"version":1,"partitions":[]}.
var emptyAdminZnode = len(mustMarshal(reassignDoc{Version: 1, Partitions: []reassignPartDoc{}}))

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// splitAdminZnode splits the entries of an admin znode (version 1, as EncodeReassignZnode
// and EncodeElectionZnode render it) into documents of at most l.Partitions entries and
// l.ZnodeBytes bytes each, keeping their order. One entry too big for a znode alone is an
// error.
func splitAdminZnode(entries []reassignPartDoc, l Limits) ([]znodeBatch, error) {
	l = l.withDefaults()
	var out []znodeBatch
	var cur []reassignPartDoc
	size := emptyAdminZnode
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		data, err := json.Marshal(reassignDoc{Version: 1, Partitions: cur})
		if err != nil {
			return err
		}
		if len(data) != size || len(data) > l.ZnodeBytes {
			return fmt.Errorf("admin znode of %d partitions: %d bytes, counted %d (limit %d)", len(cur), len(data), size, l.ZnodeBytes)
		}
		b := znodeBatch{data: data}
		for _, e := range cur {
			b.tps = append(b.tps, TopicPartition{Topic: e.Topic, Partition: e.Partition})
		}
		out = append(out, b)
		cur, size = nil, emptyAdminZnode
		return nil
	}
	for _, e := range entries {
		n := len(mustMarshal(e))
		if emptyAdminZnode+n > l.ZnodeBytes {
			return nil, fmt.Errorf("%s-%d alone needs %d bytes in an admin znode, more than the %d allowed", e.Topic, e.Partition, emptyAdminZnode+n, l.ZnodeBytes)
		}
		sep := 0
		if len(cur) > 0 {
			sep = 1 // the comma
		}
		if len(cur) == l.Partitions || size+sep+n > l.ZnodeBytes {
			if err := flush(); err != nil {
				return nil, err
			}
			sep = 0
		}
		cur = append(cur, e)
		size += sep + n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}
