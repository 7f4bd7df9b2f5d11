package locks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// A worker whose lock.nats.ttl differs from the bucket's takes no lock, and changes
// neither the bucket nor the lock of the worker that holds it: were the bucket's TTL
// shortened under a holder that renews on its own longer one, the holder's entry could
// expire, and another worker take the lock, while it still counts on it.
func TestKVTTLMismatchTakesNoLock(t *testing.T) {
	t.Parallel()
	n := startNATSServer(t)
	_, js := n.connect(t)
	holder, err := locks.NewKV(js, locks.KVConfig{Bucket: "LOCKS", Worker: "w1", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	held, err := holder.Acquire(t.Context(), "c1", "ev-1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(t.Context())

	_, js2 := n.connect(t)
	other, err := locks.NewKV(js2, locks.KVConfig{Bucket: "LOCKS", Worker: "w2", TTL: 4 * time.Second, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Acquire(t.Context(), "c2", "ev-2")
	var mismatch *locks.TTLMismatchError
	if !errors.As(err, &mismatch) || mismatch.BucketTTL != 2*time.Second || mismatch.TTL != 4*time.Second || !retry.IsTransient(err) {
		t.Fatalf("Acquire with another ttl: %v; want a transient TTLMismatchError (bucket 2s, ours 4s)", err)
	}
	if err := other.Check(t.Context()); !errors.As(err, &mismatch) {
		t.Errorf("Check: %v; want the mismatch", err)
	}
	kv, err := js.KeyValue(t.Context(), "LOCKS")
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 2*time.Second {
		t.Errorf("bucket ttl changed to %s", st.TTL())
	}
	// The holder renews past its TTL (and past the other worker's attempt) undisturbed.
	select {
	case <-held.Context().Done():
		t.Fatalf("the holder lost its lock: %v", held.Err())
	case <-time.After(3 * time.Second): // longer than the bucket's TTL: renewals kept it
	}
	if err := holder.Check(t.Context()); err != nil {
		t.Errorf("Check of the holder: %v", err)
	}
}
