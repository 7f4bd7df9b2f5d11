package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// placement maps each replica of broker to its directory (future replicas as "→dir").
func placement(t *testing.T, adm *kadm.Client, broker int32) map[string]string {
	t.Helper()
	ds, err := adm.DescribeBrokerLogDirs(context.Background(), broker, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
		k := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		if p.IsFuture {
			k += " (future)"
		}
		out[k] = p.Dir
	})
	return out
}

// dirSizes returns the bytes of current replicas per directory of broker.
func dirSizes(t *testing.T, adm *kadm.Client, broker int32) map[string]int64 {
	t.Helper()
	ds, err := adm.DescribeBrokerLogDirs(context.Background(), broker, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for dir, d := range ds {
		out[dir] = 0
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if !p.IsFuture {
				out[dir] += p.Size
			}
		})
	}
	return out
}

// moveAll puts every replica of topic on broker into dir (test setup, straight through
// the API) and waits until the broker shows it there.
func moveAll(t *testing.T, adm *kadm.Client, broker int32, topic string, partitions int, dir string) {
	t.Helper()
	var ps []int32
	for p := range partitions {
		ps = append(ps, int32(p))
	}
	moveReplicas(t, adm, broker, topic, ps, dir)
}

// moveReplicas puts the replicas of topic's partitions ps on broker into dir and waits
// until the broker shows them there.
func moveReplicas(t *testing.T, adm *kadm.Client, broker int32, topic string, ps []int32, dir string) {
	t.Helper()
	s := kadm.TopicsSet{}
	s.Add(topic, ps...)
	req := kadm.AlterReplicaLogDirsReq{}
	req.Add(dir, s)
	testenv.Eventually(t, 60*time.Second, func() error {
		resp, err := adm.AlterBrokerReplicaLogDirs(context.Background(), broker, req)
		if err != nil {
			return err
		}
		var errs []string
		resp.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				errs = append(errs, fmt.Sprintf("%s-%d: %v", r.Topic, r.Partition, r.Err))
			}
		})
		if len(errs) > 0 {
			return fmt.Errorf("alter replica log dirs: %s", strings.Join(errs, "; "))
		}
		pl := placement(t, adm, broker)
		for _, p := range ps {
			k := fmt.Sprintf("%s-%d", topic, p)
			if pl[k] != dir || pl[k+" (future)"] != "" {
				return fmt.Errorf("%s in %q (future %q), want %s", k, pl[k], pl[k+" (future)"], dir)
			}
		}
		return nil
	})
}

func brokerConfig(t *testing.T, adm *kadm.Client, broker int32, key string) *string {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(context.Background(), broker)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == key && c.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				return c.Value
			}
		}
	}
	return nil
}

func logdirData(broker int32, extra map[string]any) map[string]any {
	d := map[string]any{"broker": broker}
	maps.Copy(d, extra)
	return d
}

// A balance of broker 1 of `local` (two log dirs), with several topics' data in one
// directory, leaves the two within the tolerance, moving the fewest bytes; every record
// stays readable; the copy throttle that was set before the event is there after it;
// progress events arrive while it copies. Exclusive: a balance moves whatever the broker
// holds, other tests' topics included.
func TestLogDirBalance(t *testing.T) {
	env := testenv.GetExclusive(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	adm, dirs, topics := imbalance(t, env)
	const theirs = balanceTheirs
	before := dirSizes(t, adm, 1)

	e := f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"throttle_bytes_per_sec": 1_000_000, "reason": "disk a full"}))
	progress := watchProgress(t, f, e.ID)
	res := wait(t, f.publish(e), 3*time.Minute)
	if res.Status != events.StatusSucceeded {
		t.Fatalf("balance: %s (%s) skipped %+v note %q", res.Status, res.Error, res.Skipped, res.Note)
	}
	after := dirSizes(t, adm, 1)
	a, b := after[dirs[0]], after[dirs[1]]
	if total := a + b; float64(abs64(a-b)) > 0.1*float64(total)+1 {
		t.Errorf("after the balance: %d and %d bytes, more apart than 10%% of %d (before %v)", a, b, total, before)
	}
	var moved int64
	for _, ch := range res.Changes {
		if ch.DirBefore != dirs[0] || ch.DirAfter != dirs[1] || ch.Broker == nil || *ch.Broker != 1 {
			t.Errorf("change %+v: want broker 1, %s → %s", ch, dirs[0], dirs[1])
		}
		moved += ch.Bytes
	}
	if d := before[dirs[0]] - before[dirs[1]]; moved > d {
		t.Errorf("moved %d bytes, more than the imbalance %d", moved, d)
	}
	pl := placement(t, adm, 1)
	for _, ch := range res.Changes {
		if pl[ch.TopicPartition.String()] != dirs[1] {
			t.Errorf("%s: in %q after the move, the result says %s", ch.TopicPartition, pl[ch.TopicPartition.String()], dirs[1])
		}
	}
	if got := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); got == nil || *got != theirs {
		t.Errorf("the copy throttle set before the event is %v after it, want %s", got, theirs)
	}
	if len(progress()) == 0 {
		t.Error("no progress event during a throttled move")
	}
	if !strings.Contains(res.Note, "within the tolerance") {
		t.Errorf("note %q does not say the tolerance was reached", res.Note)
	}
	for i, size := range []int{40, 25, 10} {
		countRecords(t, env, "local", topics[i], 2, size)
	}
	f.noLeftovers(topics, nil, "1000000")
}

// balanceTheirs is the copy throttle set by hand on broker 1 before a balance.
const balanceTheirs = "987654321"

// imbalance puts everything broker 1 of local holds in its first log directory, three
// topics' data included (records of 50 kB: 40, 25 and 10 per partition, two partitions
// each), and sets a copy throttle by hand (balanceTheirs) on the broker.
func imbalance(t *testing.T, env *testenv.Env) (*kadm.Client, [2]string, []string) {
	t.Helper()
	adm := env.Admin(t, "local")
	dirs := env.TwoLogDirs(t, "local", 1)
	cl := env.Kafka(t, "local", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var topics []string
	for i, size := range []int{40, 25, 10} { // records of 50 kB per partition
		topic := testenv.Name(t, fmt.Sprintf("ld%d", i))
		testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {1, 3}}, nil)
		testenv.Produce(t, cl, topic, 2, size, 50_000)
		moveAll(t, adm, 1, topic, 2, dirs[0])
		topics = append(topics, topic)
	}
	// Everything else broker 1 holds goes to the first directory too, so that the second
	// is empty and the imbalance is ours.
	for topic, dir := range placement(t, adm, 1) {
		if dir == dirs[1] {
			tp := strings.LastIndex(topic, "-")
			var p int32
			fmt.Sscan(topic[tp+1:], &p)
			moveReplicas(t, adm, 1, topic[:tp], []int32{p}, dirs[0])
		}
	}
	const theirs = balanceTheirs
	setBrokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate, kadm.StringPtr(theirs))
	t.Cleanup(func() { setBrokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate, nil) })
	testenv.Eventually(t, 30*time.Second, func() error {
		if v := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); v == nil || *v != theirs {
			return fmt.Errorf("broker 1 does not show the copy throttle yet")
		}
		return nil
	})
	return adm, dirs, topics
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// watchProgress collects the progress events of an event id.
func watchProgress(t *testing.T, f *fleet, id string) func() []events.Progress {
	t.Helper()
	ch := make(chan events.Progress, 10_000)
	sub, err := f.nc.Subscribe(events.ProgressSubject(id), func(m *nats.Msg) {
		var p events.Progress
		if json.Unmarshal(m.Data, &p) == nil {
			ch <- p
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []events.Progress {
		var out []events.Progress
		for len(ch) > 0 {
			out = append(out, <-ch)
		}
		return out
	}
}

// An explicit move on the KRaft node with two log directories (JBOD, Kafka ≥ 3.7).
func TestLogDirExplicitMoveKRaft(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	adm := env.Admin(t, "kraft")
	dirs := env.TwoLogDirs(t, "kraft", 1)
	cl := env.Kafka(t, "kraft", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := testenv.Name(t, "ldk")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 1}}, nil)
	testenv.Produce(t, cl, topic, 2, 30, 1000)
	tp := topic + "-1"
	from := placement(t, adm, 1)[tp]
	to := testenv.OtherLogDir(dirs, from)
	dry := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 1, "to_dir": to, "dry_run": true})))
	if dry.Status != events.StatusPlanned || len(dry.Changes) != 1 || dry.Changes[0].DirAfter != to || !strings.Contains(dry.Note, "moving "+tp) {
		t.Fatalf("dry run: %s (%s) changes %+v note %q", dry.Status, dry.Error, dry.Changes, dry.Note)
	}
	if got := placement(t, adm, 1)[tp]; got != from {
		t.Fatalf("a dry run moved %s to %s", tp, got)
	}
	res := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 1, "to_dir": to})))
	if res.Status != events.StatusSucceeded || len(res.Changes) != 1 {
		t.Fatalf("move: %s (%s) changes %+v skipped %+v", res.Status, res.Error, res.Changes, res.Skipped)
	}
	ch := res.Changes[0]
	if ch.DirBefore != from || ch.DirAfter != to || !slices.Equal(ch.ReplicasBefore, []int32{2, 1}) || !slices.Equal(ch.ReplicasAfter, ch.ReplicasBefore) {
		t.Errorf("change %+v: want %s → %s, replicas [2 1] unchanged", ch, from, to)
	}
	if got := placement(t, adm, 1)[tp]; got != to {
		t.Errorf("%s in %q after the move, want %s", tp, got, to)
	}
	countRecords(t, env, "kraft", topic, 2, 30)

	again := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 1, "to_dir": to})))
	if again.Status != events.StatusNoop {
		t.Errorf("the same move again: %s (%s), want noop", again.Status, again.Error)
	}
}

// Each refusal gets a rejected result that names the problem, and changes nothing: the
// placement of the broker's replicas and its copy throttle are as before.
func TestLogDirRefusals(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	adm := env.Admin(t, "local")
	dirs := env.TwoLogDirs(t, "local", 1)
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := testenv.Name(t, "ldr")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 3}}, nil)
	testenv.Produce(t, cl, topic, 2, 200, 10_000)
	cur := placement(t, adm, 1)[topic+"-0"]
	other := testenv.OtherLogDir(dirs, cur)

	// A move in progress for the partition: started straight through the API, slowed by a
	// copy throttle so that it is still running when the event arrives.
	setBrokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate, kadm.StringPtr("1"))
	t.Cleanup(func() { setBrokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate, nil) })
	testenv.Eventually(t, 30*time.Second, func() error { // the broker shows it a moment later
		if v := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); v == nil || *v != "1" {
			return fmt.Errorf("broker 1 does not show the copy throttle yet")
		}
		return nil
	})

	for _, tc := range []struct {
		name string
		data map[string]any
		want string
		busy bool
	}{
		{"unknown directory", logdirData(1, map[string]any{"topic": topic, "partition": 0, "to_dir": "/no/such/dir"}), `to_dir "/no/such/dir" is not a log directory of broker 1`, false},
		{"same source and target", logdirData(1, map[string]any{"from_dir": dirs[0], "to_dir": dirs[0]}), "from_dir and to_dir are the same directory", false},
		{"broker down", logdirData(9, map[string]any{"topic": topic, "partition": 0, "to_dir": other}), "broker 9 is not up", false},
		{"not a replica of the broker", logdirData(1, map[string]any{"topic": topic, "partition": 1, "to_dir": other}), "has no replica on broker 1 (its replicas: [2 3])", false},
		{"unknown topic", logdirData(1, map[string]any{"topic": topic + "-nope", "partition": 0, "to_dir": other}), "does not exist", false},
		{"move in progress", logdirData(1, map[string]any{"topic": topic, "partition": 0, "to_dir": other}), "already in progress", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.busy {
				s := kadm.TopicsSet{}
				s.Add(topic, 0)
				req := kadm.AlterReplicaLogDirsReq{}
				req.Add(other, s)
				if _, err := adm.AlterBrokerReplicaLogDirs(context.Background(), 1, req); err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, 30*time.Second, func() error {
					if placement(t, adm, 1)[topic+"-0 (future)"] != other {
						return fmt.Errorf("no future replica of %s-0 in %s yet", topic, other)
					}
					return nil
				})
				t.Cleanup(func() { // cancel it: back to the current directory
					back := kadm.AlterReplicaLogDirsReq{}
					back.Add(cur, s)
					_, _ = adm.AlterBrokerReplicaLogDirs(context.Background(), 1, back)
				})
			}
			before := ours(placement(t, adm, 1), topic)
			throttle := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate)
			res := f.run(f.event(events.TypeLogDirMoveRequested, tc.data))
			if res.Status != events.StatusRejected || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("%s: %s (%q), want rejected with %q", tc.name, res.Status, res.Error, tc.want)
			}
			if len(res.Changes) != 0 {
				t.Errorf("a rejection lists changes: %+v", res.Changes)
			}
			if after := ours(placement(t, adm, 1), topic); !maps.Equal(before, after) {
				t.Errorf("placement changed by a rejected event:\nbefore %v\nafter  %v", before, after)
			}
			if got := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); !sameStr(got, throttle) {
				t.Errorf("copy throttle %v after a rejected event, was %v", got, throttle)
			}
		})
	}
}

// ours keeps the replicas of topic (other tests create and delete topics meanwhile).
func ours(pl map[string]string, topic string) map[string]string {
	out := map[string]string{}
	for k, v := range pl {
		if strings.HasPrefix(k, topic+"-") {
			out[k] = v
		}
	}
	return out
}

func sameStr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// A move that outlives its timeout is failed: the copy still running is cancelled (the
// replica stays where it was, no future replica left), the throttle is restored, and the
// result says what finished.
func TestLogDirMoveTimeout(t *testing.T) {
	f, adm, topic, cur, other := slowLogDirMove(t, "ldt")
	tp := topic + "-0"
	env := f.env
	res := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 0, "to_dir": other,
		"throttle_bytes_per_sec": 50_000, "timeout": "5s"})))
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "timeout after 5s") || !strings.Contains(res.Error, "cancelled 1 unfinished moves") {
		t.Fatalf("timeout: %s (%q), want failed with the timeout and the cancelled move", res.Status, res.Error)
	}
	if len(res.Changes) != 0 {
		t.Errorf("changes %+v: nothing finished", res.Changes)
	}
	pl := placement(t, adm, 1)
	if pl[tp] != cur || pl[tp+" (future)"] != "" {
		t.Errorf("after the timeout %s is in %q (future %q), want %s and no future replica", tp, pl[tp], pl[tp+" (future)"], cur)
	}
	if got := brokerConfig(t, adm, 1, kafka.AlterLogDirsThrottledRate); got != nil {
		t.Errorf("copy throttle %q left behind", *got)
	}
	countRecords(t, env, "local", topic, 1, 100)
}

// slowLogDirMove starts a worker on local and makes a topic whose replica on broker 1 holds
// 5 MB, to move slowly: it returns the fleet, an admin client, the topic, the replica's
// directory and the other one.
func slowLogDirMove(t *testing.T, prefix string) (f *fleet, adm *kadm.Client, topic, cur, other string) {
	t.Helper()
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f = newFleet(t, env, "local")
	f.start("worker-1")
	adm = env.Admin(t, "local")
	dirs := env.TwoLogDirs(t, "local", 1)
	cl := env.Kafka(t, "local", kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic = testenv.Name(t, prefix)
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	testenv.Produce(t, cl, topic, 1, 100, 50_000)
	cur = placement(t, adm, 1)[topic+"-0"]
	return f, adm, topic, cur, testenv.OtherLogDir(dirs, cur)
}

// A log directory that went offline (its disk failed: here the directory is removed under
// the running broker, and the broker's next checkpoint write there fails) is refused as a
// target, naming it offline, and nothing changes. The broker is restarted with the
// directory back afterwards (its replicas there re-replicate or come back empty).
func TestLogDirOfflineTargetRefused(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	f.start("worker-1")
	adm := env.Admin(t, "local")
	dirs := env.TwoLogDirs(t, "local", 1)
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := testenv.Name(t, "ldo")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	testenv.Produce(t, cl, topic, 1, 20, 1000)
	tp := topic + "-0"
	moveReplicas(t, adm, 1, topic, []int32{0}, dirs[0])
	dead := dirs[1]
	defer func() {
		// Bring the directory back: stop the broker, recreate it, start it (GetExclusive's
		// clean-up would only start a stopped broker, not heal a dir). A defer, not a
		// Cleanup: the test's context, which these use, ends before Cleanups run.
		env.StopBroker(t, "local", 1)
		if err := os.MkdirAll(dead, 0o755); err != nil {
			t.Error(err)
		}
		env.StartBroker(t, "local", 1)
	}()
	if err := os.RemoveAll(dead); err != nil {
		t.Fatal(err)
	}
	testenv.CountFault()
	testenv.Eventually(t, 60*time.Second, func() error {
		ds, err := adm.DescribeBrokerLogDirs(context.Background(), 1, nil)
		if err != nil {
			return err
		}
		if d, ok := ds[dead]; !ok || d.Err == nil {
			return fmt.Errorf("broker 1 does not report %s offline yet", dead)
		}
		return nil
	})
	before := ours(placement(t, adm, 1), topic)
	res := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, map[string]any{"topic": topic, "partition": 0, "to_dir": dead})))
	if res.Status != events.StatusRejected || !strings.Contains(res.Error, fmt.Sprintf("to_dir %q of broker 1 is offline", dead)) {
		t.Fatalf("move to an offline dir: %s (%q), want rejected naming it offline", res.Status, res.Error)
	}
	bal := f.run(f.event(events.TypeLogDirMoveRequested, logdirData(1, nil)))
	if bal.Status != events.StatusRejected || !strings.Contains(bal.Error, "has 1 online log directories") {
		t.Fatalf("balance with one dir offline: %s (%q), want rejected", bal.Status, bal.Error)
	}
	if after := ours(placement(t, adm, 1), topic); !maps.Equal(before, after) || after[tp] != dirs[0] {
		t.Errorf("placement changed by rejected events: before %v after %v", before, after)
	}
}
