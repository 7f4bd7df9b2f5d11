package events

import (
	"fmt"
	"slices"
)

// The types of a result's lists, part of the wire contract. Packages kafka and plan use
// them under their own names (type aliases), so that this package, and what links only
// it (the emitter), needs no Kafka or ZooKeeper client.

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Change is one partition's planned (or made) change of assigned replicas and leader.
type Change struct {
	TopicPartition
	ReplicasBefore []int32 `json:"replicas_before"`
	ReplicasAfter  []int32 `json:"replicas_after"`
	LeaderBefore   int32   `json:"leader_before"`
	LeaderAfter    int32   `json:"leader_after"`

	// Log-dir moves (logdir-move-requested) only: the replica of Broker moves from the log
	// directory DirBefore to DirAfter; Bytes is its size when planned. The replica list
	// and the leader do not change.
	Broker    *int32 `json:"broker,omitempty"`
	DirBefore string `json:"dir_before,omitempty"`
	DirAfter  string `json:"dir_after,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`

	// Note explains something about this change in words, e.g. why a replaced broker's
	// partition now spans fewer racks (broker-failed, broker-drain).
	Note string `json:"note,omitempty"`

	// LostOffsets, set by an unclean election (partition-offline with allow_unclean), are
	// the offsets it put at risk.
	LostOffsets *OffsetRange `json:"lost_offsets,omitempty"`
}

// OffsetRange is the offsets an unclean election put at risk: from the new leader's log
// end offset (the first offset whose record the new leader lacks) to the log end offset of
// the last in-sync replica when it could be read (absent: it could not be read, e.g. the
// broker is down; every record it held from From on is lost).
type OffsetRange struct {
	From int64  `json:"from"`
	To   *int64 `json:"to,omitempty"`
}

// Reordered reports whether the change reorders the replicas (else it only elects).
func (c Change) Reordered() bool { return !slices.Equal(c.ReplicasBefore, c.ReplicasAfter) }

// Skip is a partition left alone, with the reason.
type Skip struct {
	TopicPartition
	Reason string `json:"reason"`
	// Code classifies the reason (for metrics and scripts).
	Code SkipCode `json:"code,omitempty"`
}

// SkipCode classifies why a partition was left alone (the codes are listed in package
// plan and in docs/contract.md).
type SkipCode string

// ThrottleKey is one dynamic config that a throttle sets. It is plain data: the caller
// writes the keys of a plan to its durable journal before applying them, so that a worker
// that dies mid-copy can still restore them.
type ThrottleKey struct {
	Entity string  `json:"entity"` // "broker" or "topic"
	Name   string  `json:"name"`   // broker id ("3") or topic name
	Key    string  `json:"key"`    // e.g. leader.replication.throttled.rate
	Before *string `json:"before"` // the dynamic value before we set ours; nil: none was set
	Ours   string  `json:"ours"`   // the value we set
}

func (k ThrottleKey) String() string { return fmt.Sprintf("%s %s %s", k.Entity, k.Name, k.Key) }

// KeptThrottle is a key found holding someone else's value (neither Before nor Ours when
// applying; not Ours when restoring): left as it was.
type KeptThrottle struct {
	ThrottleKey
	Current *string `json:"current"` // what it held when we looked; nil: unset
}
