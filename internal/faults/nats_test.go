package faults_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/stack"
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
				// Its one copy killed, nothing would elect a leader: say so, and let the
				// operation end without the fault rather than leave it half done.
				t.Errorf("%s has %d replicas: the workers were to create it with 3 (nats.replicas unset, the server a cluster)", tc.asset, n)
			} else {
				leader := testenv.StreamLeader(t, r.js, tc.asset)
				env.KillNATSNode(t, leader)
				next := testenv.WaitStreamLeaderNot(t, r.js, tc.asset, leader)
				t.Logf("%s: leader %s killed mid-copy, %s leads", tc.asset, leader, next)
				env.StartNATSNode(t, leader)
			}

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

// A rolling restart of the three NATS nodes, one at a time (each stopped gracefully,
// started, and caught up before the next), during an alert storm: 10,000
// broker-overloaded alerts for one broker of the ZooKeeper-mode cluster, and a stream of
// preferred-leader events for the KRaft cluster published meanwhile. The broker is shed
// once (the first alert; every other one is a noop naming it); every event has exactly one
// stored result; the KRaft cluster's events ran one after the other in publish order and
// its leader is the last one asked for; nothing is lost or left.
func TestNATSRollingRestartDuringAStorm(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env)
	a, b := f.start("a"), f.start("b")
	defer a.stop()
	defer b.stop()
	storm := f.local.topic("storm", [][]int32{{2, 1, 3}, {2, 3, 4}, {2, 4, 1}, {1, 2, 3}}, 0, nil)
	order := f.kraft.topic("order", [][]int32{{1, 2, 3}, {2, 3, 1}}, 0, nil)

	const alerts, moves = 10_000, 30
	stormIDs := make([]string, alerts)
	stormBodies := make([][]byte, alerts)
	for i := range alerts {
		env := f.local.envelope(events.TypeBrokerOverloaded, map[string]any{"broker": 2, "topics": []string{storm}, "reason": "cpu 97%"})
		env.ID = fmt.Sprintf("%s-storm-%05d", f.local.alias, i)
		stormIDs[i], stormBodies[i] = env.ID, f.local.marshal(env)
	}
	stormSubject := events.Subject(f.local.alias, events.TypeBrokerOverloaded)

	// The storm: the first alert alone (it must act), then the rest from a few publishers;
	// the KRaft cluster's moves from one publisher, in order, meanwhile. Each publish is
	// retried with the same id until acknowledged: a node restarting may drop an
	// acknowledgement, and the stream stores an id once.
	f.local.publishAcked(stormSubject, stormIDs[0], stormBodies[0])
	var acked atomic.Int64 // storm alerts acknowledged so far
	published := make(chan struct{})
	var wg sync.WaitGroup
	next := make(chan int)
	for range 6 {
		wg.Go(func() {
			for i := range next {
				f.local.publishAcked(stormSubject, stormIDs[i], stormBodies[i])
				acked.Add(1)
			}
		})
	}
	go func() {
		for i := 1; i < alerts; i++ {
			next <- i
		}
		close(next)
	}()
	type move struct {
		id     string
		seq    uint64
		leader int
	}
	var moved []move
	wg.Go(func() {
		for i := range moves {
			leader := 1 + (i+1)%3
			env := f.kraft.envelope(events.TypeReplicaChangeRequested, map[string]any{"topic": order, "partitions": []int{0}, "preferred_leader": leader})
			seq := f.kraft.publishAcked(events.Subject(f.kraft.alias, events.TypeReplicaChangeRequested), env.ID, f.kraft.marshal(env))
			moved = append(moved, move{env.ID, seq, leader})
		}
	})
	go func() { wg.Wait(); close(published) }()

	// The restarts begin once the storm is under way, and the first begins while it is
	// still being published.
	testenv.Eventually(t, time.Minute, func() error {
		if n := acked.Load(); n < 500 {
			return fmt.Errorf("%d alerts published", n)
		}
		return nil
	})
	for i, n := range stack.NATSNodes() {
		at := acked.Load()
		if i == 0 && at >= alerts-1 {
			t.Fatalf("the storm was all published (%d alerts) before the first restart: nothing restarted during it", at)
		}
		env.RestartNATSNode(t, n.Name)
		for _, s := range []string{events.EventsStream, events.ResultsStream} {
			testenv.StreamLeader(t, f.local.js, s) // caught up before the next node goes
		}
		t.Logf("%s restarted (stopped when %d of %d alerts were published)", n.Name, at+1, alerts)
	}
	select {
	case <-published:
	case <-time.After(5 * time.Minute):
		t.Fatal("the events were not all published within 5 minutes")
	}
	for range alerts + moves {
		testenv.CountEvent()
	}

	all := append(slices.Clone(stormIDs), func() (ids []string) {
		for _, m := range moved {
			ids = append(ids, m.id)
		}
		return ids
	}()...)
	f.local.allStoredOnce(all, 5*time.Minute)
	got := f.local.storedResults(all)

	if res := got[stormIDs[0]]; res.Status != events.StatusSucceeded || len(res.Changes) == 0 {
		t.Fatalf("first alert: %s (%s), %d changes; want it to shed broker 2", res.Status, res.Error, len(res.Changes))
	}
	for _, id := range stormIDs[1:] {
		if res := got[id]; res.Status != events.StatusNoop || res.PreviousEvent != stormIDs[0] || len(res.Changes) != 0 {
			t.Fatalf("alert %s: %s (previous %q, %d changes, error %q); want a noop naming %s", id, res.Status,
				res.PreviousEvent, len(res.Changes), res.Error, stormIDs[0])
		}
	}
	f.local.shedFrom(storm, 2)

	slices.SortFunc(moved, func(x, y move) int { return int(x.seq) - int(y.seq) })
	var prev *events.Result
	for _, m := range moved {
		res := got[m.id]
		if res.Status != events.StatusSucceeded {
			t.Fatalf("move %s (leader %d): %s (%s)", m.id, m.leader, res.Status, res.Error)
		}
		if prev != nil && !res.StartedAt.After(prev.FinishedAt) {
			t.Errorf("%s started at %s, before %s (published before it) finished at %s", m.id,
				res.StartedAt.Format(time.StampMicro), prev.ID, prev.FinishedAt.Format(time.StampMicro))
		}
		prev = res
	}
	last := moved[len(moved)-1].leader
	testenv.Eventually(t, 30*time.Second, func() error {
		if p := f.kraft.partitions(order)[0]; p.Leader != int32(last) || p.Replicas[0] != int32(last) {
			return fmt.Errorf("%s: replicas %v, leader %d; the last event asked for %d", p.TopicPartition, p.Replicas, p.Leader, last)
		}
		return nil
	})
	for range alerts + moves {
		testenv.CountResult()
	}
	f.local.noLeftovers([]string{storm}, nil)
	f.kraft.noLeftovers([]string{order}, nil)
}

// A node of the NATS cluster is cut off (frozen with SIGSTOP: its connections stay open,
// it answers nothing) while the worker connected to it holds the lock of a throttled copy.
// The worker's renewals fail, so it stops counting on the lock and writes nothing more;
// its event goes to the other worker, on the majority, which finishes the operation from
// the journal. The frozen node, resumed, catches up; its stale view never makes a second
// holder.
func TestNATSNodeCutOffWhileHoldingTheLock(t *testing.T) {
	env := testenv.GetExclusive(t)
	env.LockBrokerThrottles(t)
	nodes := stack.NATSNodes()
	cut, rest := nodes[1], []string{nodes[0].URL, nodes[2].URL}
	r := newRig(t, env, "kraft")
	// The test itself talks to the majority: on the frozen node its subscription to the
	// result would hear nothing (its connection would not even find out for minutes).
	nc, err := nats.Connect(strings.Join(rest, ","), nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.nc, r.js = nc, testenv.JetStream(t, nc)
	topic := r.topic("rf", [][]int32{{1, 2}, {2, 3}}, 5_000_000, nil)
	before := r.partitions(topic)
	r.natsURL = cut.URL
	a := r.start("a")
	defer a.stop()
	id, ch := r.publish(events.TypeReplicaChangeRequested, map[string]any{"topic": topic, "replication_factor": 3,
		"throttle_bytes_per_sec": throttleRate})
	r.reassigning(topic, 90*time.Second)
	a.waitFor("lock acquired", 30*time.Second)
	r.natsURL = strings.Join(rest, ",")
	b := r.start("b")
	defer b.stop()

	env.PauseNATSNode(t, cut.Name)
	a.waitFor("lock lost: stop before the next write", 2*time.Minute)
	res := r.result(ch, 4*time.Minute)
	env.ResumeNATSNode(t, cut.Name)
	testenv.StreamLeader(t, r.js, events.EventsStream)

	stored := r.oneStored(id)
	if stored.Status != events.StatusSucceeded || res.Status != stored.Status {
		t.Fatalf("result %s (heard %s) by %s: %s; want succeeded", stored.Status, res.Status, stored.Worker, stored.Error)
	}
	r.outcome(stored, topic, before, grew(before), false)
	t.Logf("result %s by %s on attempt %d", stored.Status, stored.Worker, stored.Attempt)
	r.noLeftovers([]string{topic}, nil)
	checkNoOverlap(t, lockWindows(t, r.alias, a, b))
}

// publishAcked publishes an event with its id as Nats-Msg-Id until the stream
// acknowledges it, for up to a minute, and returns its stream sequence: a publish whose
// acknowledgement was lost while a node restarted is stored once all the same.
func (r *rig) publishAcked(subject, id string, body []byte) uint64 {
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		ack, err := r.js.Publish(r.t.Context(), subject, body, jetstream.WithMsgID(id))
		if err == nil {
			return ack.Sequence
		}
		last = err
		time.Sleep(100 * time.Millisecond) // a retry's pace, not a wait for a condition
	}
	r.t.Errorf("publish %s: not acknowledged within a minute: %v", id, last)
	return 0
}

// allStoredOnce waits until each event of ids has a result stored, and checks none has
// two.
func (r *rig) allStoredOnce(ids []string, timeout time.Duration) {
	r.t.Helper()
	testenv.Eventually(r.t, timeout, func() error {
		s, err := r.js.Stream(r.t.Context(), events.ResultsStream)
		if err != nil {
			return err
		}
		info, err := s.Info(r.t.Context(), jetstream.WithSubjectFilter(events.ResultsSubjectPrefix+".*"))
		if err != nil {
			return err
		}
		missing := 0
		for _, id := range ids {
			switch n := info.State.Subjects[events.ResultSubject(id)]; {
			case n > 1:
				r.t.Fatalf("%d results stored for event %s, want exactly 1", n, id)
			case n == 0:
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d events have no result stored yet", missing, len(ids))
		}
		return nil
	})
}

// storedResults reads the stored result of each event of ids.
func (r *rig) storedResults(ids []string) map[string]*events.Result {
	r.t.Helper()
	s, err := r.js.Stream(r.t.Context(), events.ResultsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	out := make(map[string]*events.Result, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range work {
				// Direct gets: the replica that answers may lag the leader a moment.
				var res *events.Result
				err := testenv.Poll(r.t, 10*time.Second, func() error {
					var err error
					if res, _, err = pipeline.ReadResult(r.t.Context(), s, id); err == nil && res == nil {
						err = fmt.Errorf("no result of %s read", id)
					}
					return err
				})
				if err != nil {
					r.t.Errorf("result of %s: %v", id, err)
					continue
				}
				mu.Lock()
				out[id] = res
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(out) != len(ids) {
		r.t.FailNow()
	}
	return out
}
