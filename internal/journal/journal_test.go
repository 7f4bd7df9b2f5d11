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

// stores runs test against the journal in JetStream (an in-process nats-server, default
// limits), in memory, and in memory whose writes hold 256 bytes at most: the rules are the
// same.
func stores(t *testing.T, test func(t *testing.T, s *journal.Store)) {
	t.Run("jetstream", func(t *testing.T) {
		_, nc := testenv.InProcessNATS(t)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		test(t, journal.New(js))
	})
	t.Run("memory", func(t *testing.T) {
		s, _ := journal.NewMemory()
		test(t, s)
	})
	t.Run("memory-chunked", func(t *testing.T) {
		// Every entry of these tests is larger than 256 bytes: all are written in chunks.
		s, _ := journal.NewMemoryMaxValue(256)
		test(t, s)
	})
}

func held() error { return nil }

func entry(event string) journal.Entry {
	return journal.Entry{Event: event, Type: "replica-change-requested", Cluster: "c1", Worker: "w1", Attempt: 1,
		Changes: []plan.Change{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{2, 1}}}}
}

// One entry per cluster, read back as written; closed, it keeps only what the operation
// left, and the next operation begins over it.
func TestBeginGetClose(t *testing.T) {
	stores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		if r, err := s.Get(ctx, "c1"); err != nil || r != nil {
			t.Fatalf("empty journal: %v %v", r, err)
		}
		op, err := s.Begin(ctx, held, nil, entry("e1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Begin(ctx, held, nil, entry("e2")); !errors.Is(err, journal.ErrExists) {
			t.Fatalf("second Begin on the cluster: %v, want ErrExists", err)
		}
		r, err := s.Get(ctx, "c1")
		if err != nil || r == nil {
			t.Fatalf("get: %v %v", r, err)
		}
		if _, err := s.Begin(ctx, held, r, entry("e2")); !errors.Is(err, journal.ErrExists) {
			t.Fatalf("Begin over an open entry: %v, want ErrExists", err)
		}
		op.Entry.Step = journal.StepElecting
		op.Entry.Reassignments = []model.TopicPartition{{Topic: "t", Partition: 0}}
		if err := op.Save(ctx); err != nil {
			t.Fatal(err)
		}
		r, err = s.Get(ctx, "c1")
		if err != nil || r == nil {
			t.Fatalf("get: %v %v", r, err)
		}
		if r.Event != "e1" || r.Step != journal.StepElecting || !r.Submitted(model.TopicPartition{Topic: "t", Partition: 0}) ||
			len(r.Changes) != 1 || r.Started.IsZero() || r.Revision != op.Revision() || !r.Open() {
			t.Fatalf("read back %+v", r)
		}
		if list, err := s.List(ctx); err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		left := []model.Seen{{TopicPartition: model.TopicPartition{Topic: "t", Partition: 0}, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 7}}
		op.Entry.Left = left
		if err := op.Close(ctx); err != nil {
			t.Fatal(err)
		}
		r, err = s.Get(ctx, "c1")
		if err != nil || r == nil || r.Open() || r.Event != "e1" || len(r.Changes) != 0 || r.Reassignments != nil ||
			len(r.Left) != 1 || r.Left[0].LeaderEpoch != 7 {
			t.Fatalf("after close: %+v %v", r, err)
		}
		// A new operation begins over the closed entry, not beside it.
		if _, err := s.Begin(ctx, held, nil, entry("e3")); !errors.Is(err, journal.ErrExists) {
			t.Fatalf("Begin as if there were no entry: %v, want ErrExists", err)
		}
		op3, err := s.Begin(ctx, held, r, entry("e3"))
		if err != nil {
			t.Fatal(err)
		}
		// Whoever began over the same closed entry second is fenced.
		if _, err := s.Begin(ctx, held, r, entry("e4")); !errors.Is(err, journal.ErrFenced) {
			t.Fatalf("second Begin over the same closed entry: %v, want ErrFenced", err)
		}
		if r, _ := s.Get(ctx, "c1"); r == nil || r.Event != "e3" || r.Revision != op3.Revision() {
			t.Fatalf("after begin over closed: %+v", r)
		}
	})
}

// Close of a finished entry without the lock (its result is stored) needs it unchanged
// since it was read.
func TestCloseFinishedEntry(t *testing.T) {
	stores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		op, err := s.Begin(ctx, held, nil, entry("e1"))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := s.Get(ctx, "c1")
		if err := s.Close(ctx, r); err == nil {
			t.Fatal("closed an entry at step planned")
		}
		op.Entry.Step = journal.StepDone
		if err := op.Save(ctx); err != nil {
			t.Fatal(err)
		}
		stale := *r
		stale.Step = journal.StepDone
		if err := s.Close(ctx, &stale); !errors.Is(err, journal.ErrFenced) {
			t.Fatalf("close of a stale read: %v, want ErrFenced", err)
		}
		r, _ = s.Get(ctx, "c1")
		if err := s.Close(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Get(ctx, "c1"); r == nil || r.Open() {
			t.Fatalf("after close: %+v", r)
		}
	})
}

// A holder whose entry was taken over by the next holder is fenced: its writes fail with
// ErrFenced (transient: the event is tried again and finds the result), and it cannot
// close the new holder's entry.
func TestTakeOverFencesTheFormerHolder(t *testing.T) {
	stores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		old, err := s.Begin(ctx, held, nil, entry("e1"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		taken, err := s.TakeOver(ctx, held, r, "w2", 2)
		if err != nil {
			t.Fatal(err)
		}
		old.Entry.Step = journal.StepCopying
		if err := old.Save(ctx); !errors.Is(err, journal.ErrFenced) || !retry.IsTransient(err) {
			t.Fatalf("save by the former holder: %v, want ErrFenced (transient)", err)
		}
		if err := old.Close(ctx); !errors.Is(err, journal.ErrFenced) {
			t.Fatalf("close by the former holder: %v, want ErrFenced", err)
		}
		r, err = s.Get(ctx, "c1")
		if err != nil || r == nil || r.Worker != "w2" || r.Attempt != 2 || r.Step != journal.StepPlanned {
			t.Fatalf("after the fenced writes: %+v %v", r, err)
		}
		if err := taken.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Once the holder knows its lock is lost, it writes nothing, not even to the journal.
func TestNoWriteAfterTheLockIsLost(t *testing.T) {
	stores(t, func(t *testing.T, s *journal.Store) {
		ctx := t.Context()
		lost := errors.New("lock lost")
		alive := error(nil)
		op, err := s.Begin(ctx, func() error { return alive }, nil, entry("e1"))
		if err != nil {
			t.Fatal(err)
		}
		alive = lost
		op.Entry.Step = journal.StepCopying
		if err := op.Save(ctx); !errors.Is(err, lost) {
			t.Fatalf("save after the loss: %v", err)
		}
		if err := op.Close(ctx); !errors.Is(err, lost) {
			t.Fatalf("close after the loss: %v", err)
		}
		if r, _ := s.Get(ctx, "c1"); r == nil || r.Step != journal.StepPlanned {
			t.Fatalf("the entry changed after the loss: %+v", r)
		}
		if _, err := s.Begin(ctx, func() error { return lost }, nil, entry("e2")); !errors.Is(err, lost) {
			t.Fatalf("begin without the lock: %v", err)
		}
	})
}

// A failed write stores nothing and is transient.
func TestFailedWriteIsTransient(t *testing.T) {
	s, mem := journal.NewMemory()
	ctx := t.Context()
	op, err := s.Begin(ctx, held, nil, entry("e1"))
	if err != nil {
		t.Fatal(err)
	}
	mem.FailWrites(func(op, key string) error { return errors.New("storage full") })
	op.Entry.Step = journal.StepCopying
	if err := op.Save(ctx); err == nil || !retry.IsTransient(err) {
		t.Fatalf("failed save: %v, want a transient error", err)
	}
	mem.FailWrites(nil)
	if r, _ := s.Get(ctx, "c1"); r == nil || r.Step != journal.StepPlanned {
		t.Fatalf("a failed write changed the entry: %+v", r)
	}
	if err := op.Save(ctx); err != nil {
		t.Fatal(err)
	}
}
