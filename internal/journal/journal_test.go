package journal_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

func store(t *testing.T) *journal.Store {
	t.Helper()
	_, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return journal.New(js)
}

func held() error { return nil }

func entry(event string) journal.Entry {
	return journal.Entry{Event: event, Type: "replica-change-requested", Cluster: "c1", Worker: "w1", Attempt: 1,
		Changes: []plan.Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}}}}
}

// One entry per cluster, read back as written; deleted, it is gone.
func TestBeginGetDelete(t *testing.T) {
	s := store(t)
	ctx := t.Context()
	if r, err := s.Get(ctx, "c1"); err != nil || r != nil {
		t.Fatalf("empty journal: %v %v", r, err)
	}
	op, err := s.Begin(ctx, held, entry("e1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx, held, entry("e2")); !errors.Is(err, journal.ErrExists) {
		t.Fatalf("second Begin on the cluster: %v, want ErrExists", err)
	}
	op.Entry.Step = journal.StepElecting
	op.Entry.Reassignments = []model.TopicPartition{{Topic: "t", Partition: 0}}
	if err := op.Save(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "c1")
	if err != nil || r == nil {
		t.Fatalf("get: %v %v", r, err)
	}
	if r.Event != "e1" || r.Step != journal.StepElecting || !r.Submitted(model.TopicPartition{Topic: "t", Partition: 0}) ||
		len(r.Changes) != 1 || r.Started.IsZero() || r.Revision != op.Revision() {
		t.Fatalf("read back %+v", r)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := op.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "c1"); err != nil || r != nil {
		t.Fatalf("after delete: %v %v", r, err)
	}
	// A new operation may begin once the entry is gone.
	if _, err := s.Begin(ctx, held, entry("e3")); err != nil {
		t.Fatal(err)
	}
}

// A holder whose entry was adopted by the next holder is fenced: its writes fail with
// ErrFenced (transient: the event is tried again and finds the result), and it cannot
// delete the adopter's entry.
func TestAdoptFencesTheFormerHolder(t *testing.T) {
	s := store(t)
	ctx := t.Context()
	old, err := s.Begin(ctx, held, entry("e1"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := s.Adopt(ctx, held, r, "w2", 2)
	if err != nil {
		t.Fatal(err)
	}
	old.Entry.Step = journal.StepCopying
	if err := old.Save(ctx); !errors.Is(err, journal.ErrFenced) || !retry.IsTransient(err) {
		t.Fatalf("save by the former holder: %v, want ErrFenced (transient)", err)
	}
	if err := old.Delete(ctx); !errors.Is(err, journal.ErrFenced) {
		t.Fatalf("delete by the former holder: %v, want ErrFenced", err)
	}
	r, err = s.Get(ctx, "c1")
	if err != nil || r == nil || r.Worker != "w2" || r.Attempt != 2 || r.Step != journal.StepPlanned {
		t.Fatalf("after the fenced writes: %+v %v", r, err)
	}
	if err := adopted.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

// Once the holder knows its lock is lost, it writes nothing, not even to the journal.
func TestNoWriteAfterTheLockIsLost(t *testing.T) {
	s := store(t)
	ctx := t.Context()
	lost := errors.New("lock lost")
	alive := error(nil)
	op, err := s.Begin(ctx, func() error { return alive }, entry("e1"))
	if err != nil {
		t.Fatal(err)
	}
	alive = lost
	op.Entry.Step = journal.StepCopying
	if err := op.Save(ctx); !errors.Is(err, lost) {
		t.Fatalf("save after the loss: %v", err)
	}
	if err := op.Delete(ctx); !errors.Is(err, lost) {
		t.Fatalf("delete after the loss: %v", err)
	}
	if r, _ := s.Get(ctx, "c1"); r == nil || r.Step != journal.StepPlanned {
		t.Fatalf("the entry changed after the loss: %+v", r)
	}
	if _, err := s.Begin(ctx, func() error { return lost }, entry("e2")); !errors.Is(err, lost) {
		t.Fatalf("begin without the lock: %v", err)
	}
}
