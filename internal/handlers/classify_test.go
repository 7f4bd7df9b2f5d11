package handlers

import (
	"testing"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
)

// Where each planned partition of a replication-factor change stands, from a read of a
// cluster before Kafka 2.4 (reassignments from /admin/reassign_partitions: Target) and of
// one with the API (Adding, Removing). Before 2.4 the metadata shows a raise's target
// replicas from its start: only the znode says it runs. A reassignment is ours when the
// journal lists it as submitted and it goes to the planned replicas.
func TestClassifyLegacyAndAPI(t *testing.T) {
	tp := func(p int32) model.TopicPartition { return model.TopicPartition{Topic: "orders", Partition: p} }
	raise := func(p int32) plan.Change {
		return plan.Change{TopicPartition: tp(p), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3}}
	}
	trim := plan.Change{TopicPartition: tp(7), ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{1, 2}}
	e := &journal.Entry{
		Changes:       []plan.Change{raise(0), raise(1), raise(2), raise(3), raise(4), raise(5), raise(6), trim},
		Reassignments: []model.TopicPartition{tp(0), tp(1), tp(3), tp(5), tp(7)},
	}
	part := func(p int32, replicas []int32, isr []int32) model.Partition {
		return model.Partition{TopicPartition: tp(p), Replicas: replicas, ISR: isr, Leader: 1}
	}
	legacy := func(p model.Partition, target []int32) model.Partition {
		p.Target = target
		for _, r := range p.Replicas {
			if !contains(target, r) {
				p.Removing = append(p.Removing, r)
			}
		}
		return p
	}
	snap := &model.Snapshot{Topics: map[string][]model.Partition{"orders": {
		legacy(part(0, []int32{1, 2, 3}, []int32{1, 2}), []int32{1, 2, 3}),                                     // ours, copying: metadata shows the target already
		part(1, []int32{1, 2, 3}, []int32{1, 2, 3}),                                                            // ours, gone from the znode: done
		legacy(part(2, []int32{1, 2, 3}, []int32{1, 2}), []int32{1, 2, 3}),                                     // not submitted by us: someone else's
		legacy(part(3, []int32{1, 2, 4}, []int32{1, 2}), []int32{1, 2, 4}),                                     // submitted, but to other replicas: someone else's
		part(4, []int32{1, 2}, []int32{1, 2}),                                                                  // not submitted yet
		{TopicPartition: tp(5), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1, Adding: []int32{3}}, // ours, through the API
		part(6, []int32{2, 3}, []int32{2, 3}),                                                                  // changed by someone else
		legacy(part(7, []int32{1, 2, 3}, []int32{1, 2, 3}), []int32{1, 2}),                                     // our trim, running
	}}}
	st := classify(snap, e, nil)
	names := func(chs []plan.Change) []string { return tpsOf(chs) }
	skips := map[string]plan.SkipCode{}
	for _, s := range st.skips {
		skips[s.TopicPartition.String()] = s.Code
	}
	if got := names(st.running); len(got) != 3 || got[0] != "orders-0" || got[1] != "orders-5" || got[2] != "orders-7" {
		t.Errorf("running %v, want orders-0, orders-5, orders-7", got)
	}
	if got := names(st.done); len(got) != 1 || got[0] != "orders-1" {
		t.Errorf("done %v, want orders-1", got)
	}
	if got := names(st.waiting); len(got) != 1 || got[0] != "orders-4" {
		t.Errorf("waiting %v, want orders-4", got)
	}
	want := map[string]plan.SkipCode{"orders-2": plan.SkipReassigning, "orders-3": plan.SkipReassigning, "orders-6": SkipChanged}
	if len(skips) != len(want) {
		t.Errorf("skips %v, want %v", skips, want)
	}
	for k, code := range want {
		if skips[k] != code {
			t.Errorf("%s skipped %q, want %q", k, skips[k], code)
		}
	}
}

func contains(l []int32, x int32) bool {
	for _, v := range l {
		if v == x {
			return true
		}
	}
	return false
}
