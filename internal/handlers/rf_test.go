package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/metrics/metricstest"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// countRecords reads the whole topic from the start and counts records per partition.
func countRecords(t *testing.T, env *testenv.Env, cluster, topic string, partitions, want int) {
	t.Helper()
	cl := env.Kafka(t, cluster, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]int{}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for total := 0; total < partitions*want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records (%v)", total, partitions*want, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition]++; total++ })
	}
	for p := range partitions {
		if got[int32(p)] != want {
			t.Fatalf("partition %d: %d records, want %d", p, got[int32(p)], want)
		}
	}
}

func rfData(topic string, rf int, extra map[string]any) map[string]any {
	d := map[string]any{"topic": topic, "replication_factor": rf}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

// RF 2 → 3 → 2 → 1 → 3 on a topic with data: each step reaches the factor, surviving
// replicas keep their order, the leader stays, the data stays readable, and exactly
// |Δ| × partitions replicas are added or removed.
func TestReplicationFactorSteps(t *testing.T) {
	env := testenv.Get(t)
	for _, tc := range []struct {
		cluster string
		initial [][]int32
	}{
		{"local", [][]int32{{1, 2}, {2, 3}, {3, 4}, {4, 1}}},
		{"kraft", [][]int32{{1, 2}, {2, 3}, {3, 1}}},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			f.start("worker-1")
			cl := env.Kafka(t, tc.cluster, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			topic := testenv.Name(t, "rf")
			testenv.CreateTopic(t, cl, topic, tc.initial, nil)
			parts := len(tc.initial)
			testenv.Produce(t, cl, topic, parts, 20, 1000)
			prev := state(t, f, topic)
			for _, rf := range []int{3, 2, 1, 3} {
				res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, rf, nil)))
				if res.Status != events.StatusSucceeded {
					t.Fatalf("rf %d: %s (%s) %+v", rf, res.Status, res.Error, res.Skipped)
				}
				var cur []model.Partition
				testenv.Eventually(t, 30*time.Second, func() error {
					cur = state(t, f, topic)
					for _, p := range cur {
						if len(p.Replicas) != rf || len(p.ISR) != rf {
							return fmt.Errorf("rf %d: %s replicas %v isr %v", rf, p.TopicPartition, p.Replicas, p.ISR)
						}
					}
					return nil
				})
				delta := 0
				for i, p := range cur {
					before := prev[i]
					if p.Leader != before.Leader {
						t.Errorf("rf %d: %s leader %d -> %d", rf, p.TopicPartition, before.Leader, p.Leader)
					}
					// Survivors keep their relative order.
					var kept []int32
					for _, r := range before.Replicas {
						if slices.Contains(p.Replicas, r) {
							kept = append(kept, r)
						}
					}
					if !slices.Equal(kept, p.Replicas[:min(len(kept), len(p.Replicas))]) && rf >= len(before.Replicas) {
						t.Errorf("rf %d: %s %v -> %v: existing replicas moved", rf, p.TopicPartition, before.Replicas, p.Replicas)
					}
					for _, r := range p.Replicas {
						if !slices.Contains(before.Replicas, r) {
							delta++
						}
					}
					for _, r := range before.Replicas {
						if !slices.Contains(p.Replicas, r) {
							delta++
						}
					}
					if rf < len(before.Replicas) {
						var order []int32
						for _, r := range before.Replicas {
							if slices.Contains(p.Replicas, r) {
								order = append(order, r)
							}
						}
						if !slices.Equal(order, p.Replicas) {
							t.Errorf("rf %d: %s %v -> %v: survivors reordered", rf, p.TopicPartition, before.Replicas, p.Replicas)
						}
					}
				}
				want := abs(rf-len(prev[0].Replicas)) * parts
				if delta != want {
					t.Errorf("rf %d: %d replicas added or removed, want %d", rf, delta, want)
				}
				prev = cur
			}
			countRecords(t, env, tc.cluster, topic, parts, 20)
		})
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Throttles set before the operation are there, unchanged, after it; those it added are
// gone; progress events arrive while a throttled increase copies.
func TestReplicationFactorThrottleAndProgress(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "kraft")
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Options{Clusters: []string{f.alias}})
	if err != nil {
		t.Fatal(err)
	}
	f.configure = func(c *handlers.Config) { c.Metrics = m }
	f.start("worker-1")
	cl := env.Kafka(t, "kraft", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "rf")
	// Someone else's throttles, on this topic and on broker 2: they must survive.
	theirs := "0:9"
	setBrokerConfig(t, adm, 2, kafka.LeaderThrottledRate, kadm.StringPtr("7777777"))
	t.Cleanup(func() { setBrokerConfig(t, adm, 2, kafka.LeaderThrottledRate, nil) })
	testenv.CreateTopic(t, cl, topic, [][]int32{{1}, {2}}, map[string]string{"leader.replication.throttled.replicas": theirs})
	testenv.Produce(t, cl, topic, 2, 30, 50_000) // 3 MB

	progress := make(chan Progress, 100)
	e := f.event(events.TypeReplicaChangeRequested, rfData(topic, 2, map[string]any{"throttle_bytes_per_sec": 1_000_000}))
	sub, err := f.nc.Subscribe(events.ProgressSubject(e.ID), func(m *nats.Msg) {
		var p Progress
		if json.Unmarshal(m.Data, &p) == nil {
			progress <- p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	res := f.run(e)
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result %s (%s)", res.Status, res.Error)
	}
	if len(progress) == 0 {
		t.Fatal("no progress event during a throttled increase")
	}
	last := Progress{}
	for len(progress) > 0 {
		last = <-progress
	}
	if last.PartitionsTotal != 2 || last.BytesExpected <= 0 {
		t.Errorf("last progress %+v", last)
	}
	cfgs, err := adm.DescribeTopicConfigs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfgs.On(topic, nil)
	for _, c := range rc.Configs {
		switch c.Key {
		case kafka.LeaderThrottledReplicas:
			if c.MaybeValue() != theirs {
				t.Errorf("%s = %q after the operation, want theirs %q", c.Key, c.MaybeValue(), theirs)
			}
		case kafka.FollowerThrottledReplicas:
			if c.MaybeValue() != "" {
				t.Errorf("%s = %q left behind", c.Key, c.MaybeValue())
			}
		}
	}
	assertNoBrokerThrottle(t, adm, map[string]string{"2/" + kafka.LeaderThrottledRate: "7777777"})

	// The metrics say what the result says: 2 replicas added, the bytes they hold, every
	// throttle key set restored.
	var bytes int64
	for _, ch := range res.Changes {
		bytes += ch.Bytes
	}
	if bytes < 3_000_000 {
		t.Errorf("the changes' bytes add up to %d, want the 3 MB produced", bytes)
	}
	// The worker counts a result once it has stored it, after subscribers may have heard it:
	// wait until it has.
	value := func(series string) float64 { return metricstest.Value(t, reg, series) }
	labels := `{cluster="` + f.alias + `",type="replica-change-requested"}`
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := value("kafkamender_replicas_added_total" + labels); got != 2 {
			return fmt.Errorf("replicas added = %v, want 2", got)
		}
		if got := value("kafkamender_bytes_copied_total" + labels); got != float64(bytes) {
			return fmt.Errorf("bytes copied = %v, want %d", got, bytes)
		}
		set := value(`kafkamender_throttles_set_total{cluster="` + f.alias + `"}`)
		restored := value(`kafkamender_throttles_restored_total{cluster="` + f.alias + `",outcome="restored"}`)
		if set == 0 || restored != set {
			return fmt.Errorf("throttles set %v, restored %v; want as many restored as set", set, restored)
		}
		return nil
	})
}

func setBrokerConfig(t *testing.T, adm *kadm.Client, broker int32, key string, v *string) {
	t.Helper()
	op := kadm.SetConfig
	if v == nil {
		op = kadm.DeleteConfig
	}
	resp, err := adm.AlterBrokerConfigs(context.Background(), []kadm.AlterConfig{{Op: op, Name: key, Value: v}}, broker)
	if err == nil {
		for _, r := range resp {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("broker %d %s: %v", broker, key, err)
	}
}

// Type used by tests to decode progress events.
type Progress struct {
	PartitionsDone  int   `json:"partitions_done"`
	PartitionsTotal int   `json:"partitions_total"`
	BytesCopied     int64 `json:"bytes_copied"`
	BytesExpected   int64 `json:"bytes_expected"`
}

// assertNoBrokerThrottle checks that brokers 1–3 have no dynamic throttle rate but the
// expected ones ("broker/key" → value), set by someone else and kept.
func assertNoBrokerThrottle(t *testing.T, adm *kadm.Client, expected map[string]string) {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(t.Context(), 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key != kafka.LeaderThrottledRate && c.Key != kafka.FollowerThrottledRate {
				continue
			}
			want, keep := expected[rc.Name+"/"+c.Key]
			dynamic := c.Value != nil && c.Source == kmsg.ConfigSourceDynamicBrokerConfig
			switch {
			case keep && (!dynamic || *c.Value != want):
				t.Errorf("broker %s: %s = %q (%v), want someone else's %q kept", rc.Name, c.Key, c.MaybeValue(), c.Source, want)
			case !keep && dynamic:
				t.Errorf("broker %s: %s = %s left behind", rc.Name, c.Key, *c.Value)
			}
		}
	}
}

// A timeout cancels what is still copying, restores throttles and says what finished.
func TestReplicationFactorTimeoutCancels(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	cl := env.Kafka(t, "kraft", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	testenv.Produce(t, cl, topic, 1, 40, 50_000) // 2 MB at 10 kB/s: never within the timeout
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, map[string]any{"throttle_bytes_per_sec": 10_000, "timeout": "4s"})))
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "timeout after 4s") || !strings.Contains(res.Error, "cancelled 1 unfinished") {
		t.Fatalf("result %s %q, want failed: timeout, cancelled", res.Status, res.Error)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		after := state(t, f, topic)
		if !slices.Equal(after[0].Replicas, before[0].Replicas) || after[0].Reassigning() {
			return fmt.Errorf("after the cancel: %+v, want %v", after[0], before[0].Replicas)
		}
		return nil
	})
	cfgs, err := adm.DescribeTopicConfigs(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfgs.On(topic, nil)
	for _, c := range rc.Configs {
		if (c.Key == kafka.LeaderThrottledReplicas || c.Key == kafka.FollowerThrottledReplicas) && c.MaybeValue() != "" {
			t.Errorf("%s = %q left behind after the timeout", c.Key, c.MaybeValue())
		}
	}
	assertNoBrokerThrottle(t, adm, nil)
}

// Legacy clusters: the same plan through /admin/reassign_partitions.
func TestReplicationFactorZKReassign(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, env.Kafka(t, "local"), topic, [][]int32{{1, 2}, {3, 4}}, nil)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, map[string]any{"strategy": "zk-reassign"})))
	if res.Status != events.StatusSucceeded || res.Strategy != "zk-reassign" {
		t.Fatalf("result %s via %s (%s), skipped %q", res.Status, res.Strategy, res.Error, skipReasons(res.Skipped))
	}
	for _, c := range res.Changes {
		if len(c.ReplicasAfter) != 3 || !slices.Equal(c.ReplicasAfter[:2], c.ReplicasBefore) {
			t.Errorf("%s: %v -> %v", c.TopicPartition, c.ReplicasBefore, c.ReplicasAfter)
		}
	}
}

// Each refusal leaves the cluster unchanged.
func TestReplicationFactorRefusals(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 3}}, map[string]string{"min.insync.replicas": "2"})
	// Named like Kafka's own internal topics (__consumer_offsets may not exist yet here).
	internal := "__" + testenv.Name(t, "internal")
	testenv.CreateTopic(t, cl, internal, [][]int32{{1, 2}}, nil)
	before := state(t, f, topic)
	for _, tc := range []struct {
		name   string
		data   map[string]any
		status events.Status
		want   string
	}{
		{"factor below 1", rfData(topic, 0, nil), events.StatusRejected, "at least 1"},
		{"factor above live brokers", rfData(topic, 4, nil), events.StatusRejected, "live brokers"},
		{"below min.insync.replicas", rfData(topic, 1, nil), events.StatusRejected, "min.insync.replicas"},
		{"internal topic", rfData(internal, 3, nil), events.StatusRejected, "internal"},
		{"unknown topic", rfData(topic+"-nope", 3, nil), events.StatusRejected, "does not exist"},
		{"zk-nudge", rfData(topic, 3, map[string]any{"strategy": "zk-nudge"}), events.StatusRejected, "zk-nudge"},
		{"same factor", rfData(topic, 2, nil), events.StatusNoop, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.run(f.event(events.TypeReplicaChangeRequested, tc.data))
			if res.Status != tc.status || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("result %s %q, want %s containing %q", res.Status, res.Error, tc.status, tc.want)
			}
		})
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: %+v -> %+v", before, after)
	}
}

// A reassignment started by someone else blocks the change: the worker waits with backoff,
// then fails with the list, and changes nothing.
func TestReplicationFactorRefusesForeignReassignment(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	slow := slowReassignment(t, env)
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, env.Kafka(t, "kraft"), topic, [][]int32{{1, 2}}, nil)
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 3, nil)))
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "started by someone else") || !strings.Contains(res.Error, slow+"-0 (adding [3]") {
		t.Fatalf("result %s %q, want failed naming %s-0", res.Status, res.Error, slow)
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the cluster changed: %+v -> %+v", before, after)
	}
}

// skipReasons lists skipped partitions with their codes and reasons, for messages.
func skipReasons(skips []events.Skip) []string {
	out := make([]string, len(skips))
	for i, s := range skips {
		out[i] = fmt.Sprintf("%s (%s): %s", s.TopicPartition, s.Code, s.Reason)
	}
	return out
}
