package faults_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A node of the NATS cluster is killed (kill -9) in the middle of a throttled
// replication-factor copy that two workers drive: the node leading the events stream, the
// one leading the journal's bucket, the one leading the lock bucket. The leader's stream
// elects another, the workers go on through the other nodes, and the node comes back. The
// event gets exactly one result, true of the cluster: the copy completed, or it was rolled
// back; nothing of ours is left (throttle, reassignment, journal entry, lock); and no two
// workers ever counted on the cluster's lock at once (their lock windows, from their logs).
func TestNATSNodeLostDuringTheCopy(t *testing.T) {
	for _, tc := range []struct{ name, asset string }{
		{"events stream", events.EventsStream},
		{"journal bucket", "KV_" + events.JournalBucket},
		{"lock bucket", "KV_" + lockBucket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.GetExclusive(t)
			env.LockBrokerThrottles(t)
			r := newRig(t, env, "kraft") // its lock is in NATS: the lock bucket is in play
			topic := r.topic("rf", [][]int32{{1, 2}, {2, 3}}, 5_000_000, nil)
			before := r.partitions(topic)
			a, b := r.start("a"), r.start("b")
			defer a.stop()
			defer b.stop()
			id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
				"throttle_bytes_per_sec": throttleRate})
			r.reassigning(topic, 90*time.Second)

			if n := r.replicasOf(tc.asset); n != 3 {
				t.Errorf("%s has %d replicas: the workers were to create it with 3 (nats.replicas unset, the server a cluster)", tc.asset, n)
			}
			leader := testenv.StreamLeader(t, r.js, tc.asset)
			env.KillNATSNode(t, leader)
			next := testenv.WaitStreamLeaderNot(t, r.js, tc.asset, leader)
			t.Logf("%s: leader %s killed mid-copy, %s leads", tc.asset, leader, next)
			env.StartNATSNode(t, leader)

			res := r.result(ch, 4*time.Minute)
			stored := r.oneStored(id)
			if res.Status != stored.Status {
				t.Errorf("result heard %s, stored %s", res.Status, stored.Status)
			}
			switch stored.Status {
			case events.StatusSucceeded:
				r.outcome(stored, topic, before, grew(before), false)
			case events.StatusFailed:
				// Rolled back: the cluster is as before, and the result says so.
				r.outcome(stored, topic, before, func(model.Partition) bool { return false }, false)
			default:
				t.Fatalf("result %s (%s): want succeeded, or failed and rolled back", stored.Status, stored.Error)
			}
			t.Logf("result %s by %s on attempt %d", stored.Status, stored.Worker, stored.Attempt)
			r.noLeftovers([]string{topic}, nil)
			ws := lockWindows(t, r.alias, a, b)
			if len(ws) == 0 {
				t.Fatal("no lock window in the workers' logs: the check of holders sees nothing")
			}
			checkNoOverlap(t, ws)
		})
	}
}

// reassigning waits until a reassignment of topic is in progress: the copy runs.
func (r *rig) reassigning(topic string, timeout time.Duration) {
	r.t.Helper()
	testenv.Eventually(r.t, timeout, func() error {
		set := kadm.TopicsSet{}
		for _, p := range r.partitions(topic) {
			set.Add(topic, p.Partition)
		}
		rs, err := r.adm.ListPartitionReassignments(r.t.Context(), set)
		if err != nil {
			return err
		}
		if len(rs[topic]) > 0 {
			return nil
		}
		return fmt.Errorf("no reassignment of %s in progress yet", topic)
	})
}

// replicasOf is the replica count of a stream (KV_<bucket> for a bucket).
func (r *rig) replicasOf(stream string) int {
	r.t.Helper()
	s, err := r.js.Stream(r.t.Context(), stream)
	if err != nil {
		r.t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().Config.Replicas
}

// window is the time a worker counted on a cluster's lock: from the moment before its
// claim was sent (acquired_at) to the moment it stopped counting on it (stopped_at of its
// release, or of its loss: the validity of its last renewal).
type window struct {
	worker, event string
	from, to      time.Time // to is zero while the worker never said it stopped
}

func (w window) String() string {
	to := "never said it stopped"
	if !w.to.IsZero() {
		to = w.to.Format("15:04:05.000000")
	}
	return fmt.Sprintf("%s (event %s) %s → %s", w.worker, w.event, w.from.Format("15:04:05.000000"), to)
}

// lockWindows reads the windows in which each worker held the NATS key-value lock of
// cluster, from the lines the lock logs ("lock acquired" with acquired_at, "lock released"
// or "lock lost" with stopped_at).
func lockWindows(t *testing.T, cluster string, procs ...*proc) []window {
	t.Helper()
	var out []window
	for _, p := range procs {
		var open *window
		for line := range strings.Lines(p.out.String()) {
			var msg string
			switch {
			case strings.Contains(line, "\tlock acquired\t"):
				msg = "acquired"
			case strings.Contains(line, "\tlock released\t"), strings.Contains(line, "\tlock lost: stop before the next write\t"):
				msg = "stopped"
			default:
				continue
			}
			var f struct {
				Cluster    string `json:"cluster"`
				Event      string `json:"event"`
				AcquiredAt string `json:"acquired_at"`
				StoppedAt  string `json:"stopped_at"`
			}
			i := strings.IndexByte(line, '{')
			if i < 0 || json.Unmarshal([]byte(line[i:]), &f) != nil {
				t.Fatalf("worker %s: a lock line without its fields: %s", p.name, line)
			}
			if f.Cluster != cluster {
				continue
			}
			switch msg {
			case "acquired":
				if open != nil {
					t.Fatalf("worker %s acquired the lock of %s again without saying it stopped counting on it: %s", p.name, cluster, open)
				}
				from, err := time.Parse(time.RFC3339Nano, f.AcquiredAt)
				if err != nil {
					t.Fatalf("worker %s: acquired_at %q: %v", p.name, f.AcquiredAt, err)
				}
				open = &window{worker: p.name, event: f.Event, from: from}
			case "stopped":
				to, err := time.Parse(time.RFC3339Nano, f.StoppedAt)
				if err != nil {
					t.Fatalf("worker %s: stopped_at %q: %v", p.name, f.StoppedAt, err)
				}
				if open == nil {
					t.Fatalf("worker %s stopped counting on a lock of %s it had not acquired: %s", p.name, cluster, line)
				}
				open.to = to
				out = append(out, *open)
				open = nil
			}
		}
		if open != nil {
			out = append(out, *open)
		}
	}
	slices.SortFunc(out, func(a, b window) int { return a.from.Compare(b.from) })
	return out
}

// checkNoOverlap fails the test if two windows overlap: two holders at once.
func checkNoOverlap(t *testing.T, ws []window) {
	t.Helper()
	var lines []string
	for i, w := range ws {
		lines = append(lines, w.String())
		if i == 0 {
			continue
		}
		prev := ws[i-1]
		if prev.to.IsZero() || w.from.Before(prev.to) {
			t.Errorf("two holders of the lock at once:\n  %s\n  %s", prev, w)
		}
	}
	t.Logf("lock windows (%d), none overlapping:\n  %s", len(ws), strings.Join(lines, "\n  "))
}
