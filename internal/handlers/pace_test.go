package handlers_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// outage is how long the broker stays down in TestMinISRPacing: the scenario, not a wait
// for something to happen.
const outage = 60 * time.Second

// Min-ISR pacing: a broker stops for 60 s in the middle of a replication-factor change, and
// a partition of another topic (min.insync.replicas 2, on that broker) falls under its
// minimum: the batch in flight goes on, no new batch starts while the broker is away, the
// change goes on within 5 s of the recovery, and the result says how long it waited and why.
func TestMinISRPacing(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env, "local")
	// One copy at a time out of broker 1, which leads every partition: one per batch.
	f.configure = func(c *handlers.Config) { c.RF.MaxMovesPerBroker = 1 }
	// The worker waits at its first batch, submitted, while the broker stops.
	copying := onStep(t, operation.StepCopying)
	f.hook = copying.hook
	f.start("worker-1")
	cl := env.Kafka(t, "local")
	adm := kadm.NewClient(cl)
	const stopped = 2
	topic := filled(t, env, "local", [][]int32{{1}, {1}, {1}}, 1_000_000, nil)
	hurt := testenv.Name(t, "hurt")
	testenv.CreateTopic(t, cl, hurt, [][]int32{{stopped, 3}}, map[string]string{"min.insync.replicas": "2"})

	// started records when each partition of topic first shows a new replica.
	var mu sync.Mutex
	started := map[int32]time.Time{}
	sampled := func() map[int32]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(started)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if td, err := adm.ListTopics(ctx, topic); err == nil {
				now := time.Now()
				mu.Lock()
				for _, p := range td[topic].Partitions {
					if _, ok := started[p.Partition]; !ok && len(p.Replicas) > 1 {
						started[p.Partition] = now
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	defer wg.Wait()
	defer cancel()

	res := f.publish(f.event(events.TypeReplicaChangeRequested, rcData{"topic": topic, "replication_factor": 2, "throttle_bytes_per_sec": 300_000}))
	copying.wait(t, time.Minute)
	testenv.Eventually(t, time.Minute, func() error {
		if len(sampled()) == 0 {
			return fmt.Errorf("no copy started yet")
		}
		return nil
	})
	if n := len(sampled()); n != 1 {
		t.Fatalf("%d partitions copying at once, want 1 (max_moves_per_broker 1)", n)
	}
	env.StopBroker(t, "local", stopped)
	down := time.Now()
	minISR := minInsyncReplicas(t, adm)
	testenv.Eventually(t, time.Minute, func() error {
		if under := underMinISR(t, adm, minISR); !slices.Contains(under, hurt+"-0") {
			return fmt.Errorf("%s-0 not under min.insync.replicas yet (under: %v)", hurt, under)
		}
		return nil
	})
	copying.release()
	// The copy in flight goes on; nothing else starts while the broker is away.
	time.Sleep(time.Until(down.Add(outage)))
	if s := sampled(); len(s) != 1 {
		t.Fatalf("copies started while a partition was under min.insync.replicas: %v (broker %d down since %s)", s, stopped, down.Format(time.RFC3339Nano))
	}
	back := time.Now()
	env.StartBroker(t, "local", stopped)
	var recovered time.Time
	testenv.Eventually(t, 2*time.Minute, func() error {
		if under := underMinISR(t, adm, minISR); len(under) > 0 {
			return fmt.Errorf("still under min.insync.replicas: %v", under)
		}
		recovered = time.Now()
		return nil
	})
	r := wait(t, res, 3*time.Minute)
	if r.Status != events.StatusSucceeded || len(r.Changes) != 3 {
		t.Fatalf("result %s %q, %d changes; want succeeded with 3", r.Status, r.Error, len(r.Changes))
	}
	s := sampled()
	var next time.Time
	for _, at := range s {
		if at.After(down) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.Before(back) {
		t.Errorf("the next batch started at %s, before the broker was back (%s)", next.Format(time.RFC3339Nano), back.Format(time.RFC3339Nano))
	}
	// The sampler sees a start up to 100 ms late; the recovery is seen once no partition
	// of the cluster is under, up to a read late.
	if d := next.Sub(recovered); d > 5*time.Second {
		t.Errorf("the next batch started %s after the recovery, want within 5s", d)
	}
	paused := strings.Contains(r.Note, "paused at") && strings.Contains(r.Note, hurt+"-0")
	resumed := strings.Contains(r.Note, "resumed at") && strings.Contains(r.Note, "after waiting")
	if !paused || !resumed {
		t.Errorf("note %q: want the pause, naming %s-0, and how long it lasted", r.Note, hurt)
	}
	t.Logf("broker %d down %s; next batch %s after the recovery; note %q", stopped, back.Sub(down).Round(time.Millisecond), next.Sub(recovered).Round(time.Millisecond), r.Note)
	f.noLeftovers([]string{topic}, nil, strconv.Itoa(300_000))
}

// minInsyncReplicas reads every topic's min.insync.replicas.
func minInsyncReplicas(t *testing.T, adm *kadm.Client) map[string]int {
	t.Helper()
	tds, err := adm.ListTopicsWithInternal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(t.Context(), tds.Names()...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, rc := range rcs {
		if c, err := rc.Configs, rc.Err; err == nil {
			for _, kv := range c {
				if kv.Key == "min.insync.replicas" {
					out[rc.Name], _ = strconv.Atoi(kv.MaybeValue())
				}
			}
		}
	}
	return out
}

// underMinISR lists the partitions under min.insync.replicas as Kafka counts them (a
// leader, fewer in-sync replicas than the minimum, which the replicas could meet).
func underMinISR(t *testing.T, adm *kadm.Client, minISR map[string]int) []string {
	t.Helper()
	tds, err := adm.ListTopicsWithInternal(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, td := range tds.Sorted() {
		m := max(minISR[td.Topic], 1)
		for _, p := range td.Partitions.Sorted() {
			if p.Leader >= 0 && len(p.ISR) < m && len(p.Replicas) >= m {
				out = append(out, fmt.Sprintf("%s-%d", td.Topic, p.Partition))
			}
		}
	}
	return out
}
