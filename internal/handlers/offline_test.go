package handlers_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// produceSeq writes records whose values are their sequence numbers, from first, one
// at a time with acks=all, and returns the offset of each.
func produceSeq(t *testing.T, cl *kgo.Client, topic string, first, n int) []int64 {
	t.Helper()
	var offsets []int64
	for i := first; i < first+n; i++ {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		offsets = append(offsets, r.Offset)
	}
	return offsets
}

// readSeq reads partition 0 of topic from the start to its end: offset → sequence number.
func readSeq(t *testing.T, env *testenv.Env, cluster, topic string) map[int64]int {
	t.Helper()
	cl := env.Kafka(t, cluster, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	end := endOffset(t, env, cluster, topic)
	got := map[int64]int{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s up to offset %d of %d", topic, next, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, _ := strconv.Atoi(string(r.Value))
			got[r.Offset] = n
			next = r.Offset + 1
		})
	}
	return got
}

func endOffset(t *testing.T, env *testenv.Env, cluster, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(env.Kafka(t, cluster)).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s-0: %+v", topic, o)
	}
	return o.Offset
}

// waitOffline waits until partition 0 of topic has no leader and broker live is in the
// metadata.
func waitOffline(t *testing.T, f *fleet, topic string, live int32) model.Partition {
	t.Helper()
	var p model.Partition
	testenv.Eventually(t, time.Minute, func() error {
		snap, err := kafka.ReadSnapshot(t.Context(), f.env.Kafka(t, f.real), topic)
		if err != nil {
			return err
		}
		p = snap.Topics[topic][0]
		if _, ok := snap.Brokers[live]; !ok || p.Leader >= 0 {
			return fmt.Errorf("leader %d, brokers %v", p.Leader, slices.Sorted(maps.Keys(snap.Brokers)))
		}
		return nil
	})
	return p
}

// A partition whose in-sync replicas are all gone: RF 2 on brokers 3 and 4, unclean
// elections disabled; 4 stops, records go to 3 alone, 3 stops, 4 comes back. Without
// allow_unclean the event is rejected, naming the last ISR and 4 with its log end
// offset, and the partition stays offline; with it, 4 leads, and the result's lost
// offsets start exactly where a consumer finds records missing.
func TestPartitionOffline(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	f.configure = func(c *handlers.Config) { c.PartitionOffline.AllowUnclean = true }
	f.start("worker-1")
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	topic := testenv.Name(t, "off")
	testenv.CreateTopic(t, cl, topic, [][]int32{{3, 4}}, map[string]string{"unclean.leader.election.enable": "false", "min.insync.replicas": "1"})
	kept := produceSeq(t, cl, topic, 0, 10)
	env.StopBroker(t, "local", 4)
	testenv.Eventually(t, time.Minute, func() error {
		if p := state(t, f, topic)[0]; !slices.Equal(p.ISR, []int32{3}) {
			return fmt.Errorf("isr %v", p.ISR)
		}
		return nil
	})
	onlyOn3 := produceSeq(t, cl, topic, 10, 10)
	env.StopBroker(t, "local", 3)
	env.StartBroker(t, "local", 4)
	before := waitOffline(t, f, topic, 4)

	refused := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic, "reason": "offline partitions alert"}))
	want := fmt.Sprintf("last ISR [3] (none alive), live candidates 4 (log end offset %d)", kept[len(kept)-1]+1)
	if refused.Status != events.StatusRejected || !strings.Contains(refused.Error, want) {
		t.Fatalf("without allow_unclean: %s %q, want rejected naming %q", refused.Status, refused.Error, want)
	}
	if p := state(t, f, topic)[0]; p.Leader >= 0 {
		t.Fatalf("a rejected event changed the partition: leader %d", p.Leader)
	}

	res := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic, "partitions": []int32{0}, "allow_unclean": true}))
	if res.Status != events.StatusSucceeded || len(res.Changes) != 1 {
		t.Fatalf("with allow_unclean: %s %q, changes %+v", res.Status, res.Error, res.Changes)
	}
	ch := res.Changes[0]
	if ch.LeaderBefore != -1 || ch.LeaderAfter != 4 || !slices.Equal(ch.ReplicasAfter, before.Replicas) || ch.LostOffsets == nil {
		t.Fatalf("change %+v: want leader -1 → 4, replicas %v kept, lost offsets", ch, before.Replicas)
	}
	// The worker verified leader 4 on a fresh read; a broker's metadata may lag it a
	// moment (the test's read can go to any broker).
	testenv.Eventually(t, 30*time.Second, func() error {
		if p := state(t, f, topic)[0]; p.Leader != 4 {
			return fmt.Errorf("leader %d after the election, want 4", p.Leader)
		}
		return nil
	})
	// What a consumer finds: every record below lost_offsets.from, none of those 3 alone held.
	got := readSeq(t, env, "local", topic)
	for i, o := range kept {
		if got[o] != i {
			t.Errorf("offset %d holds %d, want record %d", o, got[o], i)
		}
	}
	firstMissing := onlyOn3[0]
	if ch.LostOffsets.From != firstMissing {
		t.Errorf("lost offsets from %d, but the first record missing was at offset %d", ch.LostOffsets.From, firstMissing)
	}
	for _, o := range onlyOn3 {
		if _, ok := got[o]; ok {
			t.Errorf("offset %d, written to broker 3 alone, is readable after the unclean election", o)
		}
	}
	if ch.LostOffsets.To != nil {
		t.Errorf("lost offsets up to %d: broker 3 is down, its log end cannot be known", *ch.LostOffsets.To)
	}
	t.Logf("note: %s; change note: %s", res.Note, ch.Note)

	again := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic}))
	if again.Status != events.StatusNoop {
		t.Errorf("again: %s %q, want noop (the partition has a leader)", again.Status, again.Error)
	}
	f.noLeftovers([]string{topic}, nil, "")
}

// The clean part on Kafka 2.3, which has no unclean election through the API: the
// partition's only in-sync replica is down and the other replica is back; even with
// allow_unclean the event is rejected, naming the last ISR and the candidate with its log
// end offset (read from the 2.3 broker), and nothing changes. Once the in-sync replica is
// back, its controller elects it and the event is a noop.
func TestPartitionOfflineLegacy(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "legacy")
	f.configure = func(c *handlers.Config) { c.PartitionOffline.AllowUnclean = true }
	f.start("worker-1")
	cl := env.Kafka(t, "legacy", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	topic := testenv.Name(t, "off")
	testenv.CreateTopic(t, cl, topic, [][]int32{{2, 3}}, map[string]string{"unclean.leader.election.enable": "false", "min.insync.replicas": "1"})
	kept := produceSeq(t, cl, topic, 0, 5)
	env.StopBroker(t, "legacy", 3)
	testenv.Eventually(t, time.Minute, func() error {
		if p := state(t, f, topic)[0]; !slices.Equal(p.ISR, []int32{2}) {
			return fmt.Errorf("isr %v", p.ISR)
		}
		return nil
	})
	produceSeq(t, cl, topic, 5, 5)
	env.StopBroker(t, "legacy", 2)
	env.StartBroker(t, "legacy", 3)
	waitOffline(t, f, topic, 3)

	refused := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic, "allow_unclean": true}))
	want := fmt.Sprintf("last ISR [2] (none alive), live candidates 3 (log end offset %d); an unclean election through the API needs Kafka 2.4+", kept[len(kept)-1]+1)
	if refused.Status != events.StatusRejected || !strings.Contains(refused.Error, want) {
		t.Fatalf("on Kafka 2.3: %s %q, want rejected naming %q", refused.Status, refused.Error, want)
	}
	if p := state(t, f, topic)[0]; p.Leader >= 0 {
		t.Fatalf("a rejected event changed the partition: leader %d", p.Leader)
	}
	env.StartBroker(t, "legacy", 2)
	testenv.Eventually(t, time.Minute, func() error {
		if p := state(t, f, topic)[0]; p.Leader != 2 {
			return fmt.Errorf("leader %d", p.Leader)
		}
		return nil
	})
	again := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic}))
	if again.Status != events.StatusNoop || len(again.Changes) > 0 {
		t.Errorf("with its in-sync replica back: %s %q, %d changes; want noop", again.Status, again.Error, len(again.Changes))
	}
	f.noLeftovers([]string{topic}, nil, "")
}

// An event's allow_unclean is refused unless the configuration allows unclean elections
// too (partition_offline.allow_unclean, default false): rejected before anything is read.
func TestPartitionOfflineUncleanNeedsTheConfiguration(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "off")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	res := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic, "allow_unclean": true}))
	if want := "partition_offline.allow_unclean is false"; res.Status != events.StatusRejected || !strings.Contains(res.Error, want) {
		t.Fatalf("%s %q, want rejected naming %q", res.Status, res.Error, want)
	}
	led := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic}))
	if led.Status != events.StatusNoop || len(led.Noop) != 1 {
		t.Errorf("without allow_unclean, on a partition with a leader: %s %q, noop %v; want noop", led.Status, led.Error, led.Noop)
	}
}

// On KRaft (3 nodes, each a controller too: two down would lose the quorum, so no
// partition there can lose its in-sync replicas while another replica lives): a partition
// whose only replica is down is skipped (no live replica), nothing changed; once its node
// is back, the controller elects it and the event is a noop.
func TestPartitionOfflineKRaft(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	cl := env.Kafka(t, "kraft")
	topic := testenv.Name(t, "off")
	testenv.CreateTopic(t, cl, topic, [][]int32{{3}, {1}}, nil)
	env.StopBroker(t, "kraft", 3)
	waitOffline(t, f, topic, 1)

	res := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic}))
	if len(res.Changes) != 0 || len(res.Skipped) != 1 || res.Skipped[0].Code != plan.SkipNoLiveReplica || len(res.Noop) != 1 {
		t.Fatalf("%s %q: changes %v, skipped %+v, noop %v; want %s-0 skipped (no live replica), %s-1 noop", res.Status, res.Error, res.Changes, res.Skipped, res.Noop, topic, topic)
	}
	env.StartBroker(t, "kraft", 3)
	testenv.Eventually(t, time.Minute, func() error {
		if p := state(t, f, topic)[0]; p.Leader != 3 {
			return fmt.Errorf("leader %d", p.Leader)
		}
		return nil
	})
	again := f.run(f.event(events.TypePartitionOffline, map[string]any{"topic": topic}))
	if again.Status != events.StatusNoop || len(again.Changes) > 0 {
		t.Errorf("with its node back: %s %q, %d changes; want noop", again.Status, again.Error, len(again.Changes))
	}
	f.noLeftovers([]string{topic}, nil, "")
}
