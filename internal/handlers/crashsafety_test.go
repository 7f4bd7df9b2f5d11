package handlers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// ourRate is the throttle these tests ask for: no other test uses it, so "none of our
// throttles is left" is a search for it. Kafka measures a replication rate as if ten
// one-second windows had passed (replication.quota.window.num - 1), so a copy bursts about
// ten seconds' worth before the throttle bites: 3 MB at this rate copy for about ten
// seconds, long enough for a fault in the middle.
const ourRate = 150_002

// stepSignal turns a handler step into a channel: the hook tells the test the step was
// reached (first time only) and waits until the test lets it go on.
type stepSignal struct {
	done    <-chan struct{} // the test's end
	step    string
	once    sync.Once
	reached chan struct{}
	proceed chan struct{}
}

// onStep returns a signal for step; a test that ends without letting the step go on
// releases it at its end, so the worker it blocks can stop.
func onStep(t *testing.T, step string) *stepSignal {
	return &stepSignal{done: t.Context().Done(), step: step, reached: make(chan struct{}), proceed: make(chan struct{})}
}

// release lets the step go on (once).
func (s *stepSignal) release() {
	select {
	case <-s.proceed:
	default:
		close(s.proceed)
	}
}

func (s *stepSignal) hook(step string) {
	if step != s.step {
		return
	}
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.reached)
		select {
		case <-s.proceed:
		case <-s.done:
		}
	}
}

func (s *stepSignal) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.reached:
	case <-time.After(timeout):
		t.Fatalf("step %s not reached within %s", s.step, timeout)
	}
}

// filled creates a topic whose partitions hold perPartition bytes each.
func filled(t *testing.T, env *testenv.Env, cluster string, assignment [][]int32, perPartition int, configs map[string]string) string {
	t.Helper()
	cl := env.Kafka(t, cluster, kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	topic := testenv.Name(t, "rf")
	testenv.CreateTopic(t, cl, topic, assignment, configs)
	testenv.Produce(t, cl, topic, len(assignment), perPartition/50_000, 50_000)
	return topic
}

func grew(before []model.Partition) func(model.Partition) bool {
	return func(p model.Partition) bool {
		return len(p.Replicas) == len(before[p.Partition].Replicas)+1 && slices.Equal(p.Replicas[:len(before[p.Partition].Replicas)], before[p.Partition].Replicas)
	}
}

// The lock holder's ZooKeeper session expires in the middle of a copy: it sends no write
// after the expiry (not even the throttle restore it would make next), and another worker
// finishes the operation: the event, never acknowledged, is delivered again to worker-b,
// which resumes it from the journal (the same event: no takeover across events), and its
// one result is stored by worker-b; another event of the cluster, published meanwhile,
// succeeds too (the cluster's consumer hands out one event at a time, so the redelivery
// comes before it; the order is not checked here). A takeover across events, where the
// orphan's message is gone and the next event's worker finishes it:
// TestTakeoverFinishesAnotherEventsOperation in internal/faults.
func TestZKSessionExpiryMidCopy(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	copying := onStep(t, operation.StepCopying)
	f.hook = copying.hook
	proxy := testenv.NewZKProxy(t)
	a := f.startWith("worker-a", workerOpts{zk: proxy.Addr(), lockWait: 2 * time.Second})
	cl := env.Kafka(t, "local")
	topic := filled(t, env, "local", [][]int32{{1, 2}, {3, 4}}, 2_000_000, nil)
	before := state(t, f, topic)
	rfEvent := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": ourRate})
	rfResult := f.publish(rfEvent)
	copying.wait(t, 2*time.Minute)

	// worker-a holds the lock, its copy submitted. Cut it from ZooKeeper for good, and
	// wait until the server ended its session; then let it go on.
	session := fmt.Sprintf("0x%x", a.sess.Conn().SessionID())
	proxy.Cut()
	testenv.Eventually(t, time.Minute, func() error {
		out, err := stack.FourLetterWord(t.Context(), stack.ZooKeeperAddr, "dump")
		if err != nil {
			return err
		}
		if strings.Contains(out, session) {
			return fmt.Errorf("session %s still alive", session)
		}
		return nil
	})
	expired := time.Now()
	copying.release()

	f.start("worker-b")
	other := testenv.Name(t, "pl")
	testenv.CreateTopic(t, cl, other, [][]int32{{1, 2}}, nil)
	otherResult := f.publish(f.event(events.TypeReplicaChangeRequested, rcData{"topic": other, "preferred_leader": 2}))
	if res := wait(t, otherResult, 3*time.Minute); res.Status != events.StatusSucceeded {
		t.Fatalf("the other event: %s %q", res.Status, res.Error)
	}
	res := wait(t, rfResult, 3*time.Minute)
	stored := f.stored(rfEvent.ID)
	if stored.Status != events.StatusSucceeded || stored.Worker != "worker-b" || res.Status != stored.Status {
		t.Fatalf("the orphaned event: %s by %s (%q), want succeeded by worker-b", stored.Status, stored.Worker, stored.Error)
	}
	if last := a.writes.last(); last.After(expired) {
		t.Fatalf("worker-a sent a write at %s, after its session expired at %s", last.Format(time.StampMicro), expired.Format(time.StampMicro))
	}
	testenv.CheckOutcome(t, cl, stored, topic, before, grew(before), false)
	f.noLeftovers([]string{topic, other}, nil, strconv.Itoa(ourRate))
}

// Another tool changes a throttle we set while our copy runs: it keeps its value, and the
// result says so; the throttles we set and nobody touched are restored.
func TestForeignThrottleChangeIsKept(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "kraft")
	copying := onStep(t, operation.StepCopying)
	f.hook = copying.hook
	f.start("worker-1")
	adm := env.Admin(t, "kraft")
	topic := filled(t, env, "kraft", [][]int32{{1, 2}}, 3_000_000, nil)
	before := state(t, f, topic)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": ourRate})
	ch := f.publish(e)
	copying.wait(t, 2*time.Minute)
	// Broker 3 receives the new replica: its follower rate is ours now. Another tool sets it.
	theirs := "999001"
	setBrokerConfig(t, adm, 3, kafka.FollowerThrottledRate, kadm.StringPtr(theirs))
	t.Cleanup(func() { setBrokerConfig(t, adm, 3, kafka.FollowerThrottledRate, nil) })
	// The other tool's change is in force (the broker shows it) before our copy goes on.
	testenv.Eventually(t, 30*time.Second, func() error {
		rcs, err := adm.DescribeBrokerConfigs(t.Context(), 3)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == kafka.FollowerThrottledRate && c.MaybeValue() == theirs {
					return nil
				}
			}
		}
		return fmt.Errorf("broker 3 does not show %s = %s yet", kafka.FollowerThrottledRate, theirs)
	})
	copying.release()
	res := wait(t, ch, 3*time.Minute)
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result %s %q", res.Status, res.Error)
	}
	if len(res.ThrottlesKept) != 1 || res.ThrottlesKept[0].Name != "3" || res.ThrottlesKept[0].Key != kafka.FollowerThrottledRate ||
		res.ThrottlesKept[0].Current == nil || *res.ThrottlesKept[0].Current != theirs || !strings.Contains(res.Note, "changed by someone else") {
		t.Fatalf("the result does not say which throttle was kept: %+v, note %q", res.ThrottlesKept, res.Note)
	}
	assertNoBrokerThrottle(t, adm, map[string]string{"3/" + kafka.FollowerThrottledRate: theirs})
	testenv.CheckOutcome(t, env.Kafka(t, "kraft"), res, topic, before, grew(before), false)
	f.noLeftovers([]string{topic}, nil, strconv.Itoa(ourRate))
}

// A handler that panics: one failed result naming the panic, one dead letter, the message
// is not delivered again, and the fleet goes on serving (the next event of the cluster
// clears what the panicking attempt journaled).
func TestPanicGivesOneFailedResultAndADeadLetter(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "local")
	var once sync.Once
	f.hook = func(step string) {
		if step == operation.StepJournalWritten {
			once.Do(func() {
				testenv.CountFault()
				panic("boom: a poison message")
			})
		}
	}
	f.start("worker-a")
	f.start("worker-b")
	dead := make(chan *nats.Msg, 4)
	sub, err := f.nc.Subscribe(events.DeadSubject(f.alias), func(m *nats.Msg) { dead <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2}, {2, 1}}, nil)
	before := state(t, f, topic)
	poison := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "partitions": []int{0}, "preferred_leader": 2})
	res := wait(t, f.publish(poison), time.Minute)
	if res.Status != events.StatusFailed || !strings.Contains(res.Error, "boom: a poison message") {
		t.Fatalf("result %s %q, want failed naming the panic", res.Status, res.Error)
	}
	select {
	case m := <-dead:
		var e events.Envelope
		if err := json.Unmarshal(m.Data, &e); err != nil || e.ID != poison.ID {
			t.Fatalf("dead letter %s: %v", m.Data, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no dead letter")
	}
	if after := state(t, f, topic); !sameState(before, after) {
		t.Fatalf("the panicking event changed the cluster: %+v -> %+v", before, after)
	}
	next := wait(t, f.publish(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "partitions": []int{1}, "preferred_leader": 1})), time.Minute)
	if next.Status != events.StatusSucceeded {
		t.Fatalf("the next event: %s %q", next.Status, next.Error)
	}
	f.stored(poison.ID) // exactly one
	select {
	case m := <-dead:
		t.Fatalf("a second dead letter: %s", m.Data)
	default:
	}
	f.noLeftovers([]string{topic}, nil, "")
}

// The controller broker is killed between the reorder and the election: the election goes
// to the new controller and the change completes.
func TestControllerKilledDuringPreferredLeader(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	reordered := onStep(t, operation.StepReordered)
	f.hook = reordered.hook
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	snap, err := kafka.ReadSnapshot(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	controller := snap.Controller
	var others []int32
	for _, b := range []int32{1, 2, 3, 4} {
		if b != controller {
			others = append(others, b)
		}
	}
	// The target leads nothing yet; the controller is a replica too, so its death is felt.
	target := others[0]
	topic := testenv.Name(t, "pl")
	testenv.CreateTopic(t, cl, topic, [][]int32{{others[1], target, controller}, {others[2], controller, target}}, nil)
	before := state(t, f, topic)
	e := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "preferred_leader": target})
	ch := f.publish(e)
	reordered.wait(t, time.Minute)
	env.KillBroker(t, "local", controller)
	reordered.release()
	res := wait(t, ch, 3*time.Minute)
	if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
		t.Fatalf("result %s %q %+v, want succeeded with 2 changes", res.Status, res.Error, res.Changes)
	}
	testenv.CheckOutcome(t, cl, res, topic, before, func(p model.Partition) bool { return p.Leader == target && p.Replicas[0] == target }, true)
	f.noLeftovers([]string{topic}, nil, "")
}

// A broker that receives a new replica dies during the copy (frozen at once, then
// killed) and is started again: the change waits for it and completes.
func TestBrokerStoppedDuringReplicationFactorIncrease(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	copying := onStep(t, operation.StepCopying)
	f.hook = copying.hook
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	topic := filled(t, env, "local", [][]int32{{1, 2}}, 3_000_000, nil)
	before := state(t, f, topic)
	ch := f.publish(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": ourRate}))
	copying.wait(t, 2*time.Minute)
	ongoing, err := kafka.ListReassignments(t.Context(), cl, []string{topic})
	if err != nil || len(ongoing) != 1 {
		t.Fatalf("reassignments %v (%v), want the copy", ongoing, err)
	}
	var adding int32
	for _, r := range ongoing {
		adding = r.Adding[0]
	}
	env.PauseBroker(t, "local", adding)
	env.KillBroker(t, "local", adding)
	copying.release()
	// The worker keeps waiting for the copy while the broker is away.
	testenv.Eventually(t, time.Minute, func() error {
		if n := f.consumerState().NumAckPending; n != 1 {
			return fmt.Errorf("%d events in hand", n)
		}
		return nil
	})
	select {
	case res := <-ch:
		t.Fatalf("a result while the new replica's broker is down: %s %q", res.Status, res.Error)
	default:
	}
	env.StartBroker(t, "local", adding)
	res := wait(t, ch, 4*time.Minute)
	if res.Status != events.StatusSucceeded {
		t.Fatalf("result %s %q", res.Status, res.Error)
	}
	testenv.CheckOutcome(t, cl, res, topic, before, grew(before), false)
	f.noLeftovers([]string{topic}, nil, strconv.Itoa(ourRate))
}

// The topic is deleted while its replication factor is raised, and the event is delivered
// again (its worker was killed mid-copy). The retry used to be rejected before the journal
// was read ("topic does not exist": untrue, something had changed), leaving the journal
// entry and the broker throttle rates, and every later event of the cluster failed behind
// the entry. Now the retry resumes from the journal: the partitions are gone (skipped, not
// waited for), the throttles are put back, the result says what happened, and the
// cluster's next event runs.
func TestTopicDeletedDuringReplicationFactorChange(t *testing.T) {
	env := testenv.Get(t)
	env.LockBrokerThrottles(t)
	f := newFleet(t, env, "local")
	copying := onStep(t, operation.StepCopying)
	f.hook = copying.hook
	kill := f.startKillable("worker-a")
	cl := env.Kafka(t, "local")
	topic := filled(t, env, "local", [][]int32{{1, 2}, {3, 4}}, 2_000_000, nil)
	ev := f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": ourRate})
	result := f.publish(ev)
	copying.wait(t, 2*time.Minute)
	copying.release()
	kill() // mid-copy (throttled, it runs for seconds): its delivery is left unacknowledged

	if _, err := kadm.NewClient(cl).DeleteTopic(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		known, err := kafka.KnownBy(t.Context(), cl, []string{topic})
		if err != nil {
			return err
		}
		if len(known) > 0 {
			return fmt.Errorf("topic %s still known by broker %d", topic, known[topic])
		}
		return nil
	})

	f.start("worker-b")
	res := wait(t, result, 3*time.Minute)
	if res.Status != events.StatusFailed || len(res.Changes) != 0 || len(res.Skipped) != 2 ||
		!strings.Contains(res.Error, "the partition no longer exists (its topic was deleted)") {
		t.Fatalf("result %s %q, changes %v, skipped %v; want failed, both partitions skipped as gone", res.Status, res.Error, res.Changes, res.Skipped)
	}
	if stored := f.stored(ev.ID); stored.Worker != "worker-b" {
		t.Errorf("stored by %s", stored.Worker)
	}

	// The cluster's next event runs.
	other := testenv.Name(t, "pl")
	testenv.CreateTopic(t, cl, other, [][]int32{{1, 2}}, nil)
	if res := f.run(f.event(events.TypeReplicaChangeRequested, rcData{"topic": other, "preferred_leader": 2})); res.Status != events.StatusSucceeded {
		t.Fatalf("the next event: %s %q", res.Status, res.Error)
	}
	f.noLeftovers([]string{other}, nil, strconv.Itoa(ourRate))
}
