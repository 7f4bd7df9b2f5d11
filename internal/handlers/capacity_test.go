package handlers_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// usedBytes is what each broker's replicas hold (the sum of their sizes), as the worker
// counts it against a configured capacity.
func usedBytes(t *testing.T, cl *kgo.Client) map[int32]int64 {
	t.Helper()
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int32]int64{}
	for b, ds := range dirs {
		for _, d := range ds {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) { used[b] += p.Size })
		}
	}
	return used
}

// Configured capacities (clusters.<name>.capacity_bytes, as brokers sharing one disk need):
// broker 3 is at 75% of its capacity; a raise whose new replicas the rack rule sends to
// rack r2 (brokers 3 and 4) puts none on 3, where one would take it over 80%. With broker 4
// as full, the raise cannot fit: rejected, naming both brokers and their bytes, nothing
// changed.
func TestConfiguredCapacity(t *testing.T) {
	env := testenv.Get(t)
	cl := env.Kafka(t, "local")
	// Something on broker 3 and 4 to be 75% of.
	filled(t, env, "local", [][]int32{{3}, {4}}, 2_000_000, nil)
	used := usedBytes(t, cl)
	capacity := func(b int32) int64 { return used[b] * 4 / 3 } // used is 75% of it
	// A new replica must not fit in 80%: larger than 5% of the capacity.
	size := max(capacity(3), capacity(4))/20 + 500_000
	topic := filled(t, env, "local", [][]int32{{1}, {1}, {1}, {1}}, int(size), nil)

	bounded := func(brokers ...int32) func(*handlers.Config) {
		return func(c *handlers.Config) {
			for _, hc := range c.Clusters {
				hc.Capacity = map[int32]int64{}
				for _, b := range brokers {
					hc.Capacity[b] = capacity(b)
				}
				hc.CapacityThreshold = 0.8
			}
		}
	}

	f := newFleet(t, env, "local")
	f.configure = bounded(3)
	f.start("worker-1")
	before := state(t, f, topic)
	res := f.run(f.event(events.TypeReplicaChangeRequested, rfData(topic, 2, nil)))
	if res.Status != events.StatusSucceeded || len(res.Changes) != 4 {
		t.Fatalf("raise with broker 3 at 75%%: %s %q, %d changes", res.Status, res.Error, len(res.Changes))
	}
	for _, ch := range res.Changes {
		if slices.Contains(ch.ReplicasAfter, 3) || !slices.Contains(ch.ReplicasAfter, 4) {
			t.Errorf("%s: %v → %v: want the new replica on 4 (rack r2), none on 3 (full)", ch.TopicPartition, ch.ReplicasBefore, ch.ReplicasAfter)
		}
	}
	testenv.CheckOutcome(t, cl, res, topic, before, grew(before), false)

	other := filled(t, env, "local", [][]int32{{2}}, int(size), nil)
	g := newFleet(t, env, "local")
	g.configure = bounded(3, 4)
	g.start("worker-2")
	was := state(t, g, other)
	refused := g.run(g.event(events.TypeReplicaChangeRequested, rfData(other, 2, nil)))
	// The new replica can go to rack r2 only, whose brokers are both full (4 is over its
	// bound since the first raise): each is named, with its bytes and its bound.
	named := true
	for _, b := range []int32{3, 4} {
		re := regexp.MustCompile(fmt.Sprintf(`broker %d: \d+ bytes planned \(\d+ in use\), above its bound of %d \(80%% of %d\)`, b, capacity(b)*8/10, capacity(b)))
		named = named && re.MatchString(refused.Error)
	}
	if refused.Status != events.StatusRejected || !strings.Contains(refused.Error, "does not fit the brokers' capacity") || !named {
		t.Errorf("raise with 3 and 4 full: %s %q, want rejected naming the broker, its bytes and its bound", refused.Status, refused.Error)
	}
	if now := state(t, g, other); !slices.Equal(now[0].Replicas, was[0].Replicas) {
		t.Errorf("a rejected raise changed %s: %v → %v", other, was[0].Replicas, now[0].Replicas)
	}
	t.Logf("broker 3: %d of %d bytes used; 4 new replicas of %d bytes; rejected: %s", used[3], capacity(3), size, refused.Error)
}
