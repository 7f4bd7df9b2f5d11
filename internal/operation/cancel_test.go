package operation_test

import (
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
)

// finishSome ends the copies of the partitions i (their reassignment done), the others
// still copying.
func (c *fakeCluster) finishSome(i ...int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range i {
		if c.copying[tp(p)] {
			delete(c.copying, tp(p))
			c.replicas[tp(p)] = []int32{1, 2, 3}
			c.epoch[tp(p)]++
		}
	}
}

// An operation cancelled while it copies stops, cancels the copies in flight and puts the
// throttle back; the partitions finished keep their new state, listed in changes, the
// others are as before; the result is cancelled and says so.
func TestCancelWhileCopying(t *testing.T) {
	r := newRig(t, 5)
	r.c.finishCopies = false
	ev := r.event(0, 1, 2, 3, 4)
	r.onStep(func(step string) {
		if step == operation.StepCopying {
			r.onStep(nil)
			r.c.finishSome(1, 3)
			r.cancels.cancel(ev.ID, "by oncall/alice: INC-42")
		}
	})
	o := r.deliver(r.delivery(ev))
	r.want(o, events.StatusCancelled)
	if !strings.Contains(o.res.Error, "cancelled: by oncall/alice: INC-42") || !strings.Contains(o.res.Error, "cancelled 3") {
		t.Errorf("error %q", o.res.Error)
	}
	if !strings.Contains(o.res.Note, "2 finished partitions keep their new state") || !strings.Contains(o.res.Note, "orders-0, orders-2, orders-4") {
		t.Errorf("note %q", o.res.Note)
	}
	r.truthful(o.res, 0, 1, 2, 3, 4)
	if len(o.res.Changes) != 2 {
		t.Errorf("changes %+v, want the 2 finished", o.res.Changes)
	}
	r.settled()
}

// An event cancelled before its turn gets its cancelled result without a plan or a write.
func TestCancelBeforeItRuns(t *testing.T) {
	r := newRig(t, 2)
	ev := r.event(0, 1)
	r.cancels.cancel(ev.ID, "by oncall/alice: not now")
	o := r.deliver(r.delivery(ev))
	r.want(o, events.StatusCancelled)
	if !strings.Contains(o.res.Error, "cancelled before it ran, nothing changed: by oncall/alice: not now") {
		t.Errorf("error %q", o.res.Error)
	}
	if rec := r.entry(); rec != nil {
		t.Errorf("journal entry %+v for an event cancelled before it ran", rec)
	}
	r.truthful(o.res, 0, 1)
	r.settled()
}

// The worker running the operation dies; it is cancelled meanwhile. The next holder of the
// lock (here for another event) rolls it back from the journal instead of carrying it on,
// and stores its cancelled result; then its own event runs.
func TestCancelOrphanFromTheJournal(t *testing.T) {
	r := newRig(t, 4)
	r.c.finishCopies = false
	ev := r.event(0, 1)
	r.crashAt(operation.StepCopying)
	if o := r.deliver(r.delivery(ev)); !o.crashed {
		t.Fatalf("not crashed: %+v", o)
	}
	r.cancels.cancel(ev.ID, "by oncall/bob")
	r.c.finishCopies = true
	next := r.deliver(r.delivery(r.event(2, 3)))
	r.want(next, events.StatusSucceeded)
	res := r.results.Stored(ev.ID)
	if res == nil || res.Status != events.StatusCancelled || !strings.Contains(res.Error, "by oncall/bob") {
		t.Fatalf("the orphan's result: %+v", res)
	}
	r.truthful(res, 0, 1)
	r.settled()
}

// The event's own redelivery after its worker died is cancelled: rolled back, not resumed.
func TestCancelRedeliveredOperation(t *testing.T) {
	r := newRig(t, 2)
	r.c.finishCopies = false
	ev := r.event(0, 1)
	d := r.delivery(ev)
	r.crashAt(operation.StepCopying)
	if o := r.deliver(d); !o.crashed {
		t.Fatalf("not crashed: %+v", o)
	}
	r.cancels.cancel(ev.ID, "by oncall/carol")
	o := r.deliver(d.Again(false))
	r.want(o, events.StatusCancelled)
	r.truthful(o.res, 0, 1)
	r.settled()
}

// Copies the cluster cannot cancel (Kafka before 2.4): the result says they are waited
// out; the entry awaits them, the throttle kept until they end, then put back.
func TestCancelCopiesTheClusterCannotCancel(t *testing.T) {
	r := newRig(t, 2)
	r.c.finishCopies, r.c.cancelable = false, false
	ev := r.event(0, 1)
	r.onStep(func(step string) {
		switch step {
		case operation.StepCopying:
			r.cancels.cancel(ev.ID, "by oncall/dave")
		case operation.StepAwaitingReassignments:
			r.onStep(nil)
			r.c.finish()
		}
	})
	o := r.deliver(r.delivery(ev))
	r.want(o, events.StatusCancelled)
	if !strings.Contains(o.res.Error, "which the cluster cannot cancel") {
		t.Errorf("error %q", o.res.Error)
	}
	r.settled()
	replicas, _, _ := r.c.read()
	if got := replicas[model.TopicPartition{Topic: topic, Partition: 0}]; len(got) != 3 {
		t.Errorf("orders-0 %v: the copy the cluster could not cancel ended", got)
	}
}

// A cancel that comes once the operation is done (verified, its result about to be
// published) undoes nothing: the result is the true one, succeeded.
func TestCancelAfterTheOutcomeIsDone(t *testing.T) {
	r := newRig(t, 2)
	ev := r.event(0, 1)
	r.onStep(func(step string) {
		if step == operation.StepBeforeResult {
			r.onStep(nil)
			r.cancels.cancel(ev.ID, "by oncall/erin: too late")
		}
	})
	o := r.deliver(r.delivery(ev))
	r.want(o, events.StatusSucceeded)
	r.truthful(o.res, 0, 1)
	r.settled()
}
