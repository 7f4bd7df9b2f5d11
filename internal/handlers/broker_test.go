package handlers_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// localRack is the local stack's racks: brokers 1 and 2 in r1, 3 and 4 in r2.
func localRack(b int32) string {
	if b <= 2 {
		return "r1"
	}
	return "r2"
}

// TestBrokerAdded: topics placed on all brokers but one; broker-added for that one moves
// onto it the fewest replicas and leaders that even out the topics' counts, never
// reducing a partition's rack spread, with the data all readable after and no throttle
// left. A dry run first lists the same plan and changes nothing.
func TestBrokerAdded(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	for _, tc := range []struct {
		cluster string
		added   int32
		rf2     [][]int32
		rf3     [][]int32
		racks   func(int32) string
	}{
		{"local", 4, [][]int32{{1, 3}, {3, 1}, {2, 3}, {3, 2}, {1, 3}, {2, 3}}, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}}, localRack},
		{"kraft", 3, [][]int32{{1, 2}, {2, 1}, {1, 2}, {2, 1}, {1, 2}, {2, 1}}, nil, func(int32) string { return "" }},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			f := newFleet(t, env, tc.cluster)
			f.start("worker-1")
			cl := env.Kafka(t, tc.cluster, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(cl)
			a, b := testenv.Name(t, "a"), testenv.Name(t, "b")
			topics := []string{a}
			testenv.CreateTopic(t, cl, a, tc.rf2, nil)
			testenv.Produce(t, cl, a, len(tc.rf2), 20, 10_000)
			if tc.rf3 != nil {
				topics = append(topics, b)
				testenv.CreateTopic(t, cl, b, tc.rf3, nil)
				testenv.Produce(t, cl, b, len(tc.rf3), 20, 10_000)
			}
			before := map[string][]model.Partition{}
			for _, topic := range topics {
				before[topic] = state(t, f, topic)
			}
			data := map[string]any{"broker": tc.added, "topics": topics, "throttle_bytes_per_sec": 50_000_000, "reason": "test"}

			dry := maps.Clone(data)
			dry["dry_run"] = true
			planned := f.run(f.event(events.TypeBrokerAdded, dry))
			if planned.Status != events.StatusPlanned || len(planned.Changes) == 0 {
				t.Fatalf("dry run: %s (%s), %d changes", planned.Status, planned.Error, len(planned.Changes))
			}
			for _, topic := range topics {
				if now := state(t, f, topic); !sameState(now, before[topic]) {
					t.Fatalf("the dry run changed %s", topic)
				}
			}

			res := f.run(f.event(events.TypeBrokerAdded, data))
			if res.Status != events.StatusSucceeded {
				t.Fatalf("result %s (%s) skipped %+v", res.Status, res.Error, res.Skipped)
			}
			got := slices.Clone(res.Changes)
			for i := range got {
				if got[i].Bytes <= 0 && slices.ContainsFunc(got[i].ReplicasAfter, func(b int32) bool { return !slices.Contains(got[i].ReplicasBefore, b) }) {
					t.Errorf("%s: a moved replica with %d bytes: the data was produced before", got[i].TopicPartition, got[i].Bytes)
				}
				got[i].Bytes = 0 // what the copy wrote; a dry run has none
			}
			if d := testenv.DiffChanges(got, planned.Changes); d != "" {
				t.Errorf("the changes made differ from the dry run's plan:\n%s", d)
			}
			after := map[string][]model.Partition{}
			testenv.Eventually(t, 30*time.Second, func() error {
				for _, topic := range topics {
					after[topic] = state(t, f, topic)
					for _, p := range after[topic] {
						if len(p.ISR) != len(p.Replicas) || p.Leader != p.Replicas[0] {
							return fmt.Errorf("%s: replicas %v isr %v leader %d", p.TopicPartition, p.Replicas, p.ISR, p.Leader)
						}
					}
				}
				return nil
			})
			// The result lists exactly what changed, field by field.
			var changed []events.Change
			for _, topic := range topics {
				for i, p := range after[topic] {
					if q := before[topic][i]; !slices.Equal(p.Replicas, q.Replicas) || p.Leader != q.Leader {
						changed = append(changed, events.Change{TopicPartition: p.TopicPartition, ReplicasBefore: q.Replicas, ReplicasAfter: p.Replicas,
							LeaderBefore: q.Leader, LeaderAfter: p.Leader})
					}
				}
			}
			if d := testenv.DiffChanges(got, changed); d != "" {
				t.Errorf("the result's changes are not what the cluster shows:\n%s", d)
			}

			// Spread ≤ 1 of replicas and leaders over the topics, with the fewest moves, only
			// onto the added broker, rack spread never reduced.
			replicas, leaders := map[int32]int{}, map[int32]int{}
			initial := map[int32]int{}
			bs, err := adm.ListBrokers(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range bs.NodeIDs() {
				replicas[id], leaders[id], initial[id] = 0, 0, 0
			}
			moved := 0
			for _, topic := range topics {
				for i, p := range after[topic] {
					q := before[topic][i]
					for _, r := range q.Replicas {
						initial[r]++
					}
					for _, r := range p.Replicas {
						replicas[r]++
					}
					leaders[p.Leader]++
					for _, r := range model.Minus(p.Replicas, q.Replicas) {
						if r != tc.added {
							t.Errorf("%s: %v → %v: a replica moved onto %d, not the added broker", p.TopicPartition, q.Replicas, p.Replicas, r)
						}
						moved++
					}
					if rackSpread(p.Replicas, tc.racks) < rackSpread(q.Replicas, tc.racks) {
						t.Errorf("%s: %v → %v reduces its rack spread", p.TopicPartition, q.Replicas, p.Replicas)
					}
				}
			}
			if s := spread(replicas); s > 1 {
				t.Errorf("replicas per broker %v: spread %d", replicas, s)
			}
			if s := spread(leaders); s > 1 {
				t.Errorf("leaders per broker %v: spread %d", leaders, s)
			}
			if least := fewestMoves(initial, tc.added); moved != least {
				t.Errorf("%d replicas moved, the fewest that even the counts out is %d (before %v, after %v)", moved, least, initial, replicas)
			}
			for i, topic := range topics {
				parts := len(tc.rf2)
				if i == 1 {
					parts = len(tc.rf3)
				}
				countRecords(t, env, tc.cluster, topic, parts, 20)
			}
			if th := env.BrokerThrottles(t, tc.cluster, cl); len(th) > 0 {
				t.Errorf("broker throttles left: %v", th)
			}
			if !strings.Contains(res.Note, "replicas per broker") {
				t.Errorf("note %q does not give the counts after the plan", res.Note)
			}
		})
	}
}

// TestBrokerFailedRefusedWhileAlive: a broker-failed event for a broker the cluster's
// metadata lists (an alert from a failed scrape) is rejected, saying so, and changes
// nothing.
func TestBrokerFailedRefusedWhileAlive(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "alive")
	testenv.CreateTopic(t, cl, topic, [][]int32{{4, 1}, {1, 4}}, nil)
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeBrokerFailed, map[string]any{"broker": 4, "reason": "scrape failed"}))
	if res.Status != events.StatusRejected || !strings.Contains(res.Error, "broker 4 is alive") {
		t.Fatalf("result %s (%s), want rejected: broker 4 is alive", res.Status, res.Error)
	}
	if len(res.Changes) > 0 {
		t.Errorf("a rejected event lists changes: %+v", res.Changes)
	}
	if now := state(t, f, topic); !sameState(now, before) {
		t.Errorf("the cluster changed: %v → %v", before, now)
	}
}

func rackSpread(replicas []int32, rack func(int32) string) int {
	var seen []string
	for _, r := range replicas {
		if !slices.Contains(seen, rack(r)) {
			seen = append(seen, rack(r))
		}
	}
	return len(seen)
}

func spread(counts map[int32]int) int {
	v := slices.Collect(maps.Values(counts))
	return slices.Max(v) - slices.Min(v)
}

// fewestMoves is the fewest replicas that moves onto broker added can move to bring
// every count within 1 of even: the excess over even of every other broker, less the
// brokers that may keep one more.
func fewestMoves(counts map[int32]int, added int32) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	q, rem := total/len(counts), total%len(counts)
	least, above := 0, 0
	for b, n := range counts {
		switch {
		case n <= q:
		case b == added:
			rem--
		default:
			least += n - q
			above++
		}
	}
	return least - min(max(rem, 0), above)
}

// TestBrokerDrain: a live broker drained of some topics while a producer writes with
// acks=all and min.insync.replicas 2: the broker ends with no replica and no leadership
// of them, no write ever fails with NOT_ENOUGH_REPLICAS, no partition's ISR shrinks below
// what it had, nothing else moves, and no throttle is left.
func TestBrokerDrain(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	const drained = 4
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	a, b := testenv.Name(t, "a"), testenv.Name(t, "b")
	minISR := map[string]string{"min.insync.replicas": "2"}
	testenv.CreateTopic(t, cl, a, [][]int32{{4, 1, 3}, {1, 4, 2}, {4, 3, 2}, {2, 1, 3}}, minISR)
	testenv.CreateTopic(t, cl, b, [][]int32{{4, 1}, {2, 4}, {3, 1}}, minISR)
	topics := []string{a, b}
	testenv.Produce(t, cl, a, 4, 20, 10_000)
	testenv.Produce(t, cl, b, 3, 20, 10_000)
	before := map[string][]model.Partition{a: state(t, f, a), b: state(t, f, b)}

	// The producer: no retries, so that a broker's refusal reaches us.
	pcl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	stop := make(chan struct{})
	var refusals []string
	produced := make(chan int)
	go func() {
		n := 0
		defer func() { produced <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, topic := range topics {
				for p := range int32(len(before[topic])) {
					err := pcl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}).FirstErr()
					switch {
					case err == nil:
						n++
					case errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.NotEnoughReplicasAfterAppend):
						refusals = append(refusals, fmt.Sprintf("%s-%d: %v", topic, p, err))
					}
				}
			}
		}
	}()
	// The ISRs, read over and over while the drain runs: none below its size before, and
	// no copy while the drained broker still leads the partition.
	shrunk := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(shrunk)
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, topic := range topics {
				for i, p := range testenv.Partitions(t, cl, topic) {
					if p.Leader == drained && len(model.Minus(p.Replicas, before[topic][i].Replicas)) > 0 {
						select {
						case shrunk <- fmt.Sprintf("%s: copying to %v while broker %d still leads: the shed comes first", p.TopicPartition, p.Replicas, drained):
						default:
						}
					}
					if len(p.ISR) < len(before[topic][i].ISR) {
						select {
						case shrunk <- fmt.Sprintf("%s: isr %v (before %v)", p.TopicPartition, p.ISR, before[topic][i].ISR):
						default:
						}
					}
				}
			}
		}
	}()

	res := f.run(f.event(events.TypeBrokerDrain, map[string]any{"broker": drained, "topics": topics, "throttle_bytes_per_sec": 50_000_000, "reason": "test"}))
	close(stop)
	n := <-produced
	if s, ok := <-shrunk; ok {
		t.Errorf("during the drain: %s", s)
	}
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result %s (%s) skipped %+v", res.Status, res.Error, res.Skipped)
	}
	if len(refusals) > 0 {
		t.Errorf("%d writes refused for want of in-sync replicas, e.g. %s", len(refusals), refusals[0])
	}
	if n == 0 {
		t.Error("the producer wrote nothing during the drain")
	}
	var changed []events.Change
	testenv.Eventually(t, 30*time.Second, func() error {
		changed = nil
		for _, topic := range topics {
			for i, p := range state(t, f, topic) {
				q := before[topic][i]
				if slices.Contains(p.Replicas, drained) || p.Leader == drained {
					return fmt.Errorf("%s: replicas %v led by %d: broker %d still holds it", p.TopicPartition, p.Replicas, p.Leader, drained)
				}
				if len(p.ISR) != len(p.Replicas) {
					return fmt.Errorf("%s: replicas %v isr %v", p.TopicPartition, p.Replicas, p.ISR)
				}
				if !slices.Contains(q.Replicas, drained) {
					if !slices.Equal(p.Replicas, q.Replicas) || p.Leader != q.Leader {
						t.Errorf("%s: %v led by %d → %v led by %d, though broker %d held none of it", p.TopicPartition, q.Replicas, q.Leader, p.Replicas, p.Leader, drained)
					}
					continue
				}
				if added := model.Minus(p.Replicas, q.Replicas); len(added) != 1 || len(p.Replicas) != len(q.Replicas) {
					t.Errorf("%s: %v → %v: want exactly broker %d's replica replaced", p.TopicPartition, q.Replicas, p.Replicas, drained)
				}
				if rackSpread(p.Replicas, localRack) < rackSpread(q.Replicas, localRack) {
					t.Errorf("%s: %v → %v reduces its rack spread", p.TopicPartition, q.Replicas, p.Replicas)
				}
				changed = append(changed, events.Change{TopicPartition: p.TopicPartition, ReplicasBefore: q.Replicas, ReplicasAfter: p.Replicas,
					LeaderBefore: q.Leader, LeaderAfter: p.Leader})
			}
		}
		return nil
	})
	got := slices.Clone(res.Changes)
	for i := range got {
		got[i].Bytes = 0
	}
	byPartition := func(x, y events.Change) int {
		return strings.Compare(x.TopicPartition.String(), y.TopicPartition.String())
	}
	slices.SortFunc(got, byPartition) // the result lists them by urgency
	slices.SortFunc(changed, byPartition)
	if d := testenv.DiffChanges(got, changed); d != "" {
		t.Errorf("the result's changes are not what the cluster shows:\n%s", d)
	}
	if th := env.BrokerThrottles(t, "local", cl); len(th) > 0 {
		t.Errorf("broker throttles left: %v", th)
	}
}

// TestBrokerFailed: broker 4 of local killed for good and its data deleted; broker-failed
// recreates every replica it held (of the test's topics, RF 3 and RF 2 with data) on the
// other brokers: each partition fully replicated again, only broker 4's replicas moved,
// racks kept where a broker is left to keep them (and the note says so where not), every
// record readable, no throttle left, and the result is what the cluster shows. The stack
// gets broker 4 back, empty, when the test ends.
func TestBrokerFailed(t *testing.T) {
	env := testenv.GetExclusive(t)
	const failed = 4
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	a, b := testenv.Name(t, "a"), testenv.Name(t, "b")
	topics := []string{a, b}
	assignments := map[string][][]int32{
		a: {{4, 1, 3}, {1, 4, 2}, {2, 3, 4}, {3, 1, 2}},
		b: {{4, 1}, {2, 4}, {3, 4}, {1, 2}},
	}
	for _, topic := range topics {
		testenv.CreateTopic(t, cl, topic, assignments[topic], map[string]string{"min.insync.replicas": "1"})
		testenv.Produce(t, cl, topic, len(assignments[topic]), 20, 10_000)
	}
	before := map[string][]model.Partition{a: state(t, f, a), b: state(t, f, b)}
	dirs, err := env.Stack.LogDirs("local", failed)
	if err != nil {
		t.Fatal(err)
	}
	env.KillBroker(t, "local", failed)
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}

	res := f.run(f.event(events.TypeBrokerFailed, map[string]any{"broker": failed, "rack": "r2", "topics": topics,
		"throttle_bytes_per_sec": 50_000_000, "reason": "host lost"}))
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result %s (%s) skipped %+v", res.Status, res.Error, res.Skipped)
	}
	var changed []events.Change
	testenv.Eventually(t, 60*time.Second, func() error {
		changed = nil
		for _, topic := range topics {
			for i, p := range state(t, f, topic) {
				q := before[topic][i]
				if len(p.ISR) != len(p.Replicas) || p.Reassigning() {
					return fmt.Errorf("%s: replicas %v isr %v", p.TopicPartition, p.Replicas, p.ISR)
				}
				if !slices.Contains(q.Replicas, failed) {
					if !slices.Equal(p.Replicas, q.Replicas) {
						t.Errorf("%s: %v → %v, though broker %d held none of it", p.TopicPartition, q.Replicas, p.Replicas, failed)
					}
					continue
				}
				kept := model.Minus(q.Replicas, []int32{failed})
				if len(p.Replicas) != len(q.Replicas) || !slices.Equal(p.Replicas[:len(kept)], kept) || slices.Contains(p.Replicas, failed) {
					t.Errorf("%s: %v → %v: want %v kept and one new replica", p.TopicPartition, q.Replicas, p.Replicas, kept)
				}
				changed = append(changed, events.Change{TopicPartition: p.TopicPartition, ReplicasBefore: q.Replicas, ReplicasAfter: p.Replicas,
					LeaderBefore: q.Leader, LeaderAfter: p.Leader})
			}
		}
		return nil
	})
	for _, c := range res.Changes {
		shrinks := rackSpread(c.ReplicasAfter, localRack) < rackSpread(c.ReplicasBefore, localRack)
		if shrinks != (c.Note != "") {
			t.Errorf("%s: %v → %v (racks %d → %d): note %q", c.TopicPartition, c.ReplicasBefore, c.ReplicasAfter,
				rackSpread(c.ReplicasBefore, localRack), rackSpread(c.ReplicasAfter, localRack), c.Note)
		}
	}
	got := slices.Clone(res.Changes)
	for i := range got {
		got[i].Bytes, got[i].Note = 0, ""
		// The leader before is the one the plan read, after broker 4's death.
		if c := changed[slices.IndexFunc(changed, func(c events.Change) bool { return c.TopicPartition == got[i].TopicPartition })]; c.LeaderBefore == failed {
			got[i].LeaderBefore = failed
		}
	}
	byPartition := func(x, y events.Change) int {
		return strings.Compare(x.TopicPartition.String(), y.TopicPartition.String())
	}
	slices.SortFunc(got, byPartition)
	slices.SortFunc(changed, byPartition)
	if d := testenv.DiffChanges(got, changed); d != "" {
		t.Errorf("the result's changes are not what the cluster shows:\n%s", d)
	}
	for _, topic := range topics {
		countRecords(t, env, "local", topic, len(assignments[topic]), 20)
	}
	// The alert fires again (a new firing): the broker holds nothing of them any more.
	again := f.run(f.event(events.TypeBrokerFailed, map[string]any{"broker": failed, "topics": topics}))
	if again.Status != events.StatusNoop || len(again.Changes) > 0 {
		t.Errorf("broker-failed again: %s (%s), %d changes; want noop", again.Status, again.Error, len(again.Changes))
	}
	if th := env.BrokerThrottles(t, "local", cl); len(th) > 0 {
		t.Errorf("broker throttles left: %v", th)
	}
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(t.Context(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if strings.HasSuffix(c.Key, ".replication.throttled.replicas") && c.MaybeValue() != "" {
				t.Errorf("%s: %s = %q left", rc.Name, c.Key, c.MaybeValue())
			}
		}
	}
}

// TestBrokerDrainTimeoutGivesLeadershipBack: a drain whose copies crawl past its timeout
// is rolled back: the copy cancelled, the partition's replica order and the drained
// broker's leadership given back, the throttles restored.
func TestBrokerDrainTimeoutGivesLeadershipBack(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	cl := env.Kafka(t, "local", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := testenv.Name(t, "slow")
	testenv.CreateTopic(t, cl, topic, [][]int32{{4, 1}}, nil)
	testenv.Produce(t, cl, topic, 1, 120, 50_000) // 6 MB: at 1,001 bytes/s the copy crawls
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeBrokerDrain, map[string]any{"broker": 4, "topics": []string{topic},
		"throttle_bytes_per_sec": 1_001, "timeout": "15s"}))
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "timeout after 15s") ||
		!strings.Contains(res.Error, "the leadership of 1 partitions given back to broker 4") {
		t.Errorf("result %s (%s), want failed: timeout, leadership given back", res.Status, res.Error) // and no throttle left, below
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		now := state(t, f, topic)
		if !sameState(now, before) || now[0].Reassigning() {
			return fmt.Errorf("replicas %v led by %d, want %v led by %d as before", now[0].Replicas, now[0].Leader, before[0].Replicas, before[0].Leader)
		}
		return nil
	})
	if len(res.Changes) > 0 {
		t.Errorf("a drain rolled back lists changes: %+v (error %q)", res.Changes, res.Error)
	}
	if th := env.BrokerThrottles(t, "local", cl); len(th) > 0 {
		t.Errorf("broker throttles left: %v", th)
	}
}
