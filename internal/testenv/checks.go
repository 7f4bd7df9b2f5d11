package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	zkpkg "github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// The checks fault tests run after a fault: the promise kafkamender makes is that every
// event has exactly one true result, the cluster ends as asked or as before (never
// between), and nothing of its own is left behind.

// WatchResults subscribes to the result subject of event id, before the event is
// published, and returns a channel that receives every result published there (replays
// included), whole: a result too large for one message is published as a head, and read
// whole from the results stream (pipeline.ReadWhole). A result that is not JSON, or
// whose parts cannot be read, fails the test.
func WatchResults(t testing.TB, nc *nats.Conn, id string) <-chan *events.Result {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *events.Result, 8)
	sub, err := nc.Subscribe(events.ResultSubject(id), func(m *nats.Msg) {
		var head events.Result
		if err := json.Unmarshal(m.Data, &head); err != nil {
			t.Errorf("result is not JSON: %v: %s", err, m.Data)
			return
		}
		if head.Truncated == nil {
			ch <- &head
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stream, err := js.Stream(ctx, events.ResultsStream)
		if err != nil {
			t.Errorf("result of %s: %v", id, err)
			return
		}
		res, _, err := pipeline.ReadWhole(ctx, stream, m.Data)
		if err != nil {
			t.Errorf("result of %s: %v", id, err)
			return
		}
		ch <- res
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	AwaitRouted(t, nc) // the worker may publish the result on another node
	return ch
}

// NextResult returns the next result from ch (see WatchResults), counted in the tally, or
// fails the test after timeout.
func NextResult(t testing.TB, ch <-chan *events.Result, timeout time.Duration) *events.Result {
	t.Helper()
	select {
	case res := <-ch:
		CountResult()
		return res
	case <-time.After(timeout):
		t.Fatalf("no result within %s", timeout)
		return nil
	}
}

// StoredResult checks that exactly one result of event id is stored in KAFKAMENDER_RESULTS
// (the audit trail), and returns it whole (pipeline.ReadResult: a result too large for one
// message is stored in parts).
func StoredResult(t testing.TB, js jetstream.JetStream, id string) *events.Result {
	t.Helper()
	s, err := js.Stream(t.Context(), events.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	subj := events.ResultSubject(id)
	// A subscriber may hear a result a moment before the stream has stored it (the stream
	// captures the published message beside the subscribers): wait for it, but a second
	// one fails at once.
	Eventually(t, 10*time.Second, func() error {
		info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subj))
		if err != nil {
			return err
		}
		switch n := info.State.Subjects[subj]; {
		case n > 1:
			t.Fatalf("%d results stored for event %s, want exactly 1", n, id)
		case n == 0:
			return fmt.Errorf("no result stored for event %s", id)
		}
		return nil
	})
	// Read with the stream's direct gets, which any replica answers: on the NATS cluster the
	// replica that answers may not have the result yet that the leader counted above.
	var res *events.Result
	Eventually(t, 10*time.Second, func() error {
		var err error
		if res, _, err = pipeline.ReadResult(t.Context(), s, id); err != nil {
			return err
		}
		if res == nil {
			return fmt.Errorf("no result of %s stored (read from a replica of the results stream)", id)
		}
		return nil
	})
	return res
}

// Partitions reads a topic's partitions. On the legacy cluster (before Kafka 2.4) it sees
// no reassignment: use Env.Partitions there.
func Partitions(t testing.TB, cl *kgo.Client, topic string) []model.Partition {
	t.Helper()
	snap, err := kafka.ReadSnapshot(t.Context(), cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Topics[topic]
}

// Reader reads the stack cluster through cl as the worker does: with the capabilities its
// brokers have, and, in ZooKeeper mode, its ZooKeeper (before Kafka 2.4 a reassignment
// shows only in /admin/reassign_partitions).
func (e *Env) Reader(t testing.TB, cluster string, cl *kgo.Client) kafka.Reader {
	t.Helper()
	c := e.Cluster(t, cluster)
	var zk *zkpkg.Conn
	if c.Mode == stack.ModeZooKeeper {
		zk = e.ZooKeeper(t)
	}
	r, err := reader(t.Context(), c, cl, zk)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// reader is Env.Reader with its ZooKeeper connection given (nil: KRaft), without failing
// the test.
func reader(ctx context.Context, c stack.Cluster, cl *kgo.Client, zk *zkpkg.Conn) (kafka.Reader, error) {
	caps, err := kafka.Probe(ctx, cl)
	if err != nil {
		return kafka.Reader{}, fmt.Errorf("probe %s: %w", c.Name, err)
	}
	r := kafka.Reader{Client: cl, Caps: caps, Chroot: c.Chroot}
	if zk != nil {
		r.ZK = zk
	}
	return r, nil
}

// Partitions reads a topic's partitions of the stack cluster, reassignments included
// (Reader).
func (e *Env) Partitions(t testing.TB, cluster string, cl *kgo.Client, topic string) []model.Partition {
	t.Helper()
	snap, err := e.Reader(t, cluster, cl).Snapshot(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Topics[topic]
}

// CheckOutcome checks, once the cluster has settled, that each partition of topic is
// either as it was before or as want says it was asked to be (never between), and that
// res.Changes lists exactly the partitions that differ from before, with their states
// before and now, field by field (DiffChanges). leaders says whether leadership is part of
// the state (reorders) or not (replication factor). A change's bytes, when the result
// gives them (docs/contract.md: a raise's added replicas, read once in sync; absent when
// not read), must be the size of the replicas it added, as the brokers show them now.
func CheckOutcome(t testing.TB, cl *kgo.Client, res *events.Result, topic string, before []model.Partition, want func(model.Partition) bool, leaders bool) {
	t.Helper()
	checkOutcome(t, func() (*model.Snapshot, error) { return kafka.ReadSnapshot(t.Context(), cl, topic) }, cl, res, topic, before, want, leaders)
}

// CheckOutcome is the package's CheckOutcome on a stack cluster, reading it as the worker
// does (Reader): on the legacy cluster a partition is settled only once
// /admin/reassign_partitions no longer lists it.
func (e *Env) CheckOutcome(t testing.TB, cluster string, cl *kgo.Client, res *events.Result, topic string, before []model.Partition, want func(model.Partition) bool, leaders bool) {
	t.Helper()
	rd := e.Reader(t, cluster, cl)
	checkOutcome(t, func() (*model.Snapshot, error) { return rd.Snapshot(t.Context(), topic) }, cl, res, topic, before, want, leaders)
}

func checkOutcome(t testing.TB, read func() (*model.Snapshot, error), cl *kgo.Client, res *events.Result, topic string, before []model.Partition, want func(model.Partition) bool, leaders bool) {
	t.Helper()
	Eventually(t, 60*time.Second, func() error {
		snap, err := read()
		if err != nil {
			return err
		}
		now := snap.Topics[topic]
		var changed []plan.Change
		for i, p := range now {
			b := before[i]
			if p.Reassigning() {
				return fmt.Errorf("%s still reassigning (%s)", p.TopicPartition, p.Reassignment())
			}
			same := slices.Equal(p.Replicas, b.Replicas) && (!leaders || p.Leader == b.Leader)
			if !same && !want(p) {
				return fmt.Errorf("%s is between: replicas %v led by %d (before %v led by %d)", p.TopicPartition, p.Replicas, p.Leader, b.Replicas, b.Leader)
			}
			if !same {
				ch := plan.Change{TopicPartition: p.TopicPartition, ReplicasBefore: b.Replicas, ReplicasAfter: p.Replicas}
				if leaders {
					ch.LeaderBefore, ch.LeaderAfter = b.Leader, p.Leader
				}
				changed = append(changed, ch)
			}
		}
		var got []plan.Change
		for _, c := range res.Changes {
			if c.Topic != topic {
				continue
			}
			if !leaders {
				c.LeaderBefore, c.LeaderAfter = 0, 0
			}
			got = append(got, c)
		}
		if err := addedBytes(t.Context(), cl, topic, got, changed); err != nil {
			return err
		}
		if d := DiffChanges(got, changed); d != "" {
			return fmt.Errorf("the result's changes are not what the cluster shows (got: the result; want: the cluster):\n%s\nresult:  %s\ncluster: %s",
				d, FormatChanges(got), FormatChanges(changed))
		}
		return nil
	})
}

// BrokerThrottles are the dynamic throttle rates of a stack cluster's brokers, keyed
// "<broker>/<config>": in ZooKeeper mode from their config znodes (the brokers of the legacy
// cluster do not show their values: KAFKA-9625), else from DescribeConfigs. A read that
// keeps failing (see retryRead) fails the test.
func (e *Env) BrokerThrottles(t testing.TB, cluster string, cl *kgo.Client) map[string]string {
	t.Helper()
	c := e.Cluster(t, cluster)
	var out map[string]string
	if c.Mode == stack.ModeZooKeeper {
		zk := e.ZooKeeper(t)
		if err := retryRead(t, func() (err error) { out, err = zkBrokerThrottles(zk, c); return err }); err != nil {
			t.Fatalf("broker throttles of %s: %v", cluster, err)
		}
		return out
	}
	if err := retryRead(t, func() (err error) { out, err = describedBrokerThrottles(t.Context(), cl, c); return err }); err != nil {
		t.Fatalf("broker throttles of %s: %v", cluster, err)
	}
	return out
}

// addedBytes sets the bytes of each change of want whose counterpart in got (the result)
// gives bytes: the size of the replicas the change added (ReplicasAfter less
// ReplicasBefore), summed, as the brokers' log directories show them now (current
// replicas, not future ones). A change of got without bytes leaves want's at zero: the
// contract lets a result leave them out.
func addedBytes(ctx context.Context, cl *kgo.Client, topic string, got, want []plan.Change) error {
	given := map[model.TopicPartition]bool{}
	for _, c := range got {
		if c.Bytes != 0 {
			given[c.TopicPartition] = true
		}
	}
	if len(given) == 0 {
		return nil
	}
	set := kadm.TopicsSet{}
	for tp := range given {
		set.Add(topic, tp.Partition)
	}
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, set)
	if err != nil {
		return fmt.Errorf("describe log dirs of %s: %w", topic, err)
	}
	for i, c := range want {
		if !given[c.TopicPartition] {
			continue
		}
		var size int64
		for _, b := range c.ReplicasAfter {
			if slices.Contains(c.ReplicasBefore, b) {
				continue
			}
			bd, ok := dirs[b]
			if !ok {
				return fmt.Errorf("describe log dirs of %s: broker %d did not answer", topic, b)
			}
			if err := bd.Error(); err != nil {
				return fmt.Errorf("describe log dirs of broker %d: %w", b, err)
			}
			found := false
			for _, d := range bd {
				if p, ok := d.Topics[topic][c.Partition]; ok && !p.IsFuture {
					size += p.Size
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%s: broker %d shows no replica of it", c.TopicPartition, b)
			}
		}
		want[i].Bytes = size
	}
	return nil
}
