package operation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/operation/operationtest"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// The crash-safety matrix of the engine, on fakes (a cluster in memory, the journal in
// memory, results, locks): every event ends with exactly one true result, and nothing of
// ours is left, whatever step a worker dies at or fails at.

// outcome is what a delivery came to, as the pipeline would settle it.
type outcome struct {
	res      *events.Result // the stored result, once there is one
	err      error
	crashed  bool
	inFlight bool // delivered again, whatever the attempt
}

// deliver does what the pipeline does with one delivery of d's event: a stored result is
// replayed (and the engine finishes what its operation left); else the engine handles it,
// and a result it returns unstored is stored, a final failure as failed.
func (r *rig) deliver(d *operationtest.Delivery) outcome {
	r.t.Helper()
	ctx := r.t.Context()
	if earlier, ok, _ := r.results.Earlier(ctx, d.Ev.ID); ok {
		err := r.engine.ReplayedDelivery(ctx, d)
		return outcome{res: earlier, err: err, inFlight: retry.IsInFlight(err)}
	}
	res, err, crashed := r.handle(d)
	o := outcome{err: err, crashed: crashed, inFlight: retry.IsInFlight(err)}
	if crashed {
		r.releaseAll() // its session expires: the lock goes
		return o
	}
	if stored := d.Published(); stored != nil {
		o.res = r.results.Stored(d.Ev.ID)
		return o
	}
	switch {
	case o.inFlight, err != nil && retry.IsTransient(err) && !d.Last:
		return o
	case err != nil:
		res.Status, res.Error = events.StatusFailed, err.Error()
	}
	if res.Replayed {
		o.res = r.results.Stored(d.Ev.ID)
		return o
	}
	if _, _, perr := r.results.Publish(ctx, res); perr != nil {
		r.t.Fatal(perr)
	}
	o.res = r.results.Stored(d.Ev.ID)
	return o
}

// abandon is what the pipeline does with a delivery past the last attempt: the engine rolls
// back (or publishes the true result of a done operation), else the pipeline stores its
// own failed result.
func (r *rig) abandon(d *operationtest.Delivery) outcome {
	r.t.Helper()
	ctx := r.t.Context()
	if earlier, ok, _ := r.results.Earlier(ctx, d.Ev.ID); ok {
		return outcome{res: earlier}
	}
	res, err := r.engine.AbandonDelivery(ctx, d, "delivered too often")
	if err != nil {
		return outcome{err: err, inFlight: retry.IsInFlight(err)}
	}
	if res == nil {
		res = &events.Result{ID: d.Ev.ID, Type: d.Ev.Type, Cluster: d.Ev.Cluster, Status: events.StatusFailed, Error: "delivered too often"}
	}
	if _, _, err := r.results.Publish(ctx, res); err != nil {
		r.t.Fatal(err)
	}
	return outcome{res: r.results.Stored(d.Ev.ID)}
}

// releaseAll frees every lock, as the sessions of dead workers expire.
func (r *rig) releaseAll() {
	if h := r.locks.Holder(cluster); h != nil {
		h.Lose()
	}
}

func (r *rig) want(o outcome, status events.Status) {
	r.t.Helper()
	if o.res == nil || o.res.Status != status {
		r.t.Fatalf("outcome %+v (err %v), want a stored result %s", o.res, o.err, status)
	}
}

// A fresh event: journaled, applied, verified, published; the entry closed with what the
// operation left.
func TestRunToAVerifiedResult(t *testing.T) {
	r := newRig(t, 3)
	o := r.deliver(r.delivery(r.event(0, 1, 2)))
	r.want(o, events.StatusSucceeded)
	r.truthful(o.res, 0, 1, 2)
	r.settled()
	rec := r.entry()
	if rec == nil || rec.Open() || len(rec.Left) != 3 || rec.Left[0].LeaderEpoch != 1 {
		t.Fatalf("closed entry %+v, want what the operation left", rec)
	}
	if r.results.Count() != 1 || r.locks.Acquired != 1 {
		t.Errorf("%d results, %d locks taken", r.results.Count(), r.locks.Acquired)
	}
}

// A worker killed at each step of the operation: the next delivery (another worker)
// finishes it from the journal, the one result lists every change, nothing is left.
func TestKilledAtEachStep(t *testing.T) {
	for _, step := range []string{operation.StepJournalWritten, operation.StepThrottled, operation.StepCopying, operation.StepBeforeResult, operation.StepResultPublished} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t, 3)
			d := r.delivery(r.event(0, 1, 2))
			r.crashAt(step)
			if o := r.deliver(d); !o.crashed {
				t.Fatalf("no crash at %s: %+v", step, o)
			}
			o := r.deliver(d.Again(false).By("w2"))
			r.want(o, events.StatusSucceeded)
			r.truthful(o.res, 0, 1, 2)
			r.settled()
			if r.results.Count() != 1 {
				t.Errorf("%d results stored", r.results.Count())
			}
		})
	}
}

// A transient failure leaves the operation for the next delivery, which finishes it; the
// result lists the changes of both attempts.
func TestTransientFailureResumes(t *testing.T) {
	r := newRig(t, 3)
	d := r.delivery(r.event(0, 1, 2))
	r.faults.set("submit", nil, errTransient) // the first partition copies, then the controller moves
	o := r.deliver(d)
	if !o.inFlight || o.res != nil {
		t.Fatalf("first attempt: %+v, want left in flight, no result", o)
	}
	if rec := r.entry(); rec == nil || !rec.Open() || rec.Step != journal.StepCopying {
		t.Fatalf("entry after the failure: %+v", rec)
	}
	o = r.deliver(d.Again(false))
	r.want(o, events.StatusSucceeded)
	r.truthful(o.res, 0, 1, 2)
	r.settled()
}

// A transient failure on the last attempt is final: what is half-done is rolled back under
// the lock, and the failed result lists the changes that remain.
func TestLastAttemptRollsBack(t *testing.T) {
	r := newRig(t, 3)
	r.c.finishCopies = false
	d := r.delivery(r.event(0, 1, 2))
	d.Last = true
	r.faults.set("apply", errTransient)
	o := r.deliver(d)
	r.want(o, events.StatusFailed)
	if o.res.Error == "" || !strings.Contains(o.res.Error, "gave up after 1 attempts") || !strings.Contains(o.res.Error, "cancelled 3") {
		t.Errorf("error %q", o.res.Error)
	}
	r.truthful(o.res, 0, 1, 2)
	r.settled()
}

// The lock lost on the last attempt: the operation is journaled and unfinished, and no
// result is stored without the lock (it was stored as failed before, nothing rolled back);
// the delivery that gives the event up rolls it back under the lock.
func TestLockLostOnTheLastAttempt(t *testing.T) {
	r := newRig(t, 3)
	r.c.finishCopies = false
	d := r.delivery(r.event(0, 1, 2))
	d.Last = true
	r.onStep(func(step string) {
		if step == operation.StepCopying {
			r.onStep(nil)
			r.locks.Holder(cluster).Lose()
		}
	})
	o := r.deliver(d)
	if !o.inFlight || o.res != nil || r.results.Count() != 0 {
		t.Fatalf("lock lost on the last attempt: %+v (err %v), want in flight, no result", o.res, o.err)
	}
	if err := r.c.leftovers(); err == nil {
		t.Fatal("nothing in flight after the lost lock?")
	}
	o = r.abandon(d.Again(true))
	r.want(o, events.StatusFailed)
	r.truthful(o.res, 0, 1, 2)
	r.settled()
}

// The result cannot be stored on the last attempt of an operation that is done: it is
// never stored as failed; the next delivery verifies and stores the true result.
func TestPublishFailsOnTheLastAttempt(t *testing.T) {
	r := newRig(t, 2)
	d := r.delivery(r.event(0, 1))
	d.Last = true
	failed := false
	r.results.Fail = func(*events.Result) error {
		if failed {
			return nil
		}
		failed = true
		return errors.New("storage full")
	}
	o := r.deliver(d)
	if !o.inFlight || r.results.Count() != 0 {
		t.Fatalf("publish failed: %+v, want in flight, no result", o)
	}
	if rec := r.entry(); rec == nil || rec.Step != journal.StepDone {
		t.Fatalf("entry %+v, want done", rec)
	}
	o = r.abandon(d.Again(true))
	r.want(o, events.StatusSucceeded)
	r.truthful(o.res, 0, 1)
	r.settled()
}

// Another holder took the entry over (this worker's lock was lost without it knowing yet):
// this worker's next journal write is fenced, and it stops, in flight.
func TestFencedByTheNextHolder(t *testing.T) {
	r := newRig(t, 2)
	d := r.delivery(r.event(0, 1))
	r.onStep(func(step string) {
		if step == operation.StepThrottled {
			r.onStep(nil)
			rec := r.entry()
			if _, err := r.journal.TakeOver(context.Background(), func() error { return nil }, rec, "w2", 2); err != nil {
				t.Fatal(err)
			}
		}
	})
	o := r.deliver(d)
	if !o.inFlight || !errors.Is(o.err, journal.ErrFenced) {
		t.Fatalf("fenced: %+v (err %v)", o, o.err)
	}
	o = r.deliver(d.Again(false).By("w2"))
	r.want(o, events.StatusSucceeded)
	r.settled()
}

// Another event's orphan (its worker died, its message is gone): the next event's delivery
// finishes it exactly as its own redelivery would, stores its result once, then runs.
func TestOrphanIsFinishedFirst(t *testing.T) {
	r := newRig(t, 4)
	d1 := r.delivery(r.event(0, 1))
	r.crashAt(operation.StepCopying)
	if o := r.deliver(d1); !o.crashed {
		t.Fatal("no crash")
	}
	d2 := r.delivery(r.event(2, 3)).By("w2")
	o := r.deliver(d2)
	r.want(o, events.StatusSucceeded)
	r.truthful(o.res, 2, 3)
	first := r.results.Stored(d1.Ev.ID)
	if first == nil || first.Status != events.StatusSucceeded || first.Worker != "w2" || first.Attempt != 2 {
		t.Fatalf("the orphan's result: %+v", first)
	}
	r.truthful(first, 0, 1)
	r.settled()
	if r.results.Count() != 2 {
		t.Errorf("%d results", r.results.Count())
	}
}

// The plan's first read, started while the journal is read (Prefetcher), is handed to a
// fresh run's plan; when another event's orphan is resolved first, it is dropped before
// anything is written, and the plan reads afresh.
func TestPrefetchOnlyForAFreshPlan(t *testing.T) {
	r := newRig(t, 6)
	d1 := r.delivery(r.event(0, 1))
	r.want(r.deliver(d1), events.StatusSucceeded)
	id1 := d1.Ev.ID
	if want := []string{"prefetch " + id1, "plan " + id1 + " prefetched", "discard " + id1}; !slices.Equal(r.tasks.order, want) {
		t.Fatalf("fresh run: %v, want %v", r.tasks.order, want)
	}

	r.tasks.order = nil
	d2 := r.delivery(r.event(2, 3))
	r.crashAt(operation.StepCopying)
	if o := r.deliver(d2); !o.crashed {
		t.Fatal("no crash")
	}
	r.tasks.order = nil
	d3 := r.delivery(r.event(4, 5)).By("w2")
	r.want(r.deliver(d3), events.StatusSucceeded)
	id2, id3 := d2.Ev.ID, d3.Ev.ID
	if want := []string{"prefetch " + id3, "discard " + id3, "resume " + id2, "plan " + id3 + " read"}; !slices.Equal(r.tasks.order, want) {
		t.Fatalf("after an orphan: %v, want %v", r.tasks.order, want)
	}
}

// The plan's first read starts as the lock is asked for: when the lock was busy (another
// event's operation ran meanwhile), the read is older than the event's turn and is
// dropped; the plan reads afresh.
func TestPrefetchDroppedAfterABusyLock(t *testing.T) {
	r := newRig(t, 2)
	r.locks.Wait = time.Minute
	other, err := r.locks.Acquire(t.Context(), cluster, "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	d := r.delivery(r.event(0, 1))
	done := make(chan outcome, 1)
	go func() { done <- r.deliver(d) }()
	// The lock is given up only once the delivery asked for it (its read started) and the
	// time a lock taken at once may take has passed.
	asked := time.Now()
	for !slices.Contains(r.tasks.snapshotOrder(), "prefetch "+d.Ev.ID) && time.Since(asked) < 10*time.Second {
		time.Sleep(time.Millisecond) // (an engine that reads only once locked never does)
	}
	for time.Since(asked) <= 2*operation.PrefetchLockWait {
		time.Sleep(time.Millisecond)
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.want(<-done, events.StatusSucceeded)
	id := d.Ev.ID
	if want := []string{"prefetch " + id, "discard " + id, "plan " + id + " read"}; !slices.Equal(r.tasks.snapshotOrder(), want) {
		t.Fatalf("after a busy lock: %v, want %v", r.tasks.snapshotOrder(), want)
	}
}

// An orphan whose request no longer decodes (a newer worker's event, a stricter decoder)
// cannot be carried on: it is rolled back from its entry alone, gets a failed result, and
// the cluster's events go on.
func TestOrphanThatNoLongerDecodes(t *testing.T) {
	r := newRig(t, 4)
	r.c.finishCopies = false
	d1 := r.delivery(r.event(0, 1))
	r.crashAt(operation.StepCopying)
	r.deliver(d1)
	rec := r.entry()
	op, err := r.journal.TakeOver(context.Background(), func() error { return nil }, rec, "w1", 1)
	if err != nil {
		t.Fatal(err)
	}
	op.Entry.Request = json.RawMessage(`{"subject":"kafkamender.events.c1.replica-change-requested","data":"bm90IGFuIGV2ZW50"}`)
	if err := op.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.c.finishCopies = true // the next event's copies end at once; the orphan's do not
	d2 := r.delivery(r.event(2, 3))
	o := r.deliver(d2)
	r.want(o, events.StatusSucceeded)
	first := r.results.Stored(d1.Ev.ID)
	if first == nil || first.Status != events.StatusFailed || !strings.Contains(first.Error, "cancelled 2") {
		t.Fatalf("the orphan's result: %+v", first)
	}
	r.truthful(first, 0, 1)
	r.settled()
}

// An orphan whose result is stored but which was left half-done (a holder that gave up
// without finishing): rolled back, closed, its result kept; then the event runs.
func TestOrphanWithAStoredResultIsCleaned(t *testing.T) {
	r := newRig(t, 4)
	r.c.finishCopies = false
	d1 := r.delivery(r.event(0, 1))
	r.crashAt(operation.StepCopying)
	r.deliver(d1)
	if _, _, err := r.results.Publish(t.Context(), &events.Result{ID: d1.Ev.ID, Status: events.StatusFailed, Error: "given up"}); err != nil {
		t.Fatal(err)
	}
	r.c.finishCopies = true
	o := r.deliver(r.delivery(r.event(2)))
	r.want(o, events.StatusSucceeded)
	r.settled()
	if first := r.results.Stored(d1.Ev.ID); first.Error != "given up" || r.results.Count() != 2 {
		t.Errorf("the orphan's result %+v (of %d)", first, r.results.Count())
	}
}

// The cluster cannot cancel the copies of a failed operation (Kafka before 2.4): its result
// is published, and the throttles stay until the copies end. A worker that stops during
// that wait leaves the event to be delivered again (not acknowledged), and that delivery
// waits, restores the throttles and closes the entry.
func TestAwaitingSurvivesAStop(t *testing.T) {
	r := newRig(t, 2)
	r.c.finishCopies, r.c.cancelable = false, false
	d := r.delivery(r.event(0, 1))
	r.faults.set("apply", errors.New("timeout after 1h"))
	ctx, stop := context.WithCancel(t.Context())
	r.onStep(func(step string) {
		if step == operation.StepAwaitingReassignments {
			r.onStep(nil)
			stop() // SIGTERM while waiting
		}
	})
	res, err := r.engine.HandleDelivery(ctx, d)
	if !retry.IsInFlight(err) || d.Published() == nil || d.Published().Status != events.StatusFailed || res.Status != events.StatusFailed {
		t.Fatalf("stop while awaiting: %+v, %v; want the failed result stored and the event in flight", res, err)
	}
	if rec := r.entry(); rec == nil || rec.Step != journal.StepAwaiting {
		t.Fatalf("entry %+v, want awaiting", rec)
	}
	if err := r.c.leftovers(); err == nil {
		t.Fatal("the throttle went before the copies ended")
	}
	r.c.finish()
	o := r.deliver(d.Again(false))
	if o.err != nil || o.res.Status != events.StatusFailed {
		t.Fatalf("redelivery: %+v", o)
	}
	r.settled()
	if r.results.Count() != 1 {
		t.Errorf("%d results", r.results.Count())
	}
}

// The topic is deleted while the operation copies; its retry must not be refused by what
// the cluster no longer has (building a fresh task would say the topic does not exist): it
// resumes from the journal, finds the partitions gone, restores the throttle, and says so.
func TestTopicDeletedMidCopy(t *testing.T) {
	r := newRig(t, 2)
	r.c.finishCopies = false
	d := r.delivery(r.event(0, 1))
	r.crashAt(operation.StepCopying)
	r.deliver(d)
	r.c.deleteTopic()
	o := r.deliver(d.Again(false))
	r.want(o, events.StatusFailed)
	if len(o.res.Skipped) != 2 || !strings.Contains(o.res.Error, "no longer exists") {
		t.Errorf("result %+v", o.res)
	}
	r.settled()
	if o := r.deliver(r.delivery(r.event())); o.res == nil || o.res.Status != events.StatusNoop {
		t.Errorf("the next event of the cluster: %+v", o)
	}
}

// A rollback that fails for good: the failed result says so, and the entry stays open, so
// that the next holder of the lock undoes what is left before its own event.
func TestRollbackThatFailsIsFinishedByTheNextHolder(t *testing.T) {
	r := newRig(t, 3)
	r.c.finishCopies = false
	d := r.delivery(r.event(0, 1))
	r.faults.set("apply", errors.New("timeout after 1h"))
	r.faults.set("rollback", errors.New("the controller refused the cancellation"))
	o := r.deliver(d)
	r.want(o, events.StatusFailed)
	if !strings.Contains(o.res.Error, "rollback failed: the controller refused") {
		t.Errorf("error %q", o.res.Error)
	}
	if rec := r.entry(); rec == nil || rec.Step != journal.StepRollingBack {
		t.Fatalf("entry %+v, want rolling back", rec)
	}
	r.c.finishCopies = true
	o = r.deliver(r.delivery(r.event(2)))
	r.want(o, events.StatusSucceeded)
	r.settled()
}

// The same event delivered again after its result (a lost acknowledgement): replayed,
// never run twice.
func TestSameEventRunsOnce(t *testing.T) {
	r := newRig(t, 1)
	d := r.delivery(r.event(0))
	r.want(r.deliver(d), events.StatusSucceeded)
	res, err, _ := r.handle(d.Again(false)) // as if the pipeline's lookup had missed it
	if err != nil || !res.Replayed || res.Status != events.StatusSucceeded {
		t.Fatalf("again: %+v, %v", res, err)
	}
	if r.results.Count() != 1 || len(r.tasks.built) != 1 {
		t.Errorf("%d results, tasks built %v", r.results.Count(), r.tasks.built)
	}
}

// A stale delivery of an event (held while it waited, as another delivery of it ran, and
// a newer event after it) is not run again once it has the lock: the cluster's journal
// entry is the newer event's, and the event's stored result is replayed (CI run 16: a
// delivery held while its cluster's pause could not be read ran an event again after the
// newer ones, and put the partition back as the older event had asked).
func TestStaleDeliveryAfterNewerEventsIsReplayed(t *testing.T) {
	r := newRig(t, 2)
	d := r.delivery(r.event(0))
	r.want(r.deliver(d), events.StatusSucceeded)
	r.want(r.deliver(r.delivery(r.event(1))), events.StatusSucceeded)
	res, err, _ := r.handle(d.Again(false)) // its pipeline lookup was made before the first ran
	if err != nil || !res.Replayed || res.Status != events.StatusSucceeded || res.ID != d.Ev.ID {
		t.Fatalf("stale delivery: %+v, %v; want the stored result replayed", res, err)
	}
	if r.results.Count() != 2 || len(r.tasks.built) != 2 {
		t.Errorf("%d results, tasks built %v; want the two events' only", r.results.Count(), r.tasks.built)
	}
	r.settled()
}

// The next operation reads at least as new as what the last one left: its floor, in a
// fresh run and after a crash, in another worker.
func TestTheFloorIsWhatTheLastOperationLeft(t *testing.T) {
	r := newRig(t, 3)
	r.want(r.deliver(r.delivery(r.event(0))), events.StatusSucceeded)
	left := r.entry().Left
	d := r.delivery(r.event(1))
	r.crashAt(operation.StepThrottled)
	r.deliver(d)
	r.want(r.deliver(d.Again(false).By("w2")), events.StatusSucceeded)
	// The first event's plan and apply, the second's plan and apply (killed), its resume.
	if len(r.tasks.floors) != 5 || len(r.tasks.floors[0])+len(r.tasks.floors[1]) > 0 {
		t.Fatalf("floors %v", r.tasks.floors)
	}
	for i, f := range r.tasks.floors[2:] {
		if len(f) != 1 || f[0].TopicPartition != left[0].TopicPartition || f[0].LeaderEpoch != left[0].LeaderEpoch {
			t.Errorf("run %d read from floor %+v, want %+v", i+2, f, left)
		}
	}
}

// The guardrails: an event they refuse is rejected before the lock (nothing taken, nothing
// read); one whose operation is journaled already is finished as it began; a plan over
// the partition cap or over the hourly cap is rejected whole before its journal entry,
// listing nothing; a dry run never counts.
func TestGuardrails(t *testing.T) {
	t.Run("refused before the lock", func(t *testing.T) {
		r := newRig(t, 1)
		r.guard.refuse = operation.Reject("guardrails.allowed_sources: no")
		o := r.deliver(r.delivery(r.event(0)))
		r.want(o, events.StatusRejected)
		if r.locks.Acquired != 0 || r.entry() != nil || len(r.tasks.built) != 0 {
			t.Errorf("refused event took %d locks, entry %+v, tasks %v", r.locks.Acquired, r.entry(), r.tasks.built)
		}
	})
	t.Run("journaled, then refused: finished", func(t *testing.T) {
		r := newRig(t, 2)
		d := r.delivery(r.event(0, 1))
		r.crashAt(operation.StepThrottled)
		r.deliver(d)
		r.guard.refuse = operation.Reject("guardrails.protected_topics: now protected")
		o := r.deliver(d.Again(false))
		r.want(o, events.StatusSucceeded)
		r.settled()
		o = r.deliver(r.delivery(r.event(0)))
		r.want(o, events.StatusRejected)
	})
	t.Run("over the partition cap", func(t *testing.T) {
		r := newRig(t, 3)
		r.guard.cap = 2
		o := r.deliver(r.delivery(r.event(0, 1, 2)))
		r.want(o, events.StatusRejected)
		if o.res.Error != "guardrails.max_partitions_per_event: the plan changes 3 partitions, over the cap of 2" ||
			len(o.res.Changes)+len(o.res.Skipped)+len(o.res.Noop) > 0 || r.entry() != nil || len(r.guard.counted) != 0 {
			t.Errorf("result %+v, entry %+v, counted %v", o.res, r.entry(), r.guard.counted)
		}
		r.settled()
	})
	t.Run("over the hourly cap", func(t *testing.T) {
		r := newRig(t, 1)
		r.guard.full = true
		o := r.deliver(r.delivery(r.event(0)))
		r.want(o, events.StatusRejected)
		if r.entry() != nil {
			t.Errorf("journaled over the cap: %+v", r.entry())
		}
	})
	t.Run("a dry run", func(t *testing.T) {
		r := newRig(t, 3)
		r.guard.cap = 2
		ev := r.event(0, 1)
		ev.Payload.(*events.ReplicaChange).DryRun = true
		o := r.deliver(r.delivery(ev))
		r.want(o, events.StatusPlanned)
		big := r.event(0, 1, 2)
		big.Payload.(*events.ReplicaChange).DryRun = true
		r.want(r.deliver(r.delivery(big)), events.StatusRejected)
		if len(r.guard.counted) != 0 || !slices.Equal(r.guard.partsAsk, []int{2, 3}) || r.locks.Acquired != 0 || r.entry() != nil {
			t.Errorf("dry runs: counted %v, partitions asked %v, locks %d, entry %+v", r.guard.counted, r.guard.partsAsk, r.locks.Acquired, r.entry())
		}
	})
}

// A journal write that fails before the operation began writes nothing to the cluster:
// the event is retried (plain transient), and no entry is left.
func TestJournalDownBeforeTheFirstWrite(t *testing.T) {
	r := newRig(t, 1)
	d := r.delivery(r.event(0))
	r.mem.FailWrites(func(op, key string) error { return errors.New("storage full") })
	o := r.deliver(d)
	if o.inFlight || o.res != nil || !retry.IsTransient(o.err) || r.entry() != nil {
		t.Fatalf("%+v (err %v), entry %+v", o, o.err, r.entry())
	}
	r.mem.FailWrites(nil)
	r.want(r.deliver(d.Again(false)), events.StatusSucceeded)
	r.settled()
}

// The close of the journal entry, after the result, meets a NATS node stopping: its write
// fails (stored or not, its acknowledgement lost), or fails until the lock is lost. The
// entry ends closed all the same: read again and closed again by the delivery, or, when
// that cannot be done now, by the event's next delivery (its result replayed). An entry
// left for the next lock holder could stay open as long as the cluster's events are an
// alert storm's noops, which take no lock (CI run of stop 36).
func TestTheCloseAfterTheResultFails(t *testing.T) {
	afterResult := func(r *rig, fail func(n int) error) {
		n := 0
		r.onStep(func(step string) {
			if step == operation.StepResultPublished {
				r.mem.FailWrites(func(op, key string) error {
					if op != "update" || key != cluster {
						return nil
					}
					n++
					return fail(n)
				})
			}
		})
	}
	for _, tc := range []struct {
		name string
		fail func(n int) error
	}{
		{"acknowledgement lost", func(n int) error {
			if n == 1 {
				return fmt.Errorf("nats: timeout: %w", journal.ErrAckLost)
			}
			return nil
		}},
		{"refused twice", func(n int) error {
			if n <= 2 {
				return errors.New("nats: no responders available for request")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			afterResult(r, tc.fail)
			o := r.deliver(r.delivery(r.event(0, 1, 2)))
			r.want(o, events.StatusSucceeded)
			if o.err != nil {
				t.Errorf("delivery error %v, want none: the entry was closed", o.err)
			}
			r.settled()
		})
	}
	t.Run("refused until the lock is lost", func(t *testing.T) {
		r := newRig(t, 3)
		afterResult(r, func(n int) error {
			if n == 2 {
				r.locks.Holder(cluster).Lose()
			}
			return errors.New("nats: no responders available for request")
		})
		d := r.delivery(r.event(0, 1, 2))
		o := r.deliver(d)
		r.want(o, events.StatusSucceeded)
		if !o.inFlight {
			t.Fatalf("delivery error %v, want the event delivered again to close its entry", o.err)
		}
		if rec := r.entry(); rec == nil || rec.Step != journal.StepDone {
			t.Fatalf("entry %+v, want it left at step done", rec)
		}
		r.mem.FailWrites(nil)
		o = r.deliver(d.Again(false))
		r.want(o, events.StatusSucceeded)
		if o.err != nil || r.results.Count() != 1 {
			t.Errorf("replay: error %v, %d results", o.err, r.results.Count())
		}
		r.truthful(o.res, 0, 1, 2)
		r.settled()
	})
}

// What could not be journaled or stored as a result is refused at plan time, before
// anything is written or counted: here an event id that would make the result's subject
// longer than the server takes.
func TestWhatCannotBeStoredIsRejected(t *testing.T) {
	r := newRig(t, 1)
	ev := r.event(0)
	ev.ID = strings.Repeat("x", 3900)
	o := r.deliver(r.delivery(ev))
	r.want(o, events.StatusRejected)
	if !strings.Contains(o.res.Error, "too large to store") || r.entry() != nil || len(r.guard.counted) != 0 {
		t.Errorf("result %q, entry %+v, counted %v", o.res.Error, r.entry(), r.guard.counted)
	}
	r.settled()
}
