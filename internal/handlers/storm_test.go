package handlers_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// stormOutcome is what an alert storm came to.
type stormOutcome struct {
	ids         []string // in publish order
	first       map[string]*events.Result
	published   time.Time // first publish
	actedAt     time.Time // the acting event's result heard
	lastAt      time.Time // the last result heard
	kafkaAtAct  int       // requests sent to Kafka (metadata refreshes aside) when the acting result came
	kafkaAtLast int
}

// kafkaRequests counts the requests the fleet's workers sent to Kafka, but the metadata
// refreshes the client does on its own.
func (f *fleet) kafkaRequests() int {
	f.requests.mu.Lock()
	defer f.requests.mu.Unlock()
	n := 0
	for k, c := range f.requests.counts {
		if k != keyMetadata {
			n += c
		}
	}
	return n
}

// storm publishes n broker-overloaded alerts for broker on topic, with distinct ids, as
// fast as one client can, and waits until each has a result.
func (f *fleet) storm(broker int32, topic string, n int) *stormOutcome {
	t := f.t
	t.Helper()
	o := &stormOutcome{first: map[string]*events.Result{}}
	want := map[string]bool{}
	bodies := make([][]byte, n)
	wave := token("")
	for i := range n {
		ev := f.event(events.TypeBrokerOverloaded, map[string]any{"broker": broker, "topics": []string{topic}, "reason": "cpu 97%"})
		ev.ID = fmt.Sprintf("%s-storm-%s-%05d", f.alias, wave, i)
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		o.ids, bodies[i], want[ev.ID] = append(o.ids, ev.ID), raw, true
	}
	var mu sync.Mutex
	all := make(chan struct{})
	sub, err := f.nc.Subscribe(events.ResultsSubjectPrefix+".*", func(m *nats.Msg) {
		var res events.Result
		if json.Unmarshal(m.Data, &res) != nil || !want[res.ID] {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if o.first[res.ID] != nil {
			return
		}
		o.first[res.ID] = &res
		if res.Status == events.StatusSucceeded {
			o.actedAt, o.kafkaAtAct = now, f.kafkaRequests()
		}
		if len(o.first) == n {
			o.lastAt, o.kafkaAtLast = now, f.kafkaRequests()
			close(all)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testenv.AwaitRouted(t, f.nc) // the results are published on any node
	subject := events.Subject(f.alias, events.TypeBrokerOverloaded)
	o.published = time.Now()
	for _, b := range bodies {
		if _, err := f.js.PublishAsync(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-f.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishes not acknowledged within a minute")
	}
	for range n {
		testenv.CountEvent()
	}
	select {
	case <-all:
	case <-time.After(3 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d results within 3 minutes", len(o.first), n)
	}
	for range n {
		testenv.CountResult()
	}
	return o
}

// check verifies a storm's outcome: the first event shed the broker, every other one is a
// noop naming it, each has exactly one stored result, and Kafka heard nothing after the
// acting event's result.
func (o *stormOutcome) check(f *fleet) {
	t := f.t
	t.Helper()
	acting := o.ids[0]
	if res := o.first[acting]; res.Status != events.StatusSucceeded || len(res.Changes) == 0 {
		t.Fatalf("first alert: %s %s, %d changes; want it to shed the broker", res.Status, res.Error, len(res.Changes))
	}
	for _, id := range o.ids[1:] {
		res := o.first[id]
		if res.Status != events.StatusNoop || res.PreviousEvent != acting || len(res.Changes) != 0 {
			t.Fatalf("alert %s: %s (previous %q, %d changes, error %q); want a noop naming %s", id, res.Status,
				res.PreviousEvent, len(res.Changes), res.Error, acting)
		}
	}
	if o.kafkaAtLast != o.kafkaAtAct {
		t.Errorf("%d requests went to Kafka after the acting event's result", o.kafkaAtLast-o.kafkaAtAct)
	}
	for _, id := range []string{o.ids[1], o.ids[len(o.ids)/2], o.ids[len(o.ids)-1]} {
		testenv.StoredResult(t, f.js, id) // exactly one stored
	}
	// Nothing left: the answered events are gone from the stream, and the cluster's
	// consumer has nothing out and nothing waiting.
	testenv.Eventually(t, 30*time.Second, func() error {
		ci := f.consumerState()
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return fmt.Errorf("consumer: %d waiting, %d out", ci.NumPending, ci.NumAckPending)
		}
		return nil
	})
}

// An alert storm: many broker-overloaded alerts for one broker (distinct ids, as
// Alertmanager's re-notifications have) shed it once; the rest are noops naming the event
// that acted, without a request to Kafka; a second wave, with the broker in the cool-down,
// sends none at all.
func TestAlertStormShedsOnce(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env, "kraft")
	f.start("worker-1")
	f.start("worker-2")
	topic := testenv.Name(t, "storm")
	testenv.CreateTopic(t, env.Kafka(t, "kraft"), topic, ledBy(1, []int32{2, 3}, 12, 2), nil)

	o := f.storm(1, topic, 1000)
	o.check(f)
	t.Logf("1000 alerts: all answered %s after the first publish; the %d noops in %s after the shed's result",
		o.lastAt.Sub(o.published).Round(time.Millisecond), len(o.ids)-1, o.lastAt.Sub(o.actedAt).Round(time.Millisecond))
	for _, p := range state(t, f, topic) {
		if p.Leader == 1 {
			t.Errorf("%s still led by broker 1", p.TopicPartition)
		}
	}

	before := f.kafkaRequests()
	wave := f.storm(1, topic, 300)
	for _, id := range wave.ids {
		if res := wave.first[id]; res.Status != events.StatusNoop || res.PreviousEvent != o.ids[0] {
			t.Fatalf("second wave %s: %s (previous %q); want a noop naming %s", id, res.Status, res.PreviousEvent, o.ids[0])
		}
	}
	if n := f.kafkaRequests() - before; n != 0 {
		t.Errorf("the second wave sent %d requests to Kafka", n)
	}
}

// BenchmarkAlertStorm measures the intake of an alert storm on the local stack: 10,000
// broker-overloaded alerts for one broker of the KRaft cluster, published at once, with
// two workers. It reports the rate over all of them (first publish to last result, the
// shed included), the rate of the noops once the shed's result is stored (what the
// fleet adds per alert), and the number of operations (sheds) run, which must be 1.
func BenchmarkAlertStorm(b *testing.B) {
	env := testenv.Get(b)
	const n = 10_000
	for b.Loop() {
		f := newFleet(b, env, "kraft")
		f.start("worker-1")
		f.start("worker-2")
		topic := testenv.Name(b, "storm")
		testenv.CreateTopic(b, env.Kafka(b, "kraft"), topic, ledBy(1, []int32{2, 3}, 12, 2), nil)
		o := f.storm(1, topic, n)
		o.check(f)
		ops := 0
		for _, res := range o.first {
			if res.Status == events.StatusSucceeded {
				ops++
			}
		}
		b.ReportMetric(float64(n)/o.lastAt.Sub(o.published).Seconds(), "events/s")
		b.ReportMetric(float64(n-1)/o.lastAt.Sub(o.actedAt).Seconds(), "noops/s")
		b.ReportMetric(float64(ops), "operations")
		b.ReportMetric(float64(o.kafkaAtLast-o.kafkaAtAct), "kafka-requests-after-shed")
	}
}
