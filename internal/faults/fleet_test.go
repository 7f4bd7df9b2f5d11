package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// fleet is several worker processes serving both clusters of the stack, each under an
// alias of its own, with the lock backends of deployments/local/worker.yaml: the
// ZooKeeper-mode cluster keeps its lock in its ZooKeeper, reached through a proxy the test
// can cut (the workers' view of "ZooKeeper is down"; the brokers keep theirs), the KRaft
// cluster in NATS.
type fleet struct {
	t            *testing.T
	local, kraft *rig
	consumer     string
	proxy        *testenv.ZKProxy
}

func newFleet(t *testing.T, env *testenv.Env) *fleet {
	t.Helper()
	f := &fleet{t: t, local: newRig(t, env, "local"), kraft: newRig(t, env, "kraft"),
		consumer: testenv.Name(t, "fleet"), proxy: testenv.NewZKProxy(t)}
	t.Cleanup(func() { testenv.DeleteConsumers(context.Background(), f.local.js, f.consumer) })
	return f
}

// config is a worker's configuration. Each cluster's lock is where its rig's lockAt says
// (the leftover checks look there): the ZooKeeper-mode cluster's in its own ZooKeeper (a
// cluster with one keeps its lock there), the KRaft cluster's in NATS.
func (f *fleet) config(name, httpAddr string) string {
	lc, kc := f.local.env.Cluster(f.t, "local"), f.kraft.env.Cluster(f.t, "kraft")
	return fmt.Sprintf(`worker:
  id: %s
log:
  level: info
  format: console
http:
  listen: %s
nats:
  url: %s
  consumer: %s
  subjects: [kafkamender.events.%s.>, kafkamender.events.%s.>]
  ack_wait: 3s
lock:
  root: %s
  session_timeout: 3s
  acquire_timeout: 2m
  nats: {bucket: %s, ttl: 3s}
replication_factor:
  foreign_wait: 10s
alertmanager:
  rules:
    # As deployments/local/worker.yaml, but only for the test's topic (label topic).
    - alertname: KafkaBrokerOverloaded
      type: broker-overloaded
      fields: {broker: broker_id, topics: topic}
clusters:
  %s:
    bootstrap_servers: [%s]
    zookeeper: %s%s
    strategy: auto
  %s:
    bootstrap_servers: [%s]
    lock: {backend: %s}
    strategy: auto
`, name, httpAddr, stack.NATSClusterURL, f.consumer, f.local.alias, f.kraft.alias, lockRoot, lockBucket,
		f.local.alias, strings.Join(lc.Bootstrap(), ", "), f.proxy.Addr(), stack.KafkaChroot,
		f.kraft.alias, strings.Join(kc.Bootstrap(), ", "), f.kraft.lockAt().Backend)
}

// worker is a running worker of the fleet and its HTTP address.
type fleetProc struct {
	*proc
	addr string
}

func (f *fleet) start(name string) *fleetProc {
	f.t.Helper()
	return f.startAt(name, testenv.FreeAddr(f.t))
}

// startAt starts a worker of the fleet whose HTTP listener is addr.
func (f *fleet) startAt(name, addr string) *fleetProc {
	f.t.Helper()
	return &fleetProc{proc: startProc(f.t, name, f.config(name, addr)), addr: addr}
}

// ready reports the worker's /readyz status code.
func (p *fleetProc) ready() (int, error) {
	resp, err := http.Get("http://" + p.addr + "/readyz")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// published is an event published, with its stream sequence.
type published struct {
	id  string
	seq uint64
	ch  <-chan *events.Result
}

// publishSeq is rig.publish that also returns the stream sequence.
func (r *rig) publishSeq(typ string, data map[string]any) published {
	r.t.Helper()
	ch := make(chan *events.Result, 8)
	env := r.envelope(typ, data)
	watch := testenv.WatchResults(r.t, r.nc, env.ID)
	go func() {
		for res := range watch {
			ch <- res
		}
	}()
	ack, err := r.js.Publish(r.t.Context(), events.Subject(r.alias, typ), r.marshal(env), jetstream.WithMsgID(env.ID))
	if err != nil {
		r.t.Error(err)
		return published{}
	}
	testenv.CountEvent()
	return published{id: env.ID, seq: ack.Sequence, ch: ch}
}

// Replication factor 3 then 2 for one topic, published back to back with three workers
// running, ends at 2, every time: a cluster's events run in the order they were stored.
// Both clusters at once: the other cluster's events do not wait for these.
func TestFleetAppliesEventsInPublishOrder(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env)
	for _, name := range []string{"a", "b", "c"} {
		f.start(name)
	}
	rigs := []*rig{f.local, f.kraft}
	topics := map[*rig]string{}
	for _, r := range rigs {
		topics[r] = r.topic("order", [][]int32{{1, 2}, {2, 3}, {3, 1}}, 0, nil)
	}
	for round := range 3 {
		// Both clusters' pairs are out at once: the clusters proceed in parallel.
		pairs := map[*rig][2]published{}
		for _, r := range rigs {
			up := r.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": topics[r], "replication_factor": 3})
			down := r.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": topics[r], "replication_factor": 2})
			pairs[r] = [2]published{up, down}
		}
		for _, r := range rigs {
			ru, rd := r.result(pairs[r][0].ch, 3*time.Minute), r.result(pairs[r][1].ch, 3*time.Minute)
			if ru.Status != events.StatusSucceeded || rd.Status != events.StatusSucceeded {
				t.Fatalf("%s round %d: RF 3 %s (%s), RF 2 %s (%s); want both succeeded", r.real, round, ru.Status, ru.Error, rd.Status, rd.Error)
			}
			if !rd.StartedAt.After(ru.FinishedAt) {
				t.Errorf("%s round %d: RF 2 started at %s, before RF 3 finished at %s", r.real, round, rd.StartedAt, ru.FinishedAt)
			}
			// Eventually: a ZooKeeper-mode broker's metadata may lag the controller's a moment.
			testenv.Eventually(t, 30*time.Second, func() error {
				for _, p := range r.partitions(topics[r]) {
					if len(p.Replicas) != 2 {
						return fmt.Errorf("%s round %d: %s has replicas %v; want 2", r.real, round, p.TopicPartition, p.Replicas)
					}
				}
				return nil
			})
		}
	}
	for _, r := range rigs {
		r.noLeftovers([]string{topics[r]}, nil)
	}
}

// Three workers, 200 events across both clusters published concurrently: per cluster, no
// two operations overlap in time (from the results' start and finish times), every event
// has exactly one result, and results finish in publish order.
func TestFleetSerializesEachCluster(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env)
	for _, name := range []string{"a", "b", "c"} {
		f.start(name)
	}
	const perCluster = 100
	var wg sync.WaitGroup
	got := map[*rig][]published{}
	var mu sync.Mutex
	for _, r := range []*rig{f.local, f.kraft} {
		topic := r.topic("serial", [][]int32{{1, 2, 3}, {2, 3, 1}}, 0, nil)
		wg.Go(func() {
			var list []published
			for i := range perCluster {
				// Leadership of partition 0 goes round the brokers: every event changes it.
				list = append(list, r.publishSeq(events.TypeReplicaChangeRequested,
					map[string]any{"topic": topic, "partitions": []int{0}, "preferred_leader": 1 + (i+1)%3}))
			}
			mu.Lock()
			got[r] = list
			mu.Unlock()
		})
	}
	wg.Wait()
	workers := map[string]int{}
	for r, list := range got {
		slices.SortFunc(list, func(a, b published) int { return int(a.seq) - int(b.seq) })
		var prev *events.Result
		for _, p := range list {
			res := r.result(p.ch, 3*time.Minute)
			stored := r.oneStored(p.id)
			if stored.Status != events.StatusSucceeded || res.Status != stored.Status {
				t.Fatalf("%s event %s: %s (%s)", r.real, p.id, stored.Status, stored.Error)
			}
			workers[stored.Worker]++
			if prev != nil && !stored.StartedAt.After(prev.FinishedAt) {
				t.Errorf("%s: %s started at %s, before %s (published before it) finished at %s", r.real, p.id,
					stored.StartedAt.Format(time.StampMicro), prev.ID, prev.FinishedAt.Format(time.StampMicro))
			}
			prev = stored
		}
	}
	t.Logf("results by worker: %v", workers)
}

// ZooKeeper down (for the workers): events for the KRaft cluster, whose lock is in NATS,
// still succeed; events for the ZooKeeper-mode cluster wait, without using up deliveries,
// and succeed once ZooKeeper is back.
func TestZooKeeperDownStopsOnlyItsClusters(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env)
	a, b := f.start("a"), f.start("b")
	ltopic := f.local.topic("zkdown", [][]int32{{1, 2, 3}}, 0, nil)
	ktopic := f.kraft.topic("zkdown", [][]int32{{1, 2, 3}}, 0, nil)

	f.proxy.Cut()
	for _, p := range []*fleetProc{a, b} {
		p.waitFor("not taking events of this cluster", 30*time.Second)
	}
	waiting := f.local.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": ltopic, "preferred_leader": 2})
	for leader := range []int{2, 3} {
		k := f.kraft.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": ktopic, "preferred_leader": 2 + leader})
		if res := f.kraft.result(k.ch, 2*time.Minute); res.Status != events.StatusSucceeded {
			t.Fatalf("kraft event with ZooKeeper down: %s (%s)", res.Status, res.Error)
		}
	}
	select {
	case res := <-waiting.ch:
		t.Fatalf("local event answered while its lock's ZooKeeper is down: %s (%s)", res.Status, res.Error)
	default:
	}

	f.proxy.Heal()
	res := f.local.result(waiting.ch, 2*time.Minute)
	if res.Status != events.StatusSucceeded || res.Attempt != 1 {
		t.Fatalf("local event after ZooKeeper is back: %s (%s) on attempt %d; want succeeded on attempt 1", res.Status, res.Error, res.Attempt)
	}
	f.local.oneStored(waiting.id)
	f.local.noLeftovers([]string{ltopic}, nil)
	f.kraft.noLeftovers([]string{ktopic}, nil)
}

// consumers returns when each of the fleet's durable consumers was created.
func (f *fleet) consumers() map[string]time.Time {
	f.t.Helper()
	s, err := f.local.js.Stream(f.t.Context(), events.EventsStream)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]time.Time{}
	infos := s.ListConsumers(f.t.Context())
	for ci := range infos.Info() {
		if strings.HasPrefix(ci.Name, f.consumer+"_") {
			out[ci.Name] = ci.Created
		}
	}
	if err := infos.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// waitReadyz waits until the worker's /readyz answers code.
func (p *fleetProc) waitReadyz(code int, timeout time.Duration) {
	p.t.Helper()
	testenv.Eventually(p.t, timeout, func() error {
		got, err := p.ready()
		if err != nil {
			return err
		}
		if got != code {
			return fmt.Errorf("/readyz answers %d, want %d", got, code)
		}
		return nil
	})
}

// storedWithin waits until a result of id is stored, and checks it is the only one.
func (r *rig) storedWithin(id string, timeout time.Duration) *events.Result {
	r.t.Helper()
	subject := events.ResultSubject(id)
	testenv.Eventually(r.t, timeout, func() error {
		s, err := r.js.Stream(r.t.Context(), events.ResultsStream)
		if err != nil {
			return err
		}
		info, err := s.Info(r.t.Context(), jetstream.WithSubjectFilter(subject))
		if err != nil {
			return err
		}
		if info.State.Subjects[subject] == 0 {
			return fmt.Errorf("no result of %s stored yet", id)
		}
		return nil
	})
	return r.oneStored(id)
}

// Dependency outages. NATS stopped while an event waits in the stream, then the KRaft
// cluster's brokers all stopped for a minute with an event published meanwhile: the
// worker reports not-ready on /readyz while either is down, reconnects by itself, keeps
// its durable consumers (same creation time), and each event gets its one result, on its
// first delivery (none is used up while a dependency is known down).
func TestOutagesLoseNoEvent(t *testing.T) {
	env := testenv.GetExclusive(t)
	f := newFleet(t, env)
	a := f.start("a")
	ltopic := f.local.topic("outage", [][]int32{{1, 2, 3}}, 0, nil)
	ktopic := f.kraft.topic("outage", [][]int32{{1, 2, 3}}, 0, nil)
	a.waitReadyz(http.StatusOK, time.Minute)
	consumers := f.consumers()
	if len(consumers) != 4 {
		t.Fatalf("consumers %v; want two per cluster (its events, its control events)", consumers)
	}

	// An event held in the stream (its lock's ZooKeeper is unreachable) while NATS is down.
	f.proxy.Cut()
	a.waitFor("not taking events of this cluster", 30*time.Second)
	held := f.local.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": ltopic, "preferred_leader": 2})
	env.StopNATS(t)
	a.waitReadyz(http.StatusServiceUnavailable, 30*time.Second)
	env.StartNATS(t)
	f.proxy.Heal()
	if res := f.local.storedWithin(held.id, 2*time.Minute); res.Status != events.StatusSucceeded || res.Attempt != 1 {
		t.Fatalf("event held across the NATS outage: %s (%s) on attempt %d; want succeeded on attempt 1", res.Status, res.Error, res.Attempt)
	}
	a.waitReadyz(http.StatusOK, time.Minute)

	// The KRaft cluster down for a minute, an event published while it is.
	env.StopCluster(t, "kraft")
	stopped := time.Now()
	a.waitReadyz(http.StatusServiceUnavailable, time.Minute)
	// Once the worker says it takes no events of the cluster, it has no fetch out for it.
	a.waitFor("kafka "+f.kraft.alias+" is down", time.Minute)
	during := f.kraft.publishSeq(events.TypeReplicaChangeRequested, map[string]any{"topic": ktopic, "preferred_leader": 3})
	for time.Since(stopped) < time.Minute {
		if code, err := a.ready(); err != nil || code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz with every broker of kraft down: %d %v; want 503", code, err)
		}
		select {
		case res := <-during.ch:
			t.Fatalf("event answered while its cluster is down: %s (%s)", res.Status, res.Error)
		case <-time.After(2 * time.Second):
		}
	}
	env.StartCluster(t, "kraft")
	if res := f.kraft.storedWithin(during.id, 3*time.Minute); res.Status != events.StatusSucceeded || res.Attempt != 1 {
		t.Fatalf("event published while the cluster was down: %s (%s) on attempt %d; want succeeded on attempt 1", res.Status, res.Error, res.Attempt)
	}
	a.waitReadyz(http.StatusOK, time.Minute)
	// The same durable consumers: created before the outages (the server restores the
	// creation time with less precision after a restart).
	after := f.consumers()
	if !maps.EqualFunc(after, consumers, func(a, b time.Time) bool { return a.Sub(b).Abs() < time.Second }) {
		t.Errorf("consumers before the outages %v, after %v; want the same durable consumers", consumers, after)
	}
	f.local.noLeftovers([]string{ltopic}, nil)
	f.kraft.noLeftovers([]string{ktopic}, nil)
}

// postAlert posts an Alertmanager webhook notification of one alert (its fingerprint,
// Alertmanager's of its labels, and startsAt, as Alertmanager would send for one firing)
// to the worker.
func (p *fleetProc) postAlert(status string, labels map[string]string, startsAt time.Time) (int, string) {
	p.t.Helper()
	l := map[string]string{"alertname": "KafkaBrokerOverloaded"}
	maps.Copy(l, labels)
	fingerprint := alertmanager.Fingerprint(l)
	body, err := json.Marshal(map[string]any{"version": "4", "status": status, "receiver": "kafkamender",
		"groupKey": `{}:{alertname="KafkaBrokerOverloaded"}`,
		"alerts": []map[string]any{{"status": status, "labels": l, "annotations": map[string]string{"summary": "broker 2 is overloaded"},
			"startsAt": startsAt.Format(time.RFC3339Nano), "fingerprint": fingerprint}}})
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := http.Post("http://"+p.addr+"/v1/alertmanager", "application/json", bytes.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// An Alertmanager webhook notification (the format Alertmanager sends) ends in a
// leadership change on the ZooKeeper-mode cluster; the same alert notified again is the
// same event and changes nothing more; a resolved alert changes nothing; a malformed
// payload gets 400.
func TestAlertmanagerWebhookShedsOnce(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env)
	a := f.start("a")
	topic := f.local.topic("am", [][]int32{{2, 1, 3}, {2, 3, 4}, {2, 4, 1}}, 0, nil)
	labels := map[string]string{"cluster": f.local.alias, "broker_id": "2", "topic": topic}
	// A firing of its own: the event id comes from the fingerprint (of labels naming a new
	// topic) and startsAt.
	startsAt := time.Now().UTC()

	code, out := a.postAlert("firing", labels, startsAt)
	if code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, out)
	}
	var resp struct {
		Published []struct {
			ID        string `json:"id"`
			Duplicate bool   `json:"duplicate"`
		} `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Published) != 1 || resp.Published[0].Duplicate {
		t.Fatalf("webhook response %s (%v); want one event published", out, err)
	}
	id := resp.Published[0].ID
	res := f.local.storedWithin(id, 2*time.Minute)
	if res.Status != events.StatusSucceeded || len(res.Changes) != 3 || res.Reason != "alertmanager: broker 2 is overloaded" {
		t.Fatalf("result of the alert's event: %s (%s), %d changes, reason %q", res.Status, res.Error, len(res.Changes), res.Reason)
	}
	after := f.local.shedFrom(topic, 2)

	// Alertmanager's repeat: the same event id, not stored again, nothing changes.
	code, out = a.postAlert("firing", labels, startsAt)
	if code != http.StatusOK || !strings.Contains(out, `"duplicate":true`) || !strings.Contains(out, id) {
		t.Fatalf("repeated notification: %d %s", code, out)
	}
	code, out = a.postAlert("resolved", labels, startsAt)
	if code != http.StatusOK || !strings.Contains(out, `"resolved":1`) || !strings.Contains(out, `"published":[]`) {
		t.Fatalf("resolved: %d %s", code, out)
	}
	resp2, err := http.Post("http://"+a.addr+"/v1/alertmanager", "application/json", strings.NewReader(`{"version":"4","alerts":[{"status":"maybe"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed webhook: %d, want 400", resp2.StatusCode)
	}
	f.local.oneStored(id)
	f.local.unchangedSince(topic, after, "the repeat and the resolve")
	f.local.noLeftovers([]string{topic}, nil)
}

// metric returns the value of one sample of the worker's /metrics (0 when absent).
func (p *fleetProc) metric(sample string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// postToAlertmanager posts alerts to the local Alertmanager's API, as Prometheus does.
func postToAlertmanager(t *testing.T, alerts []map[string]any) {
	t.Helper()
	postToAlertmanagerAt(t, stack.AlertmanagerURL, alerts)
}

// postToAlertmanagerAt posts alerts to the API of the Alertmanager at url.
func postToAlertmanagerAt(t *testing.T, url string, alerts []map[string]any) {
	t.Helper()
	body, err := json.Marshal(alerts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		t.Fatalf("alertmanager: %s %s", resp.Status, out)
	}
}

// The whole path through the local stack's real Alertmanager: an alert posted to its API
// reaches the worker's webhook and sheds the broker on the ZooKeeper-mode cluster, once;
// Alertmanager's re-notifications (every 5s here) are the same event, stored once; the
// resolved alert changes nothing.
func TestAlertmanagerToWorker(t *testing.T) {
	env := testenv.Get(t)
	env.LockWorkerAddr(t)
	f := newFleet(t, env)
	a := f.startAt("a", strings.TrimSuffix(strings.TrimPrefix(stack.WorkerWebhookURL, "http://"), alertmanager.Path))
	topic := f.local.topic("am", [][]int32{{2, 1, 3}, {2, 3, 4}, {2, 4, 1}}, 0, nil)
	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	alert := map[string]any{
		"labels":      map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": f.local.alias, "broker_id": "2", "topic": topic},
		"annotations": map[string]string{"summary": "broker 2 is overloaded"},
		"startsAt":    startsAt.Format(time.RFC3339Nano),
	}
	postToAlertmanager(t, []map[string]any{alert})

	// Alertmanager's fingerprint of the alert makes the event id.
	var fingerprint string
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get(stack.AlertmanagerURL + "/api/v2/alerts?filter=" + url.QueryEscape(`cluster="`+f.local.alias+`"`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var got []struct {
			Fingerprint string `json:"fingerprint"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("alertmanager has %d alerts for the cluster", len(got))
		}
		fingerprint = got[0].Fingerprint
		return nil
	})
	id := alertmanager.ID(alertmanager.Alert{Fingerprint: fingerprint, StartsAt: startsAt})
	res := f.local.storedWithin(id, 2*time.Minute)
	if res.Status != events.StatusSucceeded || len(res.Changes) != 3 {
		t.Fatalf("result of the alert's event: %s (%s), %d changes", res.Status, res.Error, len(res.Changes))
	}
	after := f.local.shedFrom(topic, 2)

	const duplicates = `kafkamender_alertmanager_alerts_total{outcome="duplicate"}`
	testenv.Eventually(t, time.Minute, func() error {
		if n := a.metric(duplicates); n < 1 {
			return fmt.Errorf("no re-notification yet (%s %v)", duplicates, n)
		}
		return nil
	})
	alert["endsAt"] = time.Now().UTC().Format(time.RFC3339Nano)
	postToAlertmanager(t, []map[string]any{alert})
	const resolved = `kafkamender_alertmanager_alerts_total{outcome="resolved"}`
	testenv.Eventually(t, time.Minute, func() error {
		if n := a.metric(resolved); n < 1 {
			return fmt.Errorf("no resolved notification yet (%s %v)", resolved, n)
		}
		return nil
	})
	f.local.oneStored(id)
	f.local.unchangedSince(topic, after, "the re-notifications and the resolve")
	f.local.noLeftovers([]string{topic}, nil)
}

// shedFrom waits until no partition of topic is led by broker and returns the placement.
func (r *rig) shedFrom(topic string, broker int32) []model.Partition {
	r.t.Helper()
	var now []model.Partition
	testenv.Eventually(r.t, 30*time.Second, func() error {
		now = r.partitions(topic)
		for _, p := range now {
			if p.Leader == broker {
				return fmt.Errorf("%s still led by broker %d", p.TopicPartition, broker)
			}
		}
		return nil
	})
	return now
}

// unchangedSince checks that topic's replicas and leaders are as in before, after what.
func (r *rig) unchangedSince(topic string, before []model.Partition, what string) {
	r.t.Helper()
	if now := r.partitions(topic); !slices.EqualFunc(now, before, func(x, y model.Partition) bool {
		return x.Leader == y.Leader && slices.Equal(x.Replicas, y.Replicas)
	}) {
		r.t.Errorf("partitions changed after %s: %v -> %v", what, before, now)
	}
}
