package kvbucket_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
// each write is read back at once, through another connection, hundreds of times, by
// Latest (of a bucket bound to write, and of one bound Existing) and by the Get of the
// bucket bound to write.
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
	config := jetstream.KeyValueConfig{Bucket: name, History: 2}
	kv, err := kvbucket.New(writerJS, config).KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(t.Context()); err != nil || st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas != 3 {
		t.Fatalf("bucket status: %v; the test needs three replicas", err)
	}
	reader := kvbucket.New(readerJS, config)
	rkv, err := reader.KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	existing := kvbucket.New(readerJS, config, kvbucket.Existing()) // a reader's: its Get is a direct get, its Latest is not
	if _, err := reader.Latest(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("Latest of a key never written: %v, want ErrKeyNotFound", err)
	}
	if _, err := rkv.Get(t.Context(), "k.>"); !errors.Is(err, jetstream.ErrInvalidKey) {
		t.Fatalf("Get of a wildcard: %v, want ErrInvalidKey", err)
	}
	for i := range 300 {
		want := fmt.Sprintf("v%d", i)
		rev, err := kv.Put(t.Context(), "k", []byte(want))
		if err != nil {
			t.Fatal(err)
		}
		read := []func(context.Context, string) (jetstream.KeyValueEntry, error){reader.Latest, rkv.Get, existing.Latest}[i%3]
		e, err := read(t.Context(), "k")
		if err != nil || string(e.Value()) != want || e.Revision() != rev || e.Operation() != jetstream.KeyValuePut || e.Key() != "k" || e.Bucket() != name {
			t.Fatalf("write %d (revision %d), read at once: %+v, %v", i, rev, e, err)
		}
		if i%50 == 0 { // a removed key reads as removed at once too
			if err := kv.Delete(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
			if e, err := rkv.Get(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatalf("after a delete: %+v, %v; want ErrKeyNotFound", e, err)
			}
			if err := kv.Purge(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
			if e, err := rkv.Get(t.Context(), "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatalf("after a purge: %+v, %v; want ErrKeyNotFound", e, err)
			}
		}
	}
	if err := writerJS.DeleteKeyValue(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if _, err := rkv.Get(t.Context(), "k"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("Get after the bucket was deleted: %v, want ErrBucketNotFound", err)
	}
}

// A user allowed the direct get but not the leader's message get (the permissions
// documented before leader reads) still reads: the first read waits for its refused
// request to time out, then reads with the direct get, and every later read goes
// straight to the direct get (the server logs one violation).
func TestLatestFallsBackWhenTheLeaderReadIsRefused(t *testing.T) {
	v := &testenv.Violations{}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true,
		Users: []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.>", "$KV.>"}, Deny: []string{"$JS.API.STREAM.MSG.GET.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		}}}}
	s := testenv.StartNATSServer(t, opts, v)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("u", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: "REFUSED"}).KeyValue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rev, err := kv.Put(t.Context(), "k", fmt.Appendf(nil, "v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if e, err := kv.Get(t.Context(), "k"); err != nil || e.Revision() != rev {
			t.Fatalf("read %d: %+v, %v", i, e, err)
		}
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := len(v.Lines()); n != 1 {
			return fmt.Errorf("%d violations logged, want the first read's only", n)
		}
		return nil
	})
}
