package kvbucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

func ttlOf(t *testing.T, js jetstream.JetStream, bucket string) time.Duration {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.TTL()
}

// Nothing is created before the first use; concurrent first uses share one bucket, created
// with the configuration given.
func TestBindsOnFirstUse(t *testing.T) {
	js := testenv.InProcessJetStream(t)
	b := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: "B", Description: "d", TTL: time.Minute, History: 3})
	if _, err := js.KeyValue(t.Context(), "B"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("bucket before first use: %v, want none", err)
	}
	var wg sync.WaitGroup
	got := make([]jetstream.KeyValue, 4)
	for i := range got {
		wg.Go(func() {
			kv, err := b.KeyValue(t.Context())
			if err != nil {
				t.Error(err)
			}
			got[i] = kv
		})
	}
	wg.Wait()
	for _, kv := range got[1:] {
		if kv != got[0] {
			t.Fatal("concurrent first uses bound the bucket more than once")
		}
	}
	st, err := got[0].Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != time.Minute || st.History() != 3 || st.Bucket() != "B" || b.Name() != "B" {
		t.Errorf("bucket %s: ttl %s, history %d; want B, 1m, 3", st.Bucket(), st.TTL(), st.History())
	}
	if _, stream, err := b.Stream(t.Context()); err != nil || stream.CachedInfo().Config.Name != "KV_B" {
		t.Errorf("stream: %v", err)
	}
}

// An existing bucket is updated to the configuration, unless KeepExisting.
func TestUpdateOrKeep(t *testing.T) {
	js := testenv.InProcessJetStream(t)
	for _, name := range []string{"UPDATED", "KEPT"} {
		if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: "UPDATED", TTL: time.Minute}).KeyValue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ttl := ttlOf(t, js, "UPDATED"); ttl != time.Minute {
		t.Errorf("updated bucket's ttl %s, want 1m", ttl)
	}
	for _, name := range []string{"KEPT", "CREATED"} {
		if _, err := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: name, TTL: time.Minute}, kvbucket.KeepExisting()).KeyValue(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if ttl := ttlOf(t, js, "KEPT"); ttl != time.Hour {
		t.Errorf("kept bucket's ttl %s, want 1h as it was", ttl)
	}
	if ttl := ttlOf(t, js, "CREATED"); ttl != time.Minute {
		t.Errorf("missing bucket created with ttl %s, want 1m", ttl)
	}
}

// A failed bind is transient and names the bucket; a check's error comes back as it is;
// either way the next call binds again.
func TestFailureBindsAgain(t *testing.T) {
	js := testenv.InProcessJetStream(t)
	refuse := errors.New("refused")
	checks := 0
	b := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: "B"}, kvbucket.Check(func(context.Context, jetstream.KeyValue) error {
		checks++
		if checks == 1 {
			return refuse
		}
		return nil
	}))
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.KeyValue(done); !retry.Marked(err) || err.Error() != "key-value bucket B: context canceled" {
		t.Errorf("bind with a cancelled context: %v, want a transient error naming the bucket", err)
	}
	if _, err := b.KeyValue(t.Context()); err != refuse {
		t.Errorf("first check: %v, want its error as it is", err)
	}
	if _, err := b.KeyValue(t.Context()); err != nil || checks != 2 {
		t.Errorf("bind after failures: %v (%d checks), want the bucket", err, checks)
	}
	if _, err := b.KeyValue(t.Context()); err != nil || checks != 2 {
		t.Errorf("bound bucket checked again: %v (%d checks)", err, checks)
	}
}

// Latest reads what the last acknowledged write left, on the stack's three-node NATS
// cluster, where a direct get may be answered by a replica that has not applied it yet:
// each write is read back at once, through another connection, hundreds of times.
func TestLatestSeesEveryAcknowledgedWrite(t *testing.T) {
	env := testenv.Get(t)
	jetStream := func() jetstream.JetStream {
		js, err := natsjs.New(env.NATS(t), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	writerJS, readerJS := jetStream(), jetStream()
	name := testenv.Name(t, "LATEST")
	t.Cleanup(func() { _ = writerJS.DeleteKeyValue(context.Background(), name) })
	reader := kvbucket.New(readerJS, jetstream.KeyValueConfig{Bucket: name}, kvbucket.Existing())

	if _, err := reader.Latest(t.Context(), "k"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("Latest of a missing bucket: %v, want ErrBucketNotFound", err)
	}
	kv, err := kvbucket.New(writerJS, jetstream.KeyValueConfig{Bucket: name, History: 2}).KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(t.Context()); err != nil || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas != 3 {
		t.Fatalf("bucket status: %v; the test needs three replicas", err)
	}
	if _, err := reader.Latest(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("Latest of a key never written: %v, want ErrKeyNotFound", err)
	}
	for i := range 300 {
		want := fmt.Sprintf("v%d", i)
		rev, err := kv.Put(t.Context(), "k", []byte(want))
		if err != nil {
			t.Fatal(err)
		}
		e, err := reader.Latest(t.Context(), "k")
		if err != nil || string(e.Value()) != want || e.Revision() != rev || e.Operation() != jetstream.KeyValuePut || e.Key() != "k" || e.Bucket() != name {
			t.Fatalf("write %d (revision %d), read at once: %+v, %v", i, rev, e, err)
		}
		if i%50 == 0 { // a removed key reads as removed at once too
			if err := kv.Delete(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
			if e, err := reader.Latest(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyDeleted) || e.Operation() != jetstream.KeyValueDelete {
				t.Fatalf("after a delete: %+v, %v; want a delete marker and ErrKeyDeleted", e, err)
			}
			if err := kv.Purge(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
			if e, err := reader.Latest(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyDeleted) || e.Operation() != jetstream.KeyValuePurge {
				t.Fatalf("after a purge: %+v, %v; want a purge marker and ErrKeyDeleted", e, err)
			}
		}
	}
	if _, err := kvbucket.Bound(kv).Latest(t.Context(), "k"); err == nil {
		t.Error("Latest of a Bound bucket (no JetStream to ask the leader with) did not fail")
	}
}
