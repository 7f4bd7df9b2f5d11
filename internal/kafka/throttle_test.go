package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The throttle tests change broker-level throttle rates, which are cluster-wide state.
// They use rates near 1 GB/s (a rate only slows replicas that a topic lists as throttled,
// and only our own topics list any), values unique to the test, and delete on cleanup every
// rate that holds one of the test's values. They run one after the other (no t.Parallel).
//
// They check exact broker rates, so they need the brokers' dynamic throttle rates unset
// when they start and nobody else writing them meanwhile: a test elsewhere that sets broker
// rates under testenv.Get (not GetExclusive) while these run makes them fail, with a
// message that names the foreign value.

// throttleFixture is one test's topic on one cluster, the mechanism under test, and the
// values the test writes.
type throttleFixture struct {
	t       *testing.T
	cluster string
	cl      *kgo.Client
	adm     *kadm.Client
	th      kafka.Throttler
	topic   string
	brokers []int32
	base    int64           // the test's rates are base, base+1, …
	ours    map[string]bool // every rate value the test (or the code under test) wrote
	// zk and chroot read the broker rates of a cluster whose brokers hide them (Kafka
	// 2.3: KAFKA-9625) from their config znodes; nil for the others.
	zk     *zk.Conn
	chroot string
}

// The layout of every test: partitions 0 and 1 on brokers 1 and 2 (the sources, leaders
// in the spec), both copying to broker 3 (a follower only). Broker 4 of "local" is in no
// spec; broker 3 never leads, brokers 1 and 2 never follow.
var (
	throttleAssignment = [][]int32{{1, 2}, {2, 1}}
	throttleLeaders    = map[int32][]int32{0: {1, 2}, 1: {2, 1}}
	throttleFollowers  = map[int32][]int32{0: {3}, 1: {3}}
)

// forEachCluster runs a test on each mechanism where it is safe: IncrementalAlterConfigs
// on Kafka 3.9 (ZooKeeper mode) and 4 (KRaft), the config znodes on 3.9 and on 2.3 (the
// legacy cluster, whose brokers hide their throttle rates from DescribeConfigs).
func forEachCluster(t *testing.T, fn func(f *throttleFixture)) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, tc := range []struct {
		cluster string
		mech    kafka.ConfigMechanism
	}{
		{"local", kafka.ConfigIncremental},
		{"kraft", kafka.ConfigIncremental},
		{"local", kafka.ConfigZnodes},
		{"legacy", kafka.ConfigZnodes},
	} {
		t.Run(tc.cluster+"/"+string(tc.mech), func(t *testing.T) {
			f := newThrottleFixture(t, env, tc.cluster, tc.mech)
			fn(f)
		})
	}
}

// newThrottleFixture creates the test's topic on cluster and a Throttler through mech.
func newThrottleFixture(t *testing.T, env *testenv.Env, cluster string, mech kafka.ConfigMechanism) *throttleFixture {
	t.Helper()
	cl := env.Kafka(t, cluster)
	f := &throttleFixture{
		t: t, cluster: cluster, cl: cl, adm: kadm.NewClient(cl),
		th:    kafka.APIThrottler(cl),
		topic: testenv.Name(t, "throttle"),
		base:  900_000_000 + rand.Int64N(90_000_000)*10,
		ours:  map[string]bool{},
	}
	c := env.Cluster(t, cluster)
	if mech == kafka.ConfigZnodes {
		sess, held := lockFor(t)
		f.th = kafka.Throttler{Client: cl, Mechanism: mech, ZK: sess.Conn(), Chroot: c.Chroot, Writer: held}
	}
	if c.Version == stack.Kafka23Version {
		f.zk, f.chroot = env.ZooKeeper(t), c.Chroot
	}
	md, err := f.adm.BrokerMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		f.brokers = append(f.brokers, b.NodeID)
	}
	slices.Sort(f.brokers)
	f.requireNoBrokerRates()
	t.Cleanup(f.cleanup)
	testenv.CreateTopic(t, cl, f.topic, throttleAssignment, nil)
	return f
}

// brokerRate is a broker's dynamic value of key: from DescribeConfigs, or from its config
// znode on a cluster whose brokers hide it.
func (f *throttleFixture) brokerRate(id string, cfgs []kadm.Config, key string) (*string, error) {
	if f.zk == nil {
		return dynamic(cfgs, key, kmsg.ConfigSourceDynamicBrokerConfig), nil
	}
	data, _, err := f.zk.Get(f.chroot + "/config/brokers/" + id)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	z, err := kafka.DecodeConfigZnode(data)
	if err != nil {
		return nil, err
	}
	return z.Get(key), nil
}

func (f *throttleFixture) rate(i int64) string {
	v := strconv.FormatInt(f.base+i, 10)
	f.ours[v] = true
	return v
}

func (f *throttleFixture) spec() kafka.ThrottleSpec {
	return kafka.OneTopic(f.topic, f.base, throttleLeaders, throttleFollowers)
}

// cleanup deletes every broker rate that holds a value of this test: whatever it set,
// and nothing that someone else set meanwhile. Brokers show a change a moment after it
// is accepted (up to a few hundred milliseconds in ZooKeeper mode), so it looks again
// until it has seen none of the test's values for a second.
func (f *throttleFixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.ours[strconv.FormatInt(f.base, 10)] = true
	quiet := time.Now()
	for time.Since(quiet) < time.Second {
		var left []string
		rcs, err := f.adm.DescribeBrokerConfigs(ctx, f.brokers...)
		if err != nil {
			left = append(left, err.Error())
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				left = append(left, fmt.Sprintf("broker %s: %v", rc.Name, rc.Err))
				continue
			}
			for _, key := range []string{kafka.LeaderThrottledRate, kafka.FollowerThrottledRate} {
				v, err := f.brokerRate(rc.Name, rc.Configs, key)
				if err != nil {
					left = append(left, err.Error())
				}
				if v == nil || !f.ours[*v] {
					continue
				}
				left = append(left, fmt.Sprintf("broker %s %s = %s", rc.Name, key, *v))
				if err := alter(ctx, f.adm, kafka.EntityBroker, rc.Name, key, nil); err != nil {
					left = append(left, fmt.Sprintf("delete it: %v", err))
				}
			}
		}
		if len(left) > 0 {
			quiet = time.Now()
		}
		select {
		case <-ctx.Done():
			f.t.Errorf("cleanup: the test's throttle rates may be left on the brokers: %s", strings.Join(left, "; "))
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requireNoBrokerRates fails the test when a broker has a dynamic throttle rate: someone
// else's, which the test's expectations cannot account for.
func (f *throttleFixture) requireNoBrokerRates() {
	f.t.Helper()
	rcs, err := f.adm.DescribeBrokerConfigs(f.t.Context(), f.brokers...)
	if err != nil {
		f.t.Fatal(err)
	}
	var found []string
	for _, rc := range rcs {
		for _, key := range []string{kafka.LeaderThrottledRate, kafka.FollowerThrottledRate} {
			v, err := f.brokerRate(rc.Name, rc.Configs, key)
			if err != nil {
				f.t.Fatal(err)
			}
			if v != nil {
				found = append(found, fmt.Sprintf("broker %s %s = %s", rc.Name, key, *v))
			}
		}
	}
	if len(found) > 0 {
		f.t.Fatalf("cluster %s has broker throttle rates set by someone else (another test or tool running now?): %s; "+
			"these tests need them unset", f.cluster, strings.Join(found, ", "))
	}
}

func dynamic(cfgs []kadm.Config, key string, source kmsg.ConfigSource) *string {
	for _, c := range cfgs {
		if c.Key == key && c.Source == source && c.Value != nil {
			v := *c.Value
			return &v
		}
	}
	return nil
}

// alter sets (value non-nil) or deletes one config, as someone else would.
func alter(ctx context.Context, adm *kadm.Client, entity, name, key string, value *string) error {
	c := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key}
	if value != nil {
		c = kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: value}
	}
	var (
		resp kadm.AlterConfigsResponses
		err  error
	)
	if entity == kafka.EntityBroker {
		id, _ := strconv.Atoi(name)
		resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{c}, int32(id))
	} else {
		resp, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{c}, name)
	}
	if err != nil {
		return err
	}
	for _, r := range resp {
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	return nil
}

// values reads the dynamic value of one config: a broker's from that broker, a topic's
// from every broker (each must show the same value; else the read is an error).
func (f *throttleFixture) value(entity, name, key string) (*string, error) {
	ctx := f.t.Context()
	if entity == kafka.EntityBroker {
		id, _ := strconv.Atoi(name)
		rcs, err := f.adm.DescribeBrokerConfigs(ctx, int32(id))
		if err != nil {
			return nil, err
		}
		rc, err := rcs.On(name, nil)
		if err != nil {
			return nil, err
		}
		if rc.Err != nil {
			return nil, rc.Err
		}
		v, err := f.brokerRate(name, rc.Configs, key)
		if err != nil || f.zk == nil {
			return v, err
		}
		// The znode holds the value; the broker shows only whether one is set, once it
		// has applied it.
		shown := slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool {
			return c.Key == key && c.Source == kmsg.ConfigSourceDynamicBrokerConfig
		})
		if shown != (v != nil) {
			return nil, fmt.Errorf("broker %s does not show %s = %s yet", name, key, str(v))
		}
		return v, nil
	}
	var first *string
	for i, b := range f.brokers {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = name
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, f.cl.Broker(int(b)))
		if err != nil {
			return nil, fmt.Errorf("broker %d: %w", b, err)
		}
		if len(resp.Resources) != 1 {
			return nil, fmt.Errorf("broker %d: %d resources", b, len(resp.Resources))
		}
		r := resp.Resources[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("broker %d: %w", b, err)
		}
		var v *string
		for _, c := range r.Configs {
			if c.Name == key && c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				x := *c.Value
				v = &x
			}
		}
		if i == 0 {
			first = v
		} else if str(v) != str(first) {
			return nil, fmt.Errorf("brokers disagree on %s %s: %s (broker %d) and %s (broker %d)", name, key, str(first), f.brokers[0], str(v), b)
		}
	}
	return first, nil
}

func str(v *string) string {
	if v == nil {
		return "<unset>"
	}
	return strconv.Quote(*v)
}

func ptr(s string) *string { return &s }

// want waits until the config holds want (nil: unset) everywhere; configs reach brokers a
// moment after they are written.
func (f *throttleFixture) want(entity, name, key string, want *string) {
	f.t.Helper()
	testenv.Eventually(f.t, 30*time.Second, func() error {
		got, err := f.value(entity, name, key)
		if err != nil {
			return err
		}
		if str(got) != str(want) {
			return fmt.Errorf("%s %s %s = %s, want %s", entity, name, key, str(got), str(want))
		}
		return nil
	})
}

// is checks that the config holds want now (for values that must never have changed).
func (f *throttleFixture) is(entity, name, key string, want *string) {
	f.t.Helper()
	got, err := f.value(entity, name, key)
	if err != nil {
		f.t.Fatal(err)
	}
	if str(got) != str(want) {
		f.t.Errorf("%s %s %s = %s, want %s", entity, name, key, str(got), str(want))
	}
}

// setOther writes a value as someone else would, and waits until every broker shows it.
func (f *throttleFixture) setOther(entity, name, key string, value *string) {
	f.t.Helper()
	if err := alter(f.t.Context(), f.adm, entity, name, key, value); err != nil {
		f.t.Fatalf("set %s %s %s: %v", entity, name, key, err)
	}
	f.want(entity, name, key, value)
}

func broker(id int32) string { return strconv.Itoa(int(id)) }

// journal stores keys as the worker's journal does (JSON) and reads them back.
func journal(t *testing.T, keys []kafka.ThrottleKey) []kafka.ThrottleKey {
	t.Helper()
	data, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.ThrottleKey
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func keyNames(keys []kafka.ThrottleKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.String())
	}
	return out
}

func keptNames(kept []kafka.KeptThrottle) []string {
	var out []string
	for _, k := range kept {
		out = append(out, k.String()+"="+str(k.Current))
	}
	return out
}

// apply applies keys and checks that it fails on nothing and keeps exactly want
// (keptNames form: none when want is empty).
func (f *throttleFixture) apply(ctx context.Context, what string, keys []kafka.ThrottleKey, want ...string) {
	f.t.Helper()
	kept, err := f.th.ApplyThrottles(ctx, keys)
	f.checkKept(what, kept, err, want)
}

// restore restores keys and checks it as apply does.
func (f *throttleFixture) restore(ctx context.Context, what string, keys []kafka.ThrottleKey, want ...string) {
	f.t.Helper()
	kept, err := f.th.RestoreThrottles(ctx, keys)
	f.checkKept(what, kept, err, want)
}

func (f *throttleFixture) checkKept(what string, kept []kafka.KeptThrottle, err error, want []string) {
	f.t.Helper()
	if err != nil || !slices.Equal(keptNames(kept), want) {
		f.t.Fatalf("%s: kept %q, %v; want kept %q", what, keptNames(kept), err, want)
	}
}

// untouched are the configs no plan of these tests sets: the follower rate of the sources
// (1, 2), the leader rate of the follower (3), both rates of brokers in no spec.
func (f *throttleFixture) untouched() [][2]string {
	out := [][2]string{{"1", kafka.FollowerThrottledRate}, {"2", kafka.FollowerThrottledRate}, {"3", kafka.LeaderThrottledRate}}
	for _, b := range f.brokers {
		if b > 3 {
			out = append(out, [2]string{broker(b), kafka.LeaderThrottledRate}, [2]string{broker(b), kafka.FollowerThrottledRate})
		}
	}
	return out
}

func TestThrottleRoundTripNoPriorValues(t *testing.T) {
	forEachCluster(t, func(f *throttleFixture) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		keys, err := f.th.PlanThrottles(ctx, f.spec())
		if err != nil {
			f.t.Fatal(err)
		}
		rate := f.rate(0)
		want := []kafka.ThrottleKey{
			{Entity: "broker", Name: "1", Key: kafka.LeaderThrottledRate, Ours: rate},
			{Entity: "broker", Name: "2", Key: kafka.LeaderThrottledRate, Ours: rate},
			{Entity: "broker", Name: "3", Key: kafka.FollowerThrottledRate, Ours: rate},
			{Entity: "topic", Name: f.topic, Key: kafka.FollowerThrottledReplicas, Ours: "0:3,1:3"},
			{Entity: "topic", Name: f.topic, Key: kafka.LeaderThrottledReplicas, Ours: "0:1,0:2,1:1,1:2"},
		}
		if !slices.Equal(keyNames(keys), keyNames(want)) || len(keys) != len(want) {
			f.t.Fatalf("plan = %q, want %q", keyNames(keys), keyNames(want))
		}
		for i, k := range keys {
			if k.Before != nil || k.Ours != want[i].Ours {
				f.t.Errorf("plan %s: before %s ours %q, want before unset, ours %q", k, str(k.Before), k.Ours, want[i].Ours)
			}
		}
		keys = journal(f.t, keys)

		f.apply(ctx, "apply", keys)
		// Apply returns once the brokers show the values: no waiting here.
		for _, k := range keys {
			f.is(k.Entity, k.Name, k.Key, &k.Ours)
		}
		// A second apply (a worker restarted after the write) changes nothing.
		f.apply(ctx, "second apply", keys)
		// Planning again now finds our values: nothing left to set.
		if again, err := f.th.PlanThrottles(ctx, f.spec()); err != nil || len(again) > 0 {
			f.t.Errorf("plan while applied = %q, %v; want nothing", keyNames(again), err)
		}
		for _, u := range f.untouched() {
			f.is(kafka.EntityBroker, u[0], u[1], nil)
		}

		f.restore(ctx, "restore", keys)
		for _, k := range keys {
			f.is(k.Entity, k.Name, k.Key, nil) // deleted, and shown, when Restore returns
		}
		// Restore twice is harmless: nothing written, nothing reported.
		f.restore(ctx, "second restore", keys)
		for _, k := range keys {
			f.is(k.Entity, k.Name, k.Key, nil)
		}
		for _, u := range f.untouched() {
			f.is(kafka.EntityBroker, u[0], u[1], nil)
		}
	})
}

func TestThrottleRestoresPriorValuesAndWritesOnlyPlannedKeys(t *testing.T) {
	forEachCluster(t, func(f *throttleFixture) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		// Someone else's throttles: on keys we plan (broker 1's leader rate, broker 3's
		// follower rate, the topic's leader list), on keys we do not plan (broker 3's
		// leader rate, broker 1's follower rate), and "*" for the topic's followers
		// (every replica: ours are in it already).
		prior1L, prior3F, other3L, other1F := f.rate(1), f.rate(2), f.rate(3), f.rate(4)
		f.setOther("broker", "1", kafka.LeaderThrottledRate, &prior1L)
		f.setOther("broker", "3", kafka.FollowerThrottledRate, &prior3F)
		f.setOther("broker", "3", kafka.LeaderThrottledRate, &other3L)
		f.setOther("broker", "1", kafka.FollowerThrottledRate, &other1F)
		f.setOther("topic", f.topic, kafka.LeaderThrottledReplicas, ptr("1:1"))
		f.setOther("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("*"))

		keys, err := f.th.PlanThrottles(ctx, f.spec())
		if err != nil {
			f.t.Fatal(err)
		}
		rate := f.rate(0)
		want := []kafka.ThrottleKey{
			{Entity: "broker", Name: "1", Key: kafka.LeaderThrottledRate, Before: &prior1L, Ours: rate},
			{Entity: "broker", Name: "2", Key: kafka.LeaderThrottledRate, Ours: rate},
			{Entity: "broker", Name: "3", Key: kafka.FollowerThrottledRate, Before: &prior3F, Ours: rate},
			{Entity: "topic", Name: f.topic, Key: kafka.LeaderThrottledReplicas, Before: ptr("1:1"), Ours: "0:1,0:2,1:1,1:2"},
		}
		if !slices.Equal(keyNames(keys), keyNames(want)) {
			f.t.Fatalf("plan = %q, want %q", keyNames(keys), keyNames(want))
		}
		for i, k := range keys {
			if str(k.Before) != str(want[i].Before) || k.Ours != want[i].Ours {
				f.t.Errorf("plan %s: before %s ours %q, want before %s ours %q", k, str(k.Before), k.Ours, str(want[i].Before), want[i].Ours)
			}
		}
		keys = journal(f.t, keys)

		f.apply(ctx, "apply", keys)
		for _, k := range keys {
			f.is(k.Entity, k.Name, k.Key, &k.Ours)
		}
		f.is("broker", "3", kafka.LeaderThrottledRate, &other3L)
		f.is("broker", "1", kafka.FollowerThrottledRate, &other1F)
		f.is("broker", "2", kafka.FollowerThrottledRate, nil)
		f.is("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("*"))

		// Someone changes a key we never planned while the copy runs: restoring must not
		// write it back (a restore of every prior, as before, would).
		other3L2 := f.rate(5)
		f.setOther("broker", "3", kafka.LeaderThrottledRate, &other3L2)

		f.restore(ctx, "restore", keys)
		check := func() {
			f.t.Helper()
			f.is("broker", "1", kafka.LeaderThrottledRate, &prior1L)
			f.is("broker", "2", kafka.LeaderThrottledRate, nil)
			f.is("broker", "3", kafka.FollowerThrottledRate, &prior3F)
			f.is("topic", f.topic, kafka.LeaderThrottledReplicas, ptr("1:1"))
			f.is("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("*"))
			f.is("broker", "3", kafka.LeaderThrottledRate, &other3L2)
			f.is("broker", "1", kafka.FollowerThrottledRate, &other1F)
			f.is("broker", "2", kafka.FollowerThrottledRate, nil)
		}
		check()
		f.restore(ctx, "second restore", keys)
		check()
	})
}

func TestThrottleKeepsValueChangedAfterApply(t *testing.T) {
	forEachCluster(t, func(f *throttleFixture) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		keys, err := f.th.PlanThrottles(ctx, f.spec())
		if err != nil {
			f.t.Fatal(err)
		}
		keys = journal(f.t, keys)
		f.apply(ctx, "apply", keys)
		// An operator lowers broker 2's leader rate and adds a replica to the topic's
		// follower list while the copy runs.
		theirs := f.rate(7)
		f.setOther("broker", "2", kafka.LeaderThrottledRate, &theirs)
		f.setOther("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("0:3,0:4,1:3"))

		wantKept := []string{
			"broker 2 " + kafka.LeaderThrottledRate + "=" + str(&theirs),
			"topic " + f.topic + " " + kafka.FollowerThrottledReplicas + `="0:3,0:4,1:3"`,
		}
		for i := range 2 { // a second restore reports them again and changes nothing
			f.restore(ctx, fmt.Sprintf("restore %d", i+1), keys, wantKept...)
			f.is("broker", "2", kafka.LeaderThrottledRate, &theirs)
			f.is("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("0:3,0:4,1:3"))
			f.is("broker", "1", kafka.LeaderThrottledRate, nil)
			f.is("broker", "3", kafka.FollowerThrottledRate, nil)
			f.is("topic", f.topic, kafka.LeaderThrottledReplicas, nil)
		}
	})
}

func TestThrottleKeepsValueChangedBetweenPlanAndApply(t *testing.T) {
	forEachCluster(t, func(f *throttleFixture) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		keys, err := f.th.PlanThrottles(ctx, f.spec())
		if err != nil {
			f.t.Fatal(err)
		}
		keys = journal(f.t, keys)
		// Between the plan (journalled) and the apply, someone sets broker 3's follower
		// rate and the topic's leader list.
		theirs := f.rate(8)
		f.setOther("broker", "3", kafka.FollowerThrottledRate, &theirs)
		f.setOther("topic", f.topic, kafka.LeaderThrottledReplicas, ptr("0:1"))

		wantKept := []string{
			"broker 3 " + kafka.FollowerThrottledRate + "=" + str(&theirs),
			"topic " + f.topic + " " + kafka.LeaderThrottledReplicas + `="0:1"`,
		}
		f.apply(ctx, "apply", keys, wantKept...)
		f.is("broker", "3", kafka.FollowerThrottledRate, &theirs)
		f.is("topic", f.topic, kafka.LeaderThrottledReplicas, ptr("0:1"))
		rate := f.rate(0)
		f.is("broker", "1", kafka.LeaderThrottledRate, &rate)
		f.is("broker", "2", kafka.LeaderThrottledRate, &rate)
		f.is("topic", f.topic, kafka.FollowerThrottledReplicas, ptr("0:3,1:3"))

		// Restore puts back what we set and leaves theirs (reported again: not ours).
		f.restore(ctx, "restore", keys, wantKept...)
		f.is("broker", "3", kafka.FollowerThrottledRate, &theirs)
		f.is("topic", f.topic, kafka.LeaderThrottledReplicas, ptr("0:1"))
		f.is("broker", "1", kafka.LeaderThrottledRate, nil)
		f.is("broker", "2", kafka.LeaderThrottledRate, nil)
		f.is("topic", f.topic, kafka.FollowerThrottledReplicas, nil)
	})
}

// A journal that names a topic deleted since: restoring skips its keys (its configs went
// with it) and still restores the brokers.
func TestThrottleRestoreAfterTopicDeleted(t *testing.T) {
	forEachCluster(t, func(f *throttleFixture) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		keys, err := f.th.PlanThrottles(ctx, f.spec())
		if err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.th.ApplyThrottles(ctx, keys); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.adm.DeleteTopic(ctx, f.topic); err != nil {
			f.t.Fatal(err)
		}
		testenv.Eventually(f.t, 60*time.Second, func() error {
			for _, b := range f.brokers {
				req := kmsg.NewPtrDescribeConfigsRequest()
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType = kmsg.ConfigResourceTypeTopic
				rr.ResourceName = f.topic
				req.Resources = append(req.Resources, rr)
				resp, err := req.RequestWith(ctx, f.cl.Broker(int(b)))
				if err != nil {
					return err
				}
				if len(resp.Resources) != 1 || !errors.Is(kerr.ErrorForCode(resp.Resources[0].ErrorCode), kerr.UnknownTopicOrPartition) {
					return fmt.Errorf("broker %d still knows topic %s", b, f.topic)
				}
			}
			return nil
		})
		f.restore(ctx, "restore", keys)
		for _, b := range []string{"1", "2"} {
			f.is("broker", b, kafka.LeaderThrottledRate, nil)
		}
		f.is("broker", "3", kafka.FollowerThrottledRate, nil)
	})
}

func TestThrottleRejectsBadKeys(t *testing.T) {
	// Checked before any request: no cluster needed.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, keys := range [][]kafka.ThrottleKey{
		{{Entity: "cluster", Name: "1", Key: kafka.LeaderThrottledRate, Ours: "1"}},
		{{Entity: "broker", Name: "one", Key: kafka.LeaderThrottledRate, Ours: "1"}},
		{{Entity: "topic", Name: "", Key: kafka.LeaderThrottledReplicas, Ours: "*"}},
		{{Entity: "broker", Name: "1", Key: "", Ours: "1"}},
		{{Entity: "broker", Name: "1", Key: kafka.LeaderThrottledRate, Ours: "1"}, {Entity: "broker", Name: "1", Key: kafka.LeaderThrottledRate, Ours: "2"}},
	} {
		if _, err := kafka.APIThrottler(cl).ApplyThrottles(t.Context(), keys); err == nil {
			t.Errorf("ApplyThrottles(%+v) accepted", keys)
		}
		if _, err := kafka.APIThrottler(cl).RestoreThrottles(t.Context(), keys); err == nil {
			t.Errorf("RestoreThrottles(%+v) accepted", keys)
		}
	}
	if _, err := kafka.APIThrottler(cl).PlanThrottles(t.Context(), kafka.OneTopic("t", 0, throttleLeaders, nil)); err == nil {
		t.Error("PlanThrottles with rate 0 accepted")
	}
	if keys, err := kafka.APIThrottler(cl).ApplyThrottles(t.Context(), nil); err != nil || keys != nil {
		t.Errorf("ApplyThrottles(nil) = %v, %v", keys, err)
	}
}

// Kafka 2.3 reports per-broker throttle rates as sensitive and hides their values
// (KAFKA-9625): through IncrementalAlterConfigs alone they cannot be compared and
// restored. A rate someone else set is refused at the plan; a rate of ours found hidden
// right after our write is put back at once, and the apply fails: nothing of ours stays.
func TestThrottleRefusesHiddenValues(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newThrottleFixture(t, env, "legacy", kafka.ConfigIncremental)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	keys, err := f.th.PlanThrottles(ctx, f.spec())
	if err != nil {
		t.Fatalf("plan with nothing set: %v", err)
	}
	_, err = f.th.ApplyThrottles(ctx, journal(t, keys))
	if !errors.Is(err, kafka.ErrHiddenConfig) || !strings.Contains(err.Error(), "values before were put back") {
		t.Fatalf("apply on brokers that hide the rates = %v, want ErrHiddenConfig, put back", err)
	}
	for _, k := range keys {
		f.want(k.Entity, k.Name, k.Key, nil)
	}

	theirs := f.rate(1)
	f.setOther("broker", "1", kafka.LeaderThrottledRate, &theirs)
	if _, err := f.th.PlanThrottles(ctx, f.spec()); !errors.Is(err, kafka.ErrHiddenConfig) || !strings.Contains(err.Error(), "broker 1 "+kafka.LeaderThrottledRate) {
		t.Fatalf("plan with a hidden rate set = %v, want ErrHiddenConfig naming broker 1's leader rate", err)
	}
	f.is("broker", "1", kafka.LeaderThrottledRate, &theirs)
}
