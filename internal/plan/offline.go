package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
)

// Skip codes of partition-offline.
const (
	// SkipHasLeader: the partition was led again before its election was sent.
	SkipHasLeader SkipCode = "has_leader"
	// SkipNoLiveReplica: no replica of the partition is alive: nothing can lead it until a
	// broker holding it returns.
	SkipNoLiveReplica SkipCode = "no_live_replica"
	// SkipUncleanNotAllowed: only an unclean election could bring the partition back, and
	// the event, the configuration or the cluster does not allow it (or the last ISR is
	// unknown, so that no election can be known to be clean).
	SkipUncleanNotAllowed SkipCode = "unclean_not_allowed"
	// SkipCleanNotPossible: a replica of the last ISR is alive, but a ZooKeeper controller's
	// preferred election elects only the first replica.
	SkipCleanNotPossible SkipCode = "clean_election_not_possible"
)

// OfflineRequest asks for leaders for the partitions without one: of Topic (every topic
// when empty), of its Partitions (all when nil).
type OfflineRequest struct {
	Topic      string
	Partitions []int32
	// Unclean says whether an unclean election may be made: the event and the
	// configuration allow it. UncleanUnsupported, when set, says why the cluster cannot
	// make one (Kafka before 2.4).
	Unclean            bool
	UncleanUnsupported string
	// ZKController: the cluster's controller is a ZooKeeper one, whose preferred election
	// elects only the first replica (a KRaft one falls back to any live in-sync replica).
	ZKController bool
	Protected    Protected
	// LastISR reads the last ISR of a partition whose metadata shows none (Kafka before 2.4
	// answers an empty ISR for a partition without a leader).
	LastISR func(model.TopicPartition) ([]int32, error)
	// LogEnd reads the log end offset of broker b's replica of a partition.
	LogEnd func(b int32, tp model.TopicPartition) (int64, error)
}

// OfflinePlan is an Offline plan: Plan, and the skips that refuse the event when nothing
// else is to be done.
type OfflinePlan struct {
	Plan
	// Refused are the skips (SkipUncleanNotAllowed) of partitions only an unclean election
	// not allowed could bring back: with no change planned, the event is rejected with them.
	Refused []Skip
}

// Offline plans an election for each partition without a leader that the request selects.
//
//   - A replica of the last ISR is alive: a clean election (Change.LeaderAfter is the first
//     live one in replica order, which a KRaft controller's preferred election picks; a
//     ZooKeeper controller's picks only the first replica: SkipCleanNotPossible when it is
//     not that one).
//   - None is, another replica is: with req.Unclean (and the cluster able to), an unclean
//     election of the first live replica in replica order (Kafka's choice), with
//     Change.LostOffsets from its log end offset, to the last ISR's largest log end offset
//     read (nil when none can be read); else SkipUncleanNotAllowed naming the last ISR, the
//     live candidates and their log end offsets. A candidate whose log end offset cannot be
//     read is not elected (the offsets at risk would be unknown).
//   - No replica is alive: SkipNoLiveReplica.
//   - The last ISR cannot be read: SkipUncleanNotAllowed.
//   - A protected topic: SkipProtected.
//
// A partition of req.Topic with a leader is Noop. Every change keeps the replicas;
// LeaderBefore is -1. Rejected: req.Topic does not exist, or a named partition does not.
func Offline(s *model.Snapshot, req OfflineRequest) (OfflinePlan, error) {
	var out OfflinePlan
	if req.Topic != "" {
		ps, ok := s.Topics[req.Topic]
		if !ok {
			return out, reject("topic %q does not exist", req.Topic)
		}
		for _, n := range req.Partitions {
			if n < 0 || int(n) >= len(ps) {
				return out, reject("topic %q has no partition %d (it has %d)", req.Topic, n, len(ps))
			}
		}
	}
	topics := slices.Sorted(maps.Keys(s.Topics))
	if req.Topic != "" {
		topics = []string{req.Topic}
	}
	for _, topic := range topics {
		for _, p := range s.Topics[topic] {
			if req.Partitions != nil && !slices.Contains(req.Partitions, p.Partition) {
				continue
			}
			if p.Leader >= 0 {
				if req.Topic != "" {
					out.Noop = append(out.Noop, p.TopicPartition)
				}
				continue
			}
			if pattern, ok := req.Protected.match(topic); ok {
				out.Skipped = append(out.Skipped, protectedSkip(p.TopicPartition, pattern))
				continue
			}
			ch, skip := offlineOne(s, req, p)
			switch {
			case skip == nil:
				out.Changes = append(out.Changes, ch)
			case skip.Code == SkipUncleanNotAllowed:
				out.Refused = append(out.Refused, *skip)
				out.Skipped = append(out.Skipped, *skip)
			default:
				out.Skipped = append(out.Skipped, *skip)
			}
		}
	}
	return out, nil
}

func offlineOne(s *model.Snapshot, req OfflineRequest, p model.Partition) (Change, *Skip) {
	live := func(b int32) bool { _, ok := s.Brokers[b]; return ok }
	ch := Change{TopicPartition: p.TopicPartition, ReplicasBefore: slices.Clone(p.Replicas), ReplicasAfter: slices.Clone(p.Replicas), LeaderBefore: -1}
	skip := func(code SkipCode, format string, args ...any) (Change, *Skip) {
		return ch, &Skip{TopicPartition: p.TopicPartition, Code: code, Reason: fmt.Sprintf(format, args...)}
	}
	isr := p.ISR
	if len(isr) == 0 {
		var err error
		if req.LastISR == nil {
			return skip(SkipUncleanNotAllowed, "the last ISR is unknown: without it no election can be known to be clean, so none is made")
		}
		if isr, err = req.LastISR(p.TopicPartition); err != nil {
			return skip(SkipUncleanNotAllowed, "the last ISR is unknown (%v): without it no election can be known to be clean, so none is made", err)
		}
	}
	var liveISR, others []int32
	for _, b := range p.Replicas {
		switch {
		case !live(b):
		case slices.Contains(isr, b):
			liveISR = append(liveISR, b)
		default:
			others = append(others, b)
		}
	}
	switch {
	case len(liveISR) > 0 && req.ZKController && p.Replicas[0] != liveISR[0]:
		return skip(SkipCleanNotPossible, "in-sync replica %d is alive, but a ZooKeeper controller's preferred election elects only the first replica (%d, replicas %v); the controller elects %d itself when it next handles the partition (a broker change or a controller failover), or send allow_unclean: Kafka's unclean election still prefers a live in-sync replica",
			liveISR[0], p.Replicas[0], p.Replicas, liveISR[0])
	case len(liveISR) > 0:
		ch.LeaderAfter = liveISR[0]
		ch.Note = fmt.Sprintf("clean election: %d was in the last ISR %v", liveISR[0], isr)
		return ch, nil
	case len(others) == 0:
		return skip(SkipNoLiveReplica, "no replica is alive (replicas %v, last ISR %v): it comes back with one of its brokers", p.Replicas, isr)
	}
	type candidate struct {
		broker int32
		leo    int64
		err    error
	}
	cands := make([]candidate, len(others))
	names := make([]string, len(others))
	for i, b := range others {
		c := candidate{broker: b, err: fmt.Errorf("not read")}
		if req.LogEnd != nil {
			c.leo, c.err = req.LogEnd(b, p.TopicPartition)
		}
		cands[i] = c
		if c.err != nil {
			names[i] = fmt.Sprintf("%d (log end offset unknown: %v)", b, c.err)
		} else {
			names[i] = fmt.Sprintf("%d (log end offset %d)", b, c.leo)
		}
	}
	what := fmt.Sprintf("last ISR %v (none alive), live candidates %s", isr, strings.Join(names, ", "))
	switch {
	case !req.Unclean:
		return skip(SkipUncleanNotAllowed, "%s", what)
	case req.UncleanUnsupported != "":
		return skip(SkipUncleanNotAllowed, "%s; %s", what, req.UncleanUnsupported)
	case cands[0].err != nil:
		return skip(SkipUncleanNotAllowed, "%s: the offsets at risk cannot be known, so no unclean election is made", what)
	}
	leader := cands[0] // the controller elects the first live replica in replica order
	ch.LeaderAfter = leader.broker
	lost := &events.OffsetRange{From: leader.leo}
	for _, b := range isr {
		if live(b) || req.LogEnd == nil {
			continue
		}
		if leo, err := req.LogEnd(b, p.TopicPartition); err == nil && leo > leader.leo && (lost.To == nil || leo > *lost.To) {
			lost.To = &leo
		}
	}
	ch.LostOffsets = lost
	ch.Note = fmt.Sprintf("unclean election: %s; %d becomes the leader with its log ending at offset %d, and the records the last ISR held from offset %d on are lost",
		what, leader.broker, leader.leo, leader.leo)
	if lost.To == nil {
		ch.Note += " (how many cannot be read while the last ISR is down)"
	}
	return ch, nil
}
