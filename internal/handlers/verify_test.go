package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// Verification never passes on state it did not read: when no read of the cluster
// succeeds, observe and report fail with a transient error and no partitions, and never
// hand back the plan as if the cluster showed it.
func TestVerifyWithoutAFreshReadFails(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTimeout(200*time.Millisecond),
		kgo.RetryTimeout(500*time.Millisecond), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := &Cluster{Name: "unreachable", Client: cl}
	planned := []plan.Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0},
		ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}, LeaderBefore: 1, LeaderAfter: 2}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	rd := c.reader(kafka.Capabilities{ListReassignments: true})
	now, err := observe(ctx, rd, planned, time.Second, nil, true)
	if err == nil || !retry.IsTransient(err) || now != nil {
		t.Fatalf("observe of an unreachable cluster = %v, %v; want no partitions and a transient error", now, err)
	}
	changes, err := report(ctx, rd, planned, time.Second, true)
	if err == nil || !retry.IsTransient(err) || changes != nil {
		t.Fatalf("report of an unreachable cluster = %v, %v; want no changes and a transient error", changes, err)
	}
}

// A rollback reads until what it put back shows: a lagging broker's read of the change
// just undone is read again (it would list as left a change no longer there), a
// partition not put back is not waited for, and the wait ends, the last read standing,
// after its time or half the time the rollback has left.
func TestObserveUndoneWaitsForWhatWasPutBack(t *testing.T) {
	tp := model.TopicPartition{Topic: "t", Partition: 0}
	ch := plan.Change{TopicPartition: tp, ReplicasBefore: []int32{1, 2, 3}, ReplicasAfter: []int32{2, 1, 3}, LeaderBefore: 1, LeaderAfter: 2}
	at := func(replicas []int32, leader int32) model.Partition {
		return model.Partition{TopicPartition: tp, Replicas: replicas, Leader: leader}
	}
	lagging, back := at([]int32{2, 1, 3}, 1), at([]int32{1, 2, 3}, 1)
	for _, tc := range []struct {
		name    string
		script  []model.Partition
		back    bool
		leaders bool
		wait    time.Duration
		budget  time.Duration // the rollback's time left (0: no deadline)
		changed bool          // the change listed from the last read
		reads   int           // at least
	}{
		{name: "a lagging read is read again", script: []model.Partition{lagging, lagging, back}, back: true, leaders: true, wait: 10 * time.Second, reads: 3},
		{name: "a leader not yet shown is read again", script: []model.Partition{at([]int32{1, 2, 3}, 2), back}, back: true, leaders: true, wait: 10 * time.Second, reads: 2},
		{name: "a partition not put back is read once", script: []model.Partition{lagging, back}, back: false, leaders: true, wait: 10 * time.Second, changed: true, reads: 1},
		{name: "the read stands after the wait", script: []model.Partition{lagging}, back: true, leaders: true, wait: 300 * time.Millisecond, changed: true, reads: 2},
		{name: "the wait is half the time left", script: []model.Partition{lagging}, back: true, leaders: true, wait: time.Hour, budget: 600 * time.Millisecond, changed: true, reads: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.budget > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.budget)
				defer cancel()
			}
			rd := &reads{script: tc.script}
			start := time.Now()
			back := map[model.TopicPartition]bool{}
			if tc.back {
				back[tp] = true
			}
			now, err := observeUndone(ctx, rd, []plan.Change{ch}, back, tc.wait, tc.leaders)
			if err != nil {
				t.Fatal(err)
			}
			if tc.budget > 0 && time.Since(start) >= tc.budget {
				t.Errorf("waited %v, the whole time the rollback had", time.Since(start))
			}
			if got := len(changedFrom([]plan.Change{ch}, now, tc.leaders)) > 0; got != tc.changed {
				t.Errorf("change listed: %v, want %v (read %+v)", got, tc.changed, now[tp])
			}
			if rd.n < tc.reads {
				t.Errorf("%d reads, want at least %d", rd.n, tc.reads)
			}
			if !tc.changed && rd.n > len(tc.script) {
				t.Errorf("%d reads after the put-back showed (script of %d)", rd.n, len(tc.script))
			}
		})
	}
}
