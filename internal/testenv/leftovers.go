package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	zkpkg "github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// Leftovers says what CheckNoLeftovers looks for.
type Leftovers struct {
	Cluster string // the stack cluster ("local", "kraft")
	Alias   string // the cluster name the workers used: its journal entry and lock
	Topics  []string
	// TopicThrottles are the throttled-replicas values of the topics set by others before
	// the operation: they must be as they were (the others must be unset).
	TopicThrottles map[string]string
	// Rate is the throttle rate the operation asked for: no broker may still hold it.
	Rate string
	// Lock is where the workers keep the cluster's lock. Required: a check of the wrong
	// backend finds nothing, whatever is left.
	Lock LockAt
}

// LockAt is where workers keep a cluster's lock: the lock backend of the cluster in their
// configuration (config.Config.LockBackend) and its place there.
type LockAt struct {
	Backend config.LockBackend
	// Root is lock.root (backend zookeeper): the cluster's claims are the children of
	// Root/<cluster> in the stack's ZooKeeper.
	Root string
	// Bucket is lock.nats.bucket (backend nats): the cluster's lock is its key there.
	Bucket string
}

// ZooKeeperLock is the lock of workers with lock backend zookeeper and lock.root root.
func ZooKeeperLock(root string) LockAt { return LockAt{Backend: config.LockZooKeeper, Root: root} }

// NATSLock is the lock of workers with lock backend nats and lock.nats.bucket bucket
// ("": the default bucket).
func NATSLock(bucket string) LockAt {
	if bucket == "" {
		bucket = config.DefaultLockBucket
	}
	return LockAt{Backend: config.LockNATS, Bucket: bucket}
}

func (l LockAt) String() string {
	if l.Backend == config.LockNATS {
		return "NATS key-value bucket " + l.Bucket
	}
	return "ZooKeeper " + l.Root
}

// checkTimeout bounds each part of CheckNoLeftovers: how long it waits for what a worker
// releases just after its result (the journal entry, its lock), and for the stack to answer
// again after a fault test restored it.
const checkTimeout = 30 * time.Second

// found is a leftover found, as opposed to a failure to look.
type found struct{ error }

func foundf(format string, args ...any) error { return found{fmt.Errorf(format, args...)} }

// retryRead calls read until it succeeds, for up to checkTimeout (a server of the stack
// may answer only a while after a fault test restored it), and returns its last error.
func retryRead(t testing.TB, read func() error) error { return poll(t, checkTimeout, read) }

// CheckNoLeftovers checks that nothing of ours is left: no open journal entry, no reassignment
// of the topics, no throttle of ours on a broker or on the topics, and no lock, in the
// backend the workers keep it in. Each leftover found fails the test and counts in the
// tally; so does a part of the check that cannot read what it looks at (a describe, a
// ZooKeeper or NATS read that fails for checkTimeout): a check that cannot look has not
// found that nothing is left.
func (e *Env) CheckNoLeftovers(t testing.TB, js jetstream.JetStream, cl *kgo.Client, l Leftovers) {
	t.Helper()
	tally.checks.Add(1)
	report := func(what string, err error) {
		t.Helper()
		if err == nil {
			return
		}
		tally.leftovers.Add(1)
		if errors.As(err, new(found)) {
			t.Errorf("leftover: %v", err)
			return
		}
		t.Errorf("leftover check of %s cannot look (counted as a leftover): %v", what, err)
	}
	c := e.Cluster(t, l.Cluster)
	var zk *zkpkg.Conn
	if c.Mode == stack.ModeZooKeeper || l.Lock.Backend == config.LockZooKeeper {
		zk = e.ZooKeeper(t)
	}
	var rd *kafka.Reader
	store := journal.New(js)
	// What a worker ends just after its result: polled until gone.
	report("the journal and reassignments", poll(t, checkTimeout, func() error {
		rec, err := store.Get(t.Context(), l.Alias)
		if err != nil {
			return err
		}
		if rec != nil && rec.Open() {
			return foundf("open journal entry of cluster %s: %+v", l.Alias, rec.Entry)
		}
		if rd == nil {
			r, err := reader(t.Context(), c, cl, zk)
			if err != nil {
				return err
			}
			rd = &r
		}
		ongoing, err := rd.Reassignments(t.Context(), l.Topics)
		if err != nil {
			return err
		}
		if len(ongoing) > 0 {
			return foundf("reassignments of %v: %v", l.Topics, ongoing)
		}
		return nil
	}))
	report("the lock", e.checkLock(t, js, zk, l))
	if l.Rate != "" {
		report("the broker throttles", checkBrokerThrottles(t, c, cl, zk, l.Rate))
	}
	for _, topic := range l.Topics {
		report("the throttles of topic "+topic, checkTopicThrottles(t, cl, topic, l.TopicThrottles))
	}
}

// checkLock looks for the cluster's lock where the workers keep it, until it is gone (a
// worker releases it just after its result).
func (e *Env) checkLock(t testing.TB, js jetstream.JetStream, zk *zkpkg.Conn, l Leftovers) error {
	switch l.Lock.Backend {
	case config.LockZooKeeper:
		if l.Lock.Root == "" {
			return errors.New("Leftovers.Lock: no lock root (lock.root) for backend zookeeper")
		}
		dir := l.Lock.Root + "/" + l.Alias
		return poll(t, checkTimeout, func() error {
			claims, _, err := zk.Children(dir)
			if errors.Is(err, zkpkg.ErrNoNode) {
				return nil // no lock of the cluster was ever taken
			}
			if err != nil {
				return fmt.Errorf("zookeeper %s: %w", dir, err)
			}
			if len(claims) > 0 {
				return foundf("lock claims of cluster %s in ZooKeeper %s: %v", l.Alias, dir, claims)
			}
			return nil
		})
	case config.LockNATS:
		if l.Lock.Bucket == "" {
			return errors.New("Leftovers.Lock: no bucket (lock.nats.bucket) for backend nats")
		}
		return poll(t, checkTimeout, func() error {
			// From the bucket's leader: a replica may not show the last acquire yet.
			entry, err := kvbucket.New(js, jetstream.KeyValueConfig{Bucket: l.Lock.Bucket}, kvbucket.Existing()).Latest(t.Context(), l.Alias)
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return nil // no lock was ever taken there
			}
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil // never taken, released, or expired (a delete marker reads as none)
			}
			if err != nil {
				return fmt.Errorf("lock bucket %s key %s: %w", l.Lock.Bucket, l.Alias, err)
			}
			return foundf("lock of cluster %s in NATS key-value bucket %s (revision %d, created %s): %s",
				l.Alias, l.Lock.Bucket, entry.Revision(), entry.Created().Format(time.StampMilli), entry.Value())
		})
	default:
		return fmt.Errorf("Leftovers.Lock: backend %q: say where the workers keep the cluster's lock (ZooKeeperLock, NATSLock)", l.Lock.Backend)
	}
}

// checkBrokerThrottles looks for the rate on the cluster's brokers: in ZooKeeper mode in
// their config znodes too (the brokers of the legacy cluster, 2.3, do not show the values:
// KAFKA-9625). The reads are retried; what they find is not waited for (a worker restores
// its throttles before its result).
func checkBrokerThrottles(t testing.TB, c stack.Cluster, cl *kgo.Client, zk *zkpkg.Conn, rate string) error {
	var got []map[string]string
	if c.Mode == stack.ModeZooKeeper {
		var z map[string]string
		if err := retryRead(t, func() (err error) { z, err = zkBrokerThrottles(zk, c); return err }); err != nil {
			return err
		}
		got = append(got, z)
	}
	var d map[string]string
	if err := retryRead(t, func() (err error) { d, err = describedBrokerThrottles(t.Context(), cl, c); return err }); err != nil {
		return err
	}
	got = append(got, d)
	var ours []string
	for _, m := range got {
		for k, v := range m {
			if v == rate {
				ours = append(ours, k)
			}
		}
	}
	if len(ours) > 0 {
		slices.Sort(ours)
		return foundf("our throttle rate %s is left on brokers of %s: %v", rate, c.Name, slices.Compact(ours))
	}
	return nil
}

// checkTopicThrottles checks that the throttled-replicas configs of topic hold what others
// set (theirs; absent: unset).
func checkTopicThrottles(t testing.TB, cl *kgo.Client, topic string, theirs map[string]string) error {
	var cfgs map[string]kadm.Config
	err := retryRead(t, func() error {
		rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(t.Context(), topic)
		if err != nil {
			return fmt.Errorf("describe configs of topic %s: %w", topic, err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			return fmt.Errorf("describe configs of topic %s: %w", topic, err)
		}
		if rc.Err != nil {
			return fmt.Errorf("describe configs of topic %s: %w", topic, rc.Err)
		}
		cfgs = map[string]kadm.Config{}
		for _, c := range rc.Configs {
			cfgs[c.Key] = c
		}
		for _, key := range []string{kafka.LeaderThrottledReplicas, kafka.FollowerThrottledReplicas} {
			if _, ok := cfgs[key]; !ok {
				return fmt.Errorf("describe configs of topic %s: no %s in the answer", topic, key)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, key := range []string{kafka.LeaderThrottledReplicas, kafka.FollowerThrottledReplicas} {
		c := cfgs[key]
		if got, want := c.MaybeValue(), theirs[key]; got != want {
			errs = append(errs, foundf("topic %s: %s = %q after the operation, want %q", topic, key, got, want))
		}
	}
	return errors.Join(errs...)
}

// zkBrokerThrottles reads the throttle rates from the brokers' config znodes, keyed
// "<broker>/<config>"; a broker without a config znode has none.
func zkBrokerThrottles(zk *zkpkg.Conn, c stack.Cluster) (map[string]string, error) {
	out := map[string]string{}
	for _, b := range c.Brokers {
		p := fmt.Sprintf("%s/config/brokers/%d", c.Chroot, b.ID)
		data, _, err := zk.Get(p)
		if errors.Is(err, zkpkg.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("zookeeper %s: %w", p, err)
		}
		z, err := kafka.DecodeConfigZnode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, key := range throttleRateKeys {
			if v := z.Get(key); v != nil {
				out[fmt.Sprintf("%d/%s", b.ID, key)] = *v
			}
		}
	}
	return out, nil
}

// describedBrokerThrottles reads the dynamic per-broker throttle rates through
// DescribeConfigs, keyed "<broker>/<config>". Every live broker of the cluster must answer:
// one that does not (or answers with an error) makes it fail, not look empty.
func describedBrokerThrottles(ctx context.Context, cl *kgo.Client, c stack.Cluster) (map[string]string, error) {
	// Only live brokers answer (a test may have stopped one for good): the metadata says
	// which. In ZooKeeper mode the config znodes cover the others.
	md, err := kafka.BrokerMetadata(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", c.Name, err)
	}
	var ids []int32
	for _, b := range c.Brokers {
		if slices.ContainsFunc(md.Brokers, func(m kmsg.MetadataResponseBroker) bool { return m.NodeID == b.ID }) {
			ids = append(ids, b.ID)
		}
	}
	rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("describe broker configs of %s: %w", c.Name, err)
	}
	out := map[string]string{}
	answered := map[string]bool{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describe configs of broker %s of %s: %w", rc.Name, c.Name, rc.Err)
		}
		answered[rc.Name] = true
		for _, cfg := range rc.Configs {
			if slices.Contains(throttleRateKeys, cfg.Key) && cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig && cfg.Value != nil {
				out[rc.Name+"/"+cfg.Key] = *cfg.Value
			}
		}
	}
	for _, id := range ids {
		if !answered[fmt.Sprint(id)] {
			return nil, fmt.Errorf("describe broker configs of %s: broker %d did not answer", c.Name, id)
		}
	}
	return out, nil
}

// throttleRateKeys are the broker configs a throttle rate is set in.
var throttleRateKeys = []string{kafka.LeaderThrottledRate, kafka.FollowerThrottledRate, kafka.AlterLogDirsThrottledRate}
