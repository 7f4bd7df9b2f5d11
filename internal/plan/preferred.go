package plan

import (
	"fmt"
	"slices"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
)

// Change, Skip and SkipCode are the result's types (package events, the wire contract).
type (
	Change   = events.Change
	Skip     = events.Skip
	SkipCode = events.SkipCode
)

const (
	SkipNotReplica     SkipCode = "not_a_replica"
	SkipNotInSync      SkipCode = "not_in_sync"
	SkipNoCandidate    SkipCode = "no_in_sync_candidate"
	SkipReassigning    SkipCode = "under_reassignment"
	SkipCapped         SkipCode = "max_partitions"
	SkipElectionFailed SkipCode = "election_failed"
	SkipUnverified     SkipCode = "unverified"
	// SkipProtected: the partition's topic is protected (guardrails.protected_topics) and
	// the operation would otherwise have changed it.
	SkipProtected SkipCode = "protected"
)

// SkipCodes lists every code the planners and the verification give skipped partitions.
func SkipCodes() []SkipCode {
	return []SkipCode{SkipNotReplica, SkipNotInSync, SkipNoCandidate, SkipReassigning, SkipCapped,
		SkipElectionFailed, SkipUnverified, SkipNoLeader, SkipProtected, SkipNoSpare,
		SkipHasLeader, SkipNoLiveReplica, SkipUncleanNotAllowed, SkipCleanNotPossible}
}

// Protected reports whether a topic is protected by a guardrail
// (guardrails.protected_topics), and the pattern that protects it. The planners that pick
// partitions themselves never plan a change of a protected topic's partition: they skip
// it (SkipProtected) where they would otherwise have changed it. A nil Protected protects
// nothing.
type Protected func(topic string) (pattern string, ok bool)

// match is p(topic), or nothing when p is nil.
func (p Protected) match(topic string) (string, bool) {
	if p == nil {
		return "", false
	}
	return p(topic)
}

// protectedSkip is the skip of tp, whose topic pattern protects.
func protectedSkip(tp model.TopicPartition, pattern string) Skip {
	return Skip{TopicPartition: tp, Code: SkipProtected,
		Reason: fmt.Sprintf("topic %q is protected: it matches %q (guardrails.protected_topics)", tp.Topic, pattern)}
}

// Plan is what to do for one request.
type Plan struct {
	Changes []Change `json:"changes"`
	// Noop lists partitions already as asked.
	Noop []model.TopicPartition `json:"noop,omitempty"`
	// Skipped lists partitions that cannot be changed now, with the reason.
	Skipped []Skip `json:"skipped,omitempty"`
	// Blocked lists partitions under reassignment, or (preferred-leader changes) without a
	// leader: the caller waits and plans again.
	Blocked []model.TopicPartition `json:"blocked,omitempty"`
}

// Reorders returns the new orders of the changes that reorder replicas.
func (p Plan) Reorders() map[model.TopicPartition][]int32 {
	out := map[model.TopicPartition][]int32{}
	for _, c := range p.Changes {
		if c.Reordered() {
			out[c.TopicPartition] = c.ReplicasAfter
		}
	}
	return out
}

// Elections lists the partitions whose preferred leader must be elected.
func (p Plan) Elections() []model.TopicPartition {
	out := make([]model.TopicPartition, 0, len(p.Changes))
	for _, c := range p.Changes {
		if c.LeaderBefore != c.LeaderAfter {
			out = append(out, c.TopicPartition)
		}
	}
	return out
}

// RejectError is a request that cannot be planned at all: nothing may be changed.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return e.Reason }

// Rejection marks the error as a rejection of the request: nothing was changed (see
// operation.IsRejection).
func (e *RejectError) Rejection() bool { return true }

func reject(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}

// PreferredLeaderRequest asks for Broker to be the preferred leader (head of the assigned
// replicas) and the leader of Topic's Partitions, or of every partition of Topic that has
// Broker as a replica when Partitions is nil.
type PreferredLeaderRequest struct {
	Topic      string
	Partitions []int32
	Broker     int32
}

// PreferredLeader plans a preferred-leader change: swap the broker with the head of the
// assigned replicas (positions swap, as the seeds do: [0,1,2] → [2,1,0]), then elect.
//
//   - a partition the request names that does not exist, or that does not have the
//     broker as a replica: the whole request is rejected;
//   - the broker already heads the replicas and leads: noop;
//   - the broker is not in the ISR (a preferred election would fail): blocked, whether it
//     is up and catching up or down (restarting, or a whole cluster coming back: its
//     brokers register one by one); the caller skips it after its wait;
//   - the partition is being reassigned, or has no leader (offline: its replicas are
//     down, or the cluster is coming back): blocked (wait and plan again);
//   - the broker heads the replicas but does not lead: an election only.
func PreferredLeader(s *model.Snapshot, req PreferredLeaderRequest) (Plan, error) {
	if err, ok := s.Missing[req.Topic]; ok {
		return Plan{}, reject("topic %q does not exist (%v)", req.Topic, err)
	}
	parts, ok := s.Topics[req.Topic]
	if !ok {
		return Plan{}, reject("topic %q was not read", req.Topic)
	}
	var plan Plan
	relevant := 0 // partitions that have the broker as a replica
	named := req.Partitions != nil
	ids := req.Partitions
	if !named {
		ids = make([]int32, len(parts))
		for i := range parts {
			ids[i] = int32(i)
		}
	} else {
		ids = slices.Clone(ids)
		slices.Sort(ids)
		if d := slices.Compact(ids); len(d) != len(req.Partitions) {
			return Plan{}, reject("partitions %v lists a partition twice", req.Partitions)
		}
	}
	for _, id := range ids {
		if id < 0 || int(id) >= len(parts) {
			return Plan{}, reject("partition %d of topic %q does not exist (the topic has %d partitions)", id, req.Topic, len(parts))
		}
		p := parts[id]
		if !slices.Contains(p.Replicas, req.Broker) {
			if named {
				return Plan{}, reject("broker %d is not a replica of %s (replicas %v)", req.Broker, p.TopicPartition, p.Replicas)
			}
			plan.Skipped = append(plan.Skipped, Skip{TopicPartition: p.TopicPartition, Reason: fmt.Sprintf("broker %d is not a replica (replicas %v)", req.Broker, p.Replicas), Code: SkipNotReplica})
			continue
		}
		relevant++
		switch {
		case p.Replicas[0] == req.Broker && p.Leader == req.Broker:
			plan.Noop = append(plan.Noop, p.TopicPartition)
		case p.Reassigning(), p.Leader < 0:
			plan.Blocked = append(plan.Blocked, p.TopicPartition)
		case !p.InSync(req.Broker):
			// Behind, or down: a broker, or a whole cluster, restarting comes back within
			// the wait, as an offline partition's leader does. One gone for good is
			// skipped after it.
			plan.Blocked = append(plan.Blocked, p.TopicPartition)
		default:
			after := slices.Clone(p.Replicas)
			i := slices.Index(after, req.Broker)
			after[0], after[i] = after[i], after[0]
			plan.Changes = append(plan.Changes, Change{
				TopicPartition: p.TopicPartition, ReplicasBefore: slices.Clone(p.Replicas), ReplicasAfter: after,
				LeaderBefore: p.Leader, LeaderAfter: req.Broker,
			})
		}
	}
	if relevant == 0 {
		return Plan{}, reject("broker %d is not a replica of any partition of topic %q", req.Broker, req.Topic)
	}
	return plan, nil
}
