package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/scale"
)

func targets(names ...string) []fleetTarget {
	out := make([]fleetTarget, len(names))
	for i, n := range names {
		out[i] = fleetTarget{name: n, preferred: []preferredLeader{{"t0", 0, 2}, {"t0", 3, 4}}}
	}
	return out
}

// The events: exactly total, spread evenly, round robin; each cluster's first sheds
// broker 1 and comes before its others; the repeats name it; ids are distinct and valid.
func TestPlanFleetEvents(t *testing.T) {
	evs, err := planFleetEvents("bench-x", 10, targets("a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 10 {
		t.Fatalf("%d events", len(evs))
	}
	var order []string
	per := map[string][]fleetEvent{}
	ids := map[string]bool{}
	for _, ev := range evs {
		order = append(order, ev.cluster)
		per[ev.cluster] = append(per[ev.cluster], ev)
		if ids[ev.id] || !events.ValidID(ev.id) {
			t.Fatalf("id %q repeated or invalid", ev.id)
		}
		ids[ev.id] = true
	}
	if got := strings.Join(order, ""); got != "abcabcabca" {
		t.Errorf("publish order %s, want round robin", got)
	}
	if len(per["a"]) != 4 || len(per["b"]) != 3 || len(per["c"]) != 3 {
		t.Errorf("events per cluster: a %d, b %d, c %d", len(per["a"]), len(per["b"]), len(per["c"]))
	}
	for c, list := range per {
		first := list[0]
		if first.typ != events.TypeBrokerOverloaded || first.want != events.StatusSucceeded || first.data["dry_run"] != nil || first.data["broker"] != fleetShedBroker {
			t.Errorf("%s: first event %+v, want the shed of broker 1", c, first)
		}
		for _, ev := range list[1:] {
			switch ev.want {
			case events.StatusNoop:
				if ev.acting != first.id || ev.typ != events.TypeBrokerOverloaded || ev.data["broker"] != fleetShedBroker || ev.data["dry_run"] != nil {
					t.Errorf("%s: repeat %+v", c, ev)
				}
			case events.StatusPlanned:
				if ev.data["dry_run"] != true {
					t.Errorf("%s: %+v planned but no dry run", c, ev)
				}
			default:
				t.Errorf("%s: %+v wants %s", c, ev, ev.want)
			}
		}
	}
	// Over 100 events per cluster, a quarter of each kind after the first.
	evs, err = planFleetEvents("bench-y", 200, targets("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, ev := range evs {
		if ev.cluster == "a" {
			kinds[fmt.Sprintf("%s %s %v", ev.typ, ev.want, ev.data["replication_factor"] != nil)]++
		}
	}
	want := map[string]int{
		"broker-overloaded succeeded false":      1,
		"broker-overloaded noop false":           25,
		"replica-change-requested planned false": 25, // preferred leader
		"replica-change-requested planned true":  25, // raise
		"broker-overloaded planned false":        24,
	}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, kinds[k], n, kinds)
		}
	}
	if _, err := planFleetEvents("z", 2, targets("a", "b", "c")); err == nil {
		t.Error("fewer events than clusters: no error")
	}
	if _, err := planFleetEvents("z", 3, []fleetTarget{{name: "a"}}); err == nil {
		t.Error("a cluster without a preferred-leader target: no error")
	}
}

// Every event is one the workers' decoder takes, on its cluster's subject.
func TestFleetBodiesDecode(t *testing.T) {
	evs, err := planFleetEvents("bench-120000-fleet3-run1", 12, targets("fleet-001", "fleet-002", "fleet-003"))
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := fleetBodies(evs, fleetClusterNames(3))
	if err != nil {
		t.Fatal(err)
	}
	for i, body := range bodies {
		ev, err := events.Decode(events.Subject(evs[i].cluster, evs[i].typ), nil, body, events.DecodeOptions{Clusters: fleetClusterNames(3)})
		if err != nil {
			t.Fatalf("%s: %v", evs[i].id, err)
		}
		if ev.ID != evs[i].id || ev.Cluster != evs[i].cluster || ev.DryRun() != (evs[i].want == events.StatusPlanned) {
			t.Errorf("%s decoded as %s on %s, dry run %v", evs[i].id, ev.ID, ev.Cluster, ev.DryRun())
		}
	}
	// An event about a cluster the workers do not know is the bench's mistake.
	if _, err := fleetBodies(evs, []string{"fleet-001"}); err == nil {
		t.Error("unknown cluster: no error")
	}
}

// Each fake yields preferred-leader targets whose plan the shed cannot empty: neither led
// nor headed by broker 1, led by its head, the new leader an in-sync replica other than
// the head and broker 1.
func TestPreferredCandidates(t *testing.T) {
	fc, err := scale.Start(fleetShape)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	s, err := readFake(t.Context(), fc)
	if err != nil {
		t.Fatal(err)
	}
	got := preferredCandidates(s)
	if len(got) < 10 {
		t.Fatalf("%d candidates", len(got))
	}
	for _, c := range got {
		p, ok := s.Partition(model.TopicPartition{Topic: c.topic, Partition: c.partition})
		if !ok {
			t.Fatalf("%+v: no such partition", c)
		}
		if p.Leader == fleetShedBroker || p.Replicas[0] == fleetShedBroker || p.Leader != p.Replicas[0] ||
			c.broker == fleetShedBroker || c.broker == p.Replicas[0] || !p.InSync(c.broker) || !slices.Contains(p.Replicas, c.broker) {
			t.Errorf("%+v: replicas %v, isr %v, leader %d", c, p.Replicas, p.ISR, p.Leader)
		}
	}
}

// The configuration loads (strict keys) as the fleet means it: its consumer, one subject
// per cluster, locks in NATS and no ZooKeeper, every node of NATS.
func TestFleetConfig(t *testing.T) {
	urls := []string{"nats://127.0.0.1:24222", "nats://127.0.0.1:24232", "nats://127.0.0.1:24242"}
	raw, err := fleetConfigYAML("bench-fleet-1", urls, map[string][]string{
		"fleet-002": {"127.0.0.1:1002", "127.0.0.1:2002"},
		"fleet-001": {"127.0.0.1:1001"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if cfg.Worker.ID != "bench-fleet-1" || cfg.NATS.Consumer != fleetConsumer || cfg.HTTP.Listen != "127.0.0.1:0" {
		t.Errorf("worker %q, consumer %q, http %q", cfg.Worker.ID, cfg.NATS.Consumer, cfg.HTTP.Listen)
	}
	if got := cfg.NATS.URL.Reveal(); got != strings.Join(urls, ",") {
		t.Errorf("nats.url %q", got)
	}
	if want := []string{"kafkamender.events.fleet-001.>", "kafkamender.events.fleet-002.>"}; !slices.Equal(cfg.NATS.Subjects, want) {
		t.Errorf("subjects %v, want %v", cfg.NATS.Subjects, want)
	}
	if cfg.NeedsLockZooKeeper() || cfg.LockBackend("fleet-001") != config.LockNATS {
		t.Errorf("lock: backend %q, needs ZooKeeper %v", cfg.LockBackend("fleet-001"), cfg.NeedsLockZooKeeper())
	}
	if got := cfg.ClusterNames(); !slices.Equal(got, []string{"fleet-001", "fleet-002"}) {
		t.Errorf("clusters %v", got)
	}
	if got := cfg.Clusters["fleet-002"].BootstrapServers; !slices.Equal(got, []string{"127.0.0.1:1002", "127.0.0.1:2002"}) {
		t.Errorf("bootstrap servers %v", got)
	}
	// Each cluster's consumers are the fleet's, and take that cluster only.
	for _, c := range cfg.ClusterNames() {
		for _, name := range []string{pipeline.ClusterConsumer(cfg.NATS.Consumer, c), pipeline.ControlConsumer(cfg.NATS.Consumer, c)} {
			if !isFleetConsumer(name) {
				t.Errorf("consumer %s is not counted as the fleet's", name)
			}
		}
		if got, want := pipeline.ClusterFilters(cfg.NATS.Subjects, c), []string{events.EventsSubjectPrefix + "." + c + ".>"}; !slices.Equal(got, want) {
			t.Errorf("cluster %s takes %v, want %v", c, got, want)
		}
	}
	if isFleetConsumer("kafkamender-workers_kraft") || isFleetConsumer(fleetConsumer) {
		t.Error("another fleet's consumer counted as the fleet's")
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 37 ticks.
	stat := "4242 (my (odd) worker) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 9 0 100 123456 789 18446744073709551615\n"
	got, err := parseProcStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 2.87 {
		t.Errorf("%v s, want 2.87", got)
	}
	for _, bad := range []string{"", "4242 worker S 1", "4242 (w) S 1 2 3"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// This process's own: a number, not an error.
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tworker\nVmPeak:\t  900000 kB\nVmHWM:\t   81920 kB\nVmRSS:\t   70000 kB\n"
	got, err := parseVmHWM(status)
	if err != nil {
		t.Fatal(err)
	}
	if got != 81920*1024 {
		t.Errorf("%v", got)
	}
	for _, bad := range []string{"Name:\tw\n", "VmHWM:\t12 MB\n", "VmHWM:\tx kB\n"} {
		if _, err := parseVmHWM(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if v, err := procPeakRSS(os.Getpid()); err != nil || v <= 0 {
		t.Errorf("own peak RSS %v, %v", v, err)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 %s", got)
	}
	if got := percentile(ds, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 %s", got)
	}
	if got := percentile(ds, 1); got != 100*time.Millisecond {
		t.Errorf("p100 %s", got)
	}
	if got := percentile(ds[:1], 0.99); got != 100*time.Millisecond {
		t.Errorf("one value: %s", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("none: %s", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input")
	}
}

func TestWorkerLogProblem(t *testing.T) {
	for line, want := range map[string]bool{
		`{"level":"info","msg":"event handled"}`:                 false,
		`{"level":"warn","msg":"dependency down"}`:               false,
		`{"level":"error","msg":"worker failed","error":"boom"}`: true,
		`{"level":"fatal","msg":"x"}`:                            true,
		`panic: runtime error: invalid memory address`:           true,
		`goroutine 1 [running]:`:                                 true,
		``:                                                       false,
		`{"msg":"a JSON line without a level"}`:                  true,
	} {
		if _, got := workerLogProblem(line); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
	l, _ := workerLogProblem(`{"level":"info","msg":"kafkamender worker started","http":"127.0.0.1:4321"}`)
	if l.HTTP != "127.0.0.1:4321" {
		t.Errorf("http %q", l.HTTP)
	}
}

func TestCheckFleetResult(t *testing.T) {
	shed := &fleetEvent{id: "e0", cluster: "a", typ: events.TypeBrokerOverloaded, want: events.StatusSucceeded}
	repeat := &fleetEvent{id: "e1", cluster: "a", typ: events.TypeBrokerOverloaded, want: events.StatusNoop, acting: "e0"}
	dry := &fleetEvent{id: "e2", cluster: "a", typ: events.TypeReplicaChangeRequested, want: events.StatusPlanned}
	one := []events.Change{{}}
	for _, tc := range []struct {
		ev   *fleetEvent
		res  events.Result
		fine bool
	}{
		{shed, events.Result{Status: events.StatusSucceeded, Changes: one}, true},
		{shed, events.Result{Status: events.StatusSucceeded}, false},
		{shed, events.Result{Status: events.StatusPartial, Changes: one}, false},
		{shed, events.Result{Status: events.StatusSucceeded, Changes: one, Skipped: []events.Skip{{}}}, false},
		{repeat, events.Result{Status: events.StatusNoop, PreviousEvent: "e0"}, true},
		{repeat, events.Result{Status: events.StatusNoop}, false},
		{repeat, events.Result{Status: events.StatusSucceeded, Changes: one}, false},
		{dry, events.Result{Status: events.StatusPlanned, Changes: one}, true},
		{dry, events.Result{Status: events.StatusPlanned}, false},
		{dry, events.Result{Status: events.StatusRejected, Error: "no"}, false},
	} {
		err := checkFleetResult(tc.ev, &tc.res)
		if (err == nil) != tc.fine {
			raw, _ := json.Marshal(tc.res)
			t.Errorf("%s %s: %v", tc.ev.id, raw, err)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("%d: %q", n, got)
		}
	}
}

// One result heard for each event passes; a second one, or a replay (unless replays are
// taken, and then only one that says what the result said), or a wrong status fails.
func TestCollectorVerdict(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []fleetEvent{
		{id: "e0", cluster: "a", typ: events.TypeBrokerOverloaded, want: events.StatusSucceeded},
		{id: "e1", cluster: "a", typ: events.TypeBrokerOverloaded, want: events.StatusNoop, acting: "e0"},
	}
	one := []events.Change{{}}
	build := func(msgs ...events.Result) *collector {
		c := &collector{want: map[string]*fleetEvent{}, published: map[string]time.Time{}, heard: map[string]time.Time{},
			results: map[string]*events.Result{}, originals: map[string]int{}, replays: map[string][]*events.Result{}}
		for i := range evs {
			c.want[evs[i].id] = &evs[i]
			c.published[evs[i].id] = t0
		}
		for i, m := range msgs {
			if m.Replayed {
				c.replays[m.ID] = append(c.replays[m.ID], &m)
			} else {
				c.originals[m.ID]++
			}
			if c.results[m.ID] == nil {
				c.results[m.ID], c.heard[m.ID] = &m, t0.Add(time.Duration(i+1)*time.Second)
			}
		}
		return c
	}
	shed := events.Result{ID: "e0", Status: events.StatusSucceeded, Changes: one}
	noop := events.Result{ID: "e1", Status: events.StatusNoop, PreviousEvent: "e0"}
	replay := noop
	replay.Replayed = true
	badReplay := replay
	badReplay.Status = events.StatusFailed

	c := build(shed, noop)
	if n, err := c.verdict(false); err != nil || n != 0 {
		t.Errorf("one each: %d replays, %v", n, err)
	}
	lat := c.latencies()
	slices.Sort(lat)
	if !slices.Equal(lat, []time.Duration{time.Second, 2 * time.Second}) {
		t.Errorf("latencies %v", lat)
	}
	if _, err := build(shed, noop, noop).verdict(true); err == nil {
		t.Error("a result published twice: no error")
	}
	if _, err := build(shed, noop, replay).verdict(false); err == nil {
		t.Error("a replay, strict: no error")
	}
	if n, err := build(shed, noop, replay).verdict(true); err != nil || n != 1 {
		t.Errorf("a replay, taken: %d, %v", n, err)
	}
	if _, err := build(shed, noop, badReplay).verdict(true); err == nil {
		t.Error("a replay that differs: no error")
	}
	if _, err := build(shed, replay).verdict(true); err == nil {
		t.Error("only a replay heard: no error")
	}
	wrong := noop
	wrong.Status = events.StatusSucceeded
	if _, err := build(shed, wrong).verdict(false); err == nil {
		t.Error("a wrong status: no error")
	}
}

func TestFleetFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.scenarios["fleet"] || !slices.Equal(o.fleetSizes, []int{100, 300}) || o.fleetEvents != 10_000 || o.fleetWorkers != 3 || !o.fleetReplaysOK {
		t.Errorf("defaults: fleet %v, sizes %v, events %d, workers %d, replays ok %v", o.scenarios["fleet"], o.fleetSizes, o.fleetEvents, o.fleetWorkers, o.fleetReplaysOK)
	}
	if len(o.fleetNATS) != 3 || len(o.fleetMonitor) != 3 || o.fleetNATS[1] != "nats://127.0.0.1:4232" || o.fleetMonitor[2] != "http://127.0.0.1:8242" {
		t.Errorf("NATS %v, monitoring %v", o.fleetNATS, o.fleetMonitor)
	}
	o, err = parseFlags([]string{"-scenarios", "fleet", "-fleet-clusters", "10", "-fleet-events", "500", "-fleet-nats", "nats://127.0.0.1:24222", "-fleet-replays-ok=false"})
	if err != nil || !slices.Equal(o.fleetSizes, []int{10}) || o.fleetEvents != 500 || !slices.Equal(o.fleetNATS, []string{"nats://127.0.0.1:24222"}) || o.fleetReplaysOK {
		t.Errorf("%+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-fleet-clusters", "0"},
		{"-fleet-clusters", "100,100"},
		{"-fleet-clusters", "x"},
		{"-fleet-clusters", ""},
		{"-fleet-clusters", "300", "-fleet-events", "299"},
		{"-fleet-workers", "0"},
		{"-fleet-nats", ""},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
