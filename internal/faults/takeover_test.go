package faults_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A takeover across events. Worker a is killed with SIGKILL in the middle of E1's
// throttled replication-factor raise (its journal entry open, the copy running), and E1's
// message is then deleted from the events stream, as an operator purging it or the
// max-deliveries backstop would: no redelivery of E1 ever comes. E2, for the same
// cluster, is published and a fresh worker b started. Holding the cluster's lock for E2, b
// finds E1's operation in the journal, finishes it and stores its result (once, true to
// what the cluster shows), and only then runs E2; nothing of ours is left. On both lock
// backends: the ZooKeeper-mode cluster's lock is in ZooKeeper, the KRaft cluster's in NATS.
func TestTakeoverFinishesAnotherEventsOperation(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, cluster := range []string{"local", "kraft"} {
		t.Run(cluster, func(t *testing.T) {
			r := newRig(t, env, cluster)
			// 3 MB a partition: the copy bursts about 1.5 MB before the throttle bites, so it
			// is usually still running when b takes it over.
			rfTopic := r.topic("rf", [][]int32{{1, 2}, {2, 3}}, 3_000_000, nil)
			plTopic := r.topic("pl", [][]int32{{1, 2, 3}}, 0, nil)
			rfBefore, plBefore := r.partitions(rfTopic), r.partitions(plTopic)

			a := r.start("a", operation.StepCopying)
			e1 := r.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": rfTopic, "replication_factor": 3,
				"throttle_bytes_per_sec": throttleRate})
			a.waitPaused(operation.StepCopying, 90*time.Second)
			a.kill()
			rec, err := journal.New(r.js).Get(t.Context(), r.alias)
			if err != nil || rec == nil || !rec.Open() || rec.Event != e1.id {
				t.Fatalf("journal after worker a was killed: %+v (%v); want E1's operation open", rec, err)
			}
			if ongoing, err := r.env.Reader(t, r.real, r.cl).Reassignments(t.Context(), []string{rfTopic}); err == nil {
				t.Logf("E1's reassignments still running when its worker was killed: %d", len(ongoing))
			}
			r.deleteEvent(e1.seq)

			e2 := r.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": plTopic, "preferred_leader": 2})
			r.start("b")
			got1, got2 := r.result(e1.ch, 3*time.Minute), r.result(e2.ch, 3*time.Minute)
			s1, seq1 := r.storedSeq(e1.id)
			s2, seq2 := r.storedSeq(e2.id)
			for _, c := range []struct {
				name           string
				got, stored    *events.Result
				changes        int
				wantMinAttempt int
			}{
				// E1 was delivered once, to a: b finished it on a later attempt than a's.
				{"E1", got1, s1, len(rfBefore), 2},
				{"E2", got2, s2, 1, 1},
			} {
				if c.stored.Status != events.StatusSucceeded || len(c.stored.Changes) != c.changes {
					t.Errorf("%s: result %s (%q) with %d changes; want succeeded with %d", c.name, c.stored.Status, c.stored.Error, len(c.stored.Changes), c.changes)
				}
				if c.stored.Worker != "b" || c.stored.Attempt < c.wantMinAttempt {
					t.Errorf("%s: result stored by worker %s on attempt %d; want worker b (which handled E2), attempt %d or later",
						c.name, c.stored.Worker, c.stored.Attempt, c.wantMinAttempt)
				}
				if c.got.Status != c.stored.Status || c.got.Worker != c.stored.Worker {
					t.Errorf("%s: received %s by %s, stored %s by %s", c.name, c.got.Status, c.got.Worker, c.stored.Status, c.stored.Worker)
				}
				if d := testenv.DiffChanges(c.got.Changes, c.stored.Changes); d != "" {
					t.Errorf("%s: the result received is not the one stored:\n%s", c.name, d)
				}
			}
			if seq1 > seq2 {
				t.Errorf("E2's result was stored (sequence %d) before E1's (sequence %d): E1's operation must be finished first", seq2, seq1)
			}
			r.outcome(s1, rfTopic, rfBefore, grew(rfBefore), false)
			r.outcome(s2, plTopic, plBefore, func(p model.Partition) bool { return p.Replicas[0] == 2 && p.Leader == 2 }, true)
			r.noLeftovers([]string{rfTopic, plTopic}, nil)
		})
	}
}

// deleteEvent deletes the event stored at seq from the events stream, as an operator
// would: a consumer never delivers it again.
func (r *rig) deleteEvent(seq uint64) {
	r.t.Helper()
	s, err := r.js.Stream(r.t.Context(), events.EventsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := s.DeleteMsg(r.t.Context(), seq); err != nil {
		r.t.Fatalf("delete event at sequence %d: %v", seq, err)
	}
	// Direct gets: a replica that has not applied the deletion yet still has the message.
	testenv.Eventually(r.t, 10*time.Second, func() error {
		if _, err := s.GetMsg(r.t.Context(), seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("event at sequence %d after its deletion: %v; want not found", seq, err)
		}
		return nil
	})
}

// storedSeq is oneStored, with the result's sequence in the results stream.
func (r *rig) storedSeq(id string) (*events.Result, uint64) {
	r.t.Helper()
	res := r.oneStored(id)
	s, err := r.js.Stream(r.t.Context(), events.ResultsStream)
	if err != nil {
		r.t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(r.t.Context(), events.ResultSubject(id))
	if err != nil {
		r.t.Fatal(err)
	}
	return res, msg.Sequence
}
