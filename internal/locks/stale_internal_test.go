package locks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/testenv"
)

func TestSeenRevision(t *testing.T) {
	var s seenRevision
	if s.stale(0) {
		t.Error("nothing seen yet is stale")
	}
	s.see(7)
	first := s.at
	s.see(7)
	if s.at != first {
		t.Error("seeing the same revision again moved the time it was first seen")
	}
	if s.stale(time.Hour) {
		t.Error("a revision seen just now is stale after an hour")
	}
	s.at = time.Now().Add(-time.Hour)
	if !s.stale(time.Minute) {
		t.Error("a revision seen an hour ago is not stale after a minute")
	}
	s.see(8)
	if s.rev != 8 || s.stale(time.Minute) {
		t.Errorf("a new revision: %+v, want 8 seen now", s)
	}
}

// waiterOnBucket is a locker (worker "waiter", TTL a minute) on a bucket of an in-process
// JetStream, and the bucket.
func waiterOnBucket(t *testing.T) (*KVLocker, jetstream.KeyValue) {
	js := testenv.InProcessJetStream(t)
	l, err := NewKV(js, KVConfig{Bucket: "LOCKS", Worker: "waiter", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := l.bucket(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return l, kv
}

// A waiter deletes a stale entry only at the revision it saw: an entry renewed since is
// its holder's and stays.
func TestBreakStaleOnlyAtTheRevisionSeen(t *testing.T) {
	l, kv := waiterOnBucket(t)
	r1, err := kv.Create(t.Context(), "c1", []byte(`{"worker":"holder"}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := kv.Update(t.Context(), "c1", []byte(`{"worker":"holder"}`), r1) // a renewal
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	l.breakStale(t.Context(), kv, "c1", seenRevision{rev: r1, at: long})
	if e, err := kv.Get(t.Context(), "c1"); err != nil || e.Revision() != r2 {
		t.Fatalf("after breaking revision %d of an entry renewed to %d: %v, %v; want it kept", r1, r2, e, err)
	}
	l.breakStale(t.Context(), kv, "c1", seenRevision{rev: r2, at: long})
	if _, err := kv.Get(t.Context(), "c1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after breaking the revision seen: %v, want the entry gone", err)
	}
	h, err := l.Acquire(t.Context(), "c1", "ev-1", WithWait(time.Second))
	if err != nil {
		t.Fatalf("acquire after the stale entry was deleted: %v", err)
	}
	_ = h.Release(t.Context())
}

// noWatch is a bucket whose watches cannot be created, as while the bucket's stream or
// the meta group elects a leader.
type noWatch struct{ jetstream.KeyValue }

func (noWatch) Watch(context.Context, string, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return nil, context.DeadlineExceeded
}

// A waiter that cannot watch the entry reads it instead: it learns the holder and the
// revision (so a stale entry can still be broken) and comes back for another create
// within a second; an absent entry sends it back at once; it never fails the wait.
func TestWaitFreeWithoutAWatch(t *testing.T) {
	l, kv := waiterOnBucket(t)
	var seen seenRevision
	if h, err := l.waitFree(t.Context(), noWatch{kv}, "c1", &seen); h != nil || err != nil || seen.rev != 0 {
		t.Fatalf("no entry: holder %v, %v, seen %+v; want back at once with nothing seen", h, err, seen)
	}
	rev, err := kv.Create(t.Context(), "c1", []byte(`{"worker":"holder","event":"ev-h"}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h, err := l.waitFree(t.Context(), noWatch{kv}, "c1", &seen)
	if err != nil || h == nil || h.Worker != "holder" || seen.rev != rev {
		t.Fatalf("an entry held: holder %+v, %v, seen %+v; want the holder and revision %d", h, err, seen, rev)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("waited %s without a watch; want about a second before the next create", waited)
	}
	first := seen.at
	if _, err := l.waitFree(t.Context(), noWatch{kv}, "c1", &seen); err != nil || seen.at != first {
		t.Fatalf("the same revision read again: %v, seen %+v; want it first seen at %v", err, seen, first)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if h, err := l.waitFree(ctx, noWatch{kv}, "c1", &seen); !errors.Is(err, context.DeadlineExceeded) || h == nil {
		t.Fatalf("the wait ran out: holder %v, %v; want the holder and the deadline", h, err)
	}
}
