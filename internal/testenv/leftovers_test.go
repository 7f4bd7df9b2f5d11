package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// recorder is a testing.TB that records the failures reported to it instead of failing:
// how a test of a check sees what the check reports.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// CheckNoLeftovers looks where the lock is kept, and a part that cannot look fails.
func TestCheckNoLeftovers(t *testing.T) {
	env := Get(t)
	js := JetStream(t, env.NATS(t))
	cl := env.Kafka(t, "kraft")
	// A lock bucket of this test's, holding the lock of one cluster (as a worker that never
	// released it would leave it), and a topic nobody left anything on.
	bucket := strings.ToUpper(Name(t, "locks"))
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, bucket)
	})
	locked := Name(t, "locked")
	if _, err := kv.Put(t.Context(), locked, []byte(`{"worker":"gone"}`)); err != nil {
		t.Fatal(err)
	}
	topic := Name(t, "clean")
	CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)

	for _, tc := range []struct {
		name string
		l    Leftovers
		want string // in the failures reported; "": none
	}{
		{"nothing left", Leftovers{Alias: Name(t, "free"), Topics: []string{topic}, Rate: "150009", Lock: NATSLock(bucket)}, ""},
		{"lock left in NATS", Leftovers{Alias: locked, Lock: NATSLock(bucket)},
			"lock of cluster " + locked + " in NATS key-value bucket " + bucket},
		// The same lock, looked for in ZooKeeper, where these workers do not keep it: the
		// check before Leftovers.Lock, which passed whatever NATS held.
		{"lock looked for in the wrong backend", Leftovers{Alias: locked, Lock: ZooKeeperLock("/kafkamender-test/testenv")}, ""},
		{"no lock backend", Leftovers{Alias: locked}, "say where the workers keep the cluster's lock"},
		// A describe that fails (no such topic) is no "no throttle found".
		{"topic configs cannot be described", Leftovers{Alias: Name(t, "free"), Topics: []string{topic + "-missing"}, Lock: NATSLock(bucket)},
			"leftover check of the throttles of topic " + topic + "-missing cannot look"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.l.Cluster = "kraft"
			r := &recorder{TB: t}
			env.CheckNoLeftovers(r, js, cl, tc.l)
			got := r.failures()
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("CheckNoLeftovers reported:\n%s\nwant: %q", got, tc.want)
			}
			t.Logf("reported: %s", got)
		})
	}
}
