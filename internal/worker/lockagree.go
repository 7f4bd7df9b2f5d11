package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// lockLocation describes where the lock of a cluster lives, the same way on every worker
// configured alike.
func lockLocation(cfg *config.Config, cluster string) string {
	if cfg.LockBackend(cluster) == config.LockNATS {
		return "nats kv " + cfg.Lock.NATS.Bucket
	}
	connect := cfg.Lock.ZooKeeper
	if cl := cfg.Clusters[cluster]; cl != nil && cl.ZooKeeper != "" {
		connect = cl.ZooKeeper
	}
	servers, _, err := config.ParseZKConnect(connect)
	if err != nil {
		servers = []string{connect}
	}
	servers = slices.Sorted(slices.Values(servers))
	return "zookeeper " + strings.Join(servers, ",") + " " + cfg.Lock.Root
}

// lockBackends is the bucket of the fleet's lock locations (events.LockBackendsBucket),
// bound on first use.
func lockBackends(js jetstream.JetStream) *kvbucket.Bucket {
	return kvbucket.New(js, jetstream.KeyValueConfig{Bucket: events.LockBackendsBucket, History: 1, MaxBytes: 1 << 20,
		Description: "where the kafkamender fleet keeps each cluster's lock (key = cluster)"})
}

// errLockMismatch is a permanent refusal: the fleet keeps the lock elsewhere.
var errLockMismatch = errors.New("lock location mismatch")

// agreedBackend takes a cluster's lock only once the fleet's record of where it lives
// agrees with this worker's configuration.
//
// The fleet records, per cluster, where it keeps the cluster's lock
// (events.LockBackendsBucket). Two workers whose configurations disagree about it (one on
// ZooKeeper, one on NATS, or two ensembles) would each take "the" lock and both believe
// they hold it; so the first worker to take a cluster's lock records its lock's location
// there, and a worker whose location differs refuses to take the lock (its events for the
// cluster fail, saying why) and refuses to start when it finds the mismatch at start-up.
// To move a cluster to another backend: stop every worker, change the configurations, and
// delete the record (nats kv del KAFKAMENDER_LOCK_BACKENDS <cluster>).
type agreedBackend struct {
	locks.Backend
	records  *kvbucket.Bucket // lockBackends
	cluster  string
	location string

	mu     sync.Mutex
	agreed bool
}

func (a *agreedBackend) Acquire(ctx context.Context, cluster, eventID string, opts ...locks.AcquireOption) (locks.Lease, error) {
	if err := a.check(ctx); err != nil {
		return nil, err
	}
	return a.Backend.Acquire(ctx, cluster, eventID, opts...)
}

// check records this worker's lock location for the cluster, or compares it with the one
// recorded. A mismatch is permanent; NATS being unreachable is transient.
func (a *agreedBackend) check(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.agreed {
		return nil
	}
	kv, err := a.records.KeyValue(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: read the fleet's lock locations: %w", a.cluster, err)
	}
	_, err = kv.Create(ctx, a.cluster, []byte(a.location))
	switch {
	case err == nil:
		a.agreed = true
		return nil
	case !errors.Is(err, jetstream.ErrKeyExists):
		return retry.Transient(fmt.Errorf("cluster %s: record the lock location: %w", a.cluster, err))
	}
	e, err := kv.Get(ctx, a.cluster)
	if err != nil {
		return retry.Transient(fmt.Errorf("cluster %s: read the lock location: %w", a.cluster, err))
	}
	if got := string(e.Value()); got != a.location {
		return fmt.Errorf("%w: cluster %s: this worker keeps the cluster's lock in %q, but the fleet keeps it in %q "+
			"(recorded in the NATS key-value bucket %s): refusing to take it, as two workers would then both hold it; "+
			"make this worker's configuration agree, or, with every worker stopped, delete the record (nats kv del %s %s)",
			errLockMismatch, a.cluster, a.location, got, events.LockBackendsBucket, events.LockBackendsBucket, a.cluster)
	}
	a.agreed = true
	return nil
}
