// Package model is the placement model kafkamender plans over and journals: partitions,
// brokers, a snapshot of them, and the progress records of a zk-nudge reorder. Plain data
// with no I/O: the planner (package plan) and the journal link no Kafka or ZooKeeper client
// through it; package kafka reads a cluster into it.
package model

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kafkamender/kafkamender/internal/events"
)

// TopicPartition names one partition (package events: it is part of the result format).
type TopicPartition = events.TopicPartition

// SortTopicPartitions sorts by topic, then partition.
func SortTopicPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// Partition is what the cluster says of one partition.
type Partition struct {
	TopicPartition
	Replicas    []int32 // assigned replicas, in order: the head is the preferred leader
	ISR         []int32
	Offline     []int32
	Leader      int32 // -1 when none
	LeaderEpoch int32
	// Adding and Removing are set while a reassignment of the partition is in progress.
	Adding, Removing []int32
	// Target is set, before Kafka 2.4, while /admin/reassign_partitions lists the
	// partition: the replicas its reassignment goes to. Such a controller shows the union
	// of the target and the replicas before in Replicas from the start, and does not say
	// which replicas it adds: Adding stays empty, Removing is Replicas minus Target.
	Target []int32
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p Partition) Reassigning() bool {
	return len(p.Adding) > 0 || len(p.Removing) > 0 || p.Target != nil
}

// ReassigningTo is the replica set an ongoing reassignment of the partition goes to: its
// Target, or (Kafka 2.4+) its replicas and those it is adding, but those it is removing;
// nil when none runs. (The replicas include those being added, except in a read whose
// metadata lags the controller's list of reassignments, right after one starts.)
func (p Partition) ReassigningTo() []int32 {
	if p.Target != nil || !p.Reassigning() {
		return p.Target
	}
	to := slices.Clone(p.Replicas)
	for _, b := range p.Adding {
		if !slices.Contains(to, b) {
			to = append(to, b)
		}
	}
	return Minus(to, p.Removing)
}

// Reassignment describes the partition's ongoing reassignment, for messages: "adding [3],
// removing []" (Kafka 2.4+), or "to [1 2 3], removing [] (/admin/reassign_partitions)".
func (p Partition) Reassignment() string {
	if p.Target != nil {
		return fmt.Sprintf("to %v, removing %v (/admin/reassign_partitions)", p.Target, p.Removing)
	}
	return fmt.Sprintf("adding %v, removing %v", p.Adding, p.Removing)
}

// InSync reports whether broker b is in the partition's ISR.
func (p Partition) InSync(b int32) bool { return slices.Contains(p.ISR, b) }

// Broker is a live broker.
type Broker struct {
	ID   int32
	Rack string
}

// Snapshot is the placement state of some topics of a cluster at one moment.
type Snapshot struct {
	Controller int32
	Brokers    map[int32]Broker
	// Topics maps each described topic to its partitions, indexed by partition number.
	Topics map[string][]Partition
	// Missing lists requested topics the cluster does not have, with the reason (marked
	// transient when Kafka calls it retriable: metadata may lag behind a new topic).
	Missing map[string]error
}

// Partition returns the partition, if the snapshot has it.
func (s *Snapshot) Partition(tp TopicPartition) (Partition, bool) {
	ps, ok := s.Topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(ps) {
		return Partition{}, false
	}
	return ps[tp.Partition], true
}

// Minus returns the brokers of a that are not in b, in a's order.
func Minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// NudgeState is the progress of one event's zk-nudge reorder, kept in the operation
// journal so that a retry or another worker never fails the controller over twice for the
// same event and can put the topic znodes back.
type NudgeState struct {
	// Znodes are the topic znodes rewritten (or about to be), with their data before and
	// after, and the version our write gave them (0 until written).
	Znodes []NudgeZnode `json:"znodes"`
	// ControllerEpoch is /controller_epoch before the failover.
	ControllerEpoch int64 `json:"controller_epoch_before"`
	// FailoverStarted is recorded just before /controller is deleted: from then on this
	// event never deletes it again.
	FailoverStarted bool `json:"failover_started"`
	// Restored is set once the znodes were put back (the order was not applied).
	Restored bool `json:"restored,omitempty"`
}

// NudgeZnode is one topic znode of a zk-nudge reorder.
type NudgeZnode struct {
	Path    string `json:"path"`
	Before  string `json:"before"`
	After   string `json:"after"`
	Version int32  `json:"version"` // the znode's version after our write; 0: not written yet
}

// Seen is a partition as a fresh read showed it after an operation changed it: the
// operation journal keeps what each operation left (its verification read), so that the
// next operation of the cluster, whichever worker runs it, plans from a read at least as
// new (brokers' metadata lag the controller by up to seconds after a change).
type Seen struct {
	TopicPartition
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	// Before is the partition's replicas before the operation changed it.
	Before []int32 `json:"before,omitempty"`
}

// SeenOf is p, as an operation that found it with replicas before left it.
func SeenOf(p Partition, before []int32) Seen {
	return Seen{TopicPartition: p.TopicPartition, Replicas: slices.Clone(p.Replicas), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		Before: slices.Clone(before)}
}

// Older reports whether p, as a read shows it, is older than what s saw: a lower leader
// epoch, or the same epoch and the replicas from before the change (a reorder, or a
// replica added, that no leader change followed does not bump the leader epoch on a
// KRaft cluster). Any other state at the same epoch is newer: a change made since, by the
// next operation or by someone else.
func (s Seen) Older(p Partition) bool {
	if p.LeaderEpoch != s.LeaderEpoch {
		return p.LeaderEpoch < s.LeaderEpoch
	}
	return s.Before != nil && slices.Equal(p.Replicas, s.Before) && !slices.Equal(s.Before, s.Replicas)
}
