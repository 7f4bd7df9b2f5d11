package faults_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// heldBy waits until a worker holds event id for its paused cluster: its progress says
// so (paused).
func (r *rig) heldBy(id string, timeout time.Duration) {
	r.t.Helper()
	ch := make(chan events.Progress, 16)
	sub, err := r.nc.Subscribe(events.ProgressSubject(id), func(m *nats.Msg) {
		var p events.Progress
		if json.Unmarshal(m.Data, &p) == nil && p.Paused != "" {
			select {
			case ch <- p:
			default:
			}
		}
	})
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	select {
	case <-ch:
	case <-time.After(timeout):
		r.t.Fatalf("event %s not held within %s", id, timeout)
	}
}

// A worker holding a paused cluster's event is killed (kill -9) twice, each time a new
// worker holds the event again after the ack wait; on resume it runs once, and the held
// deliveries were not attempts: it runs on attempt 1 although it was delivered three
// times, with max_attempts 2.
func TestKillWhileHoldingAPausedEvent(t *testing.T) {
	env := testenv.Get(t)
	r := newRig(t, env, "kraft")
	r.maxAttempts = 2
	topic := r.topic("held", [][]int32{{1, 2, 3}}, 0, nil)
	w := r.start("a")
	_, pch := r.publish(events.TypeClusterPause, map[string]any{"reason": "faults: hands off"})
	if res := r.result(pch, time.Minute); res.Status != events.StatusSucceeded {
		t.Fatalf("pause: %s (%q)", res.Status, res.Error)
	}
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "partitions": []int{0}, "preferred_leader": 3})
	for i, next := range []string{"b", "c"} {
		r.heldBy(id, 2*time.Minute)
		w.kill()
		w = r.start(next)
		if i == 1 {
			r.heldBy(id, 2*time.Minute)
		}
	}
	select {
	case res := <-ch:
		t.Fatalf("the held event got a result while its cluster was paused: %s (%q)", res.Status, res.Error)
	default:
	}
	_, rch := r.publish(events.TypeClusterResume, map[string]any{"reason": "faults: go on"})
	if res := r.result(rch, time.Minute); res.Status != events.StatusSucceeded {
		t.Fatalf("resume: %s (%q)", res.Status, res.Error)
	}
	res := r.result(ch, 2*time.Minute)
	stored := r.oneStored(id)
	if stored.Status != events.StatusSucceeded || res.Status != stored.Status || stored.Worker != "c" || stored.Attempt != 1 {
		t.Fatalf("held event: received %s, stored %s by %s on attempt %d (%q); want succeeded by c on attempt 1",
			res.Status, stored.Status, stored.Worker, stored.Attempt, stored.Error)
	}
	if p := r.partitions(topic)[0]; p.Leader != 3 {
		t.Errorf("%s: leader %d, want 3", fmt.Sprint(p.TopicPartition), p.Leader)
	}
	r.noLeftovers([]string{topic}, nil)
}
