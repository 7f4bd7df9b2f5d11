package handlers

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/scale"
)

// The scale benchmarks measure kafkamender's own cost on a cluster of 100,000 partitions
// (and 10,000 for a quick run), served by an in-process fake (package scale: kfake with
// the placement in control hooks): reading the whole cluster as broker-overloaded and
// replication-factor do, planning a shed of the skewed broker and a raise of topic "big"
// from 3 to 4 replicas, applying both (api strategy) and verifying with fresh reads and
// the comparisons the handlers make. The fake runs in the same process: its side of each
// request (building and encoding responses) is in the times and the heap too, so both are
// upper bounds of the worker's own.
//
//	go test -run '^$' -bench '^BenchmarkScale100k$' -benchtime 1x ./internal/handlers

func BenchmarkScale100k(b *testing.B) { benchScale(b, scale.Shape100k) }

func BenchmarkScale10k(b *testing.B) { benchScale(b, scale.Shape100k.Scaled(10_000)) }

func benchScale(b *testing.B, shape scale.Shape) {
	fc := StartScale(b, shape)
	var sum scalePhases
	var last *scaleRun
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fc.Reset()
		runtime.GC()
		b.StartTimer()
		r, err := runScale(b.Context(), fc)
		if err != nil {
			b.Fatal(err)
		}
		if r.shedVerified != len(r.shed.Changes) || r.rfVerified != len(r.rf.Changes) {
			b.Fatalf("verified %d of %d shed changes, %d of %d rf changes", r.shedVerified, len(r.shed.Changes), r.rfVerified, len(r.rf.Changes))
		}
		sum.add(r.scalePhases)
		last = r
	}
	n := float64(b.N)
	p := sum
	b.ReportMetric(p.read.Seconds()/n, "read-s")
	b.ReportMetric(p.shedPlan.Seconds()/n, "shed-plan-s")
	b.ReportMetric(p.rfPlan.Seconds()/n, "rf-plan-s")
	b.ReportMetric(p.verify.Seconds()/n, "verify-s")
	b.ReportMetric(p.total().Seconds()/n, "total-s")
	b.ReportMetric(p.apply.Seconds()/n, "apply-s")
	b.ReportMetric(float64(p.peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(p.applyPeak)/(1<<20), "apply-peak-heap-MB")
	b.ReportMetric(float64(last.base)/(1<<20), "base-heap-MB")
	b.ReportMetric(float64(p.alloc)/n/(1<<20), "alloc-MB")
	b.ReportMetric(float64(last.partitions), "partitions")
	b.ReportMetric(float64(len(last.shed.Changes)), "shed-changes")
	b.ReportMetric(float64(len(last.shed.Elections())), "leaders-moved")
	b.ReportMetric(float64(len(last.rf.Changes)), "replicas-added")
	b.Logf("%d partitions; per phase (s): read %.3f, shed plan %.3f, rf plan %.3f, verify %.3f (apply %.3f, not in the total); "+
		"heap: %.0f MB live before the read (the fake's model), peak %.0f MB (%.0f MB while applying); per phase: %s",
		last.partitions, p.read.Seconds()/n, p.shedPlan.Seconds()/n, p.rfPlan.Seconds()/n, p.verify.Seconds()/n, p.apply.Seconds()/n,
		float64(last.base)/(1<<20), float64(p.peak)/(1<<20), float64(p.applyPeak)/(1<<20), last.allocs)
}

// StartScale starts the fake of shape (package scale) and closes it when tb ends (a
// benchmark: each of its runs). Exported for the scale tests of package handlers_test.
func StartScale(tb testing.TB, shape scale.Shape) *scale.Cluster {
	tb.Helper()
	fc, err := scale.Start(shape)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(fc.Close)
	return fc
}

// ScaleClient returns a client of fc, closed when tb ends.
func ScaleClient(tb testing.TB, fc *scale.Cluster) *kgo.Client {
	tb.Helper()
	cl, err := fc.Client()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// scalePhases are the durations of a run's phases, and its heap.
type scalePhases struct {
	read, shedPlan, rfPlan, apply, verify time.Duration
	peak                                  uint64 // heap objects, bytes, sampled: the largest in the read, plans and verify
	applyPeak                             uint64 // the same while applying
	alloc                                 uint64 // bytes allocated in the read, plans and verify
}

// total is what the goal bounds: read + plans + verify (apply is the cluster's work).
func (p scalePhases) total() time.Duration { return p.read + p.shedPlan + p.rfPlan + p.verify }

func (p *scalePhases) add(q scalePhases) {
	p.read += q.read
	p.shedPlan += q.shedPlan
	p.rfPlan += q.rfPlan
	p.apply += q.apply
	p.verify += q.verify
	p.peak = max(p.peak, q.peak)
	p.applyPeak = max(p.applyPeak, q.applyPeak)
	p.alloc += q.alloc
}

// scaleRun is one pass: the plans, what verification found, and the costs.
type scaleRun struct {
	scalePhases
	partitions               int
	snap                     *model.Snapshot
	shed, rf                 plan.Plan
	shedNow, rfNow           map[model.TopicPartition]model.Partition
	shedVerified, rfVerified int
	shedChanged, rfChanged   []plan.Change
	base                     uint64 // heap objects after a GC before the read: the fake's model
	allocs                   string // allocated per phase, for the log
}

// shedBroker is the broker the scale runs shed: Shape100k skews leadership to it.
const shedBroker = 1

// runScale reads, plans, applies and verifies once (see BenchmarkScale100k).
func runScale(ctx context.Context, fc *scale.Cluster) (*scaleRun, error) {
	cl, err := fc.Client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	c := &Cluster{Name: "scale", Client: cl}
	caps, err := kafka.Probe(ctx, cl)
	if err != nil {
		return nil, err
	}
	rd := c.reader(caps)
	r := &scaleRun{}
	m := &heapSampler{}
	defer m.stop()
	r.base = readHeapObjects()
	var allocs []string
	phase := func(name string, d *time.Duration, fn func() error) error {
		m.reset()
		a := totalAlloc()
		md, lr := fc.Requests(kmsg.Metadata), fc.Requests(kmsg.ListPartitionReassignments)
		start := time.Now()
		err := fn()
		*d = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		n, peak := totalAlloc()-a, m.stop()
		allocs = append(allocs, fmt.Sprintf("%s %.0f MB allocated, peak %.0f MB (%d Metadata, %d ListPartitionReassignments)", name,
			float64(n)/(1<<20), float64(peak)/(1<<20), fc.Requests(kmsg.Metadata)-md, fc.Requests(kmsg.ListPartitionReassignments)-lr))
		if name == "apply" {
			r.applyPeak = peak
		} else {
			r.alloc += n
			r.peak = max(r.peak, peak)
		}
		return nil
	}

	// Read as broker-overloaded and replication-factor do: every topic (balance is
	// cluster-wide), and the raised topic's min.insync.replicas.
	minISR := 0
	if err := phase("read", &r.read, func() (err error) {
		if r.snap, err = kafka.ReadSnapshot(ctx, cl); err != nil {
			return err
		}
		minISR, err = minInsyncReplicas(ctx, c, scale.BigTopic)
		return err
	}); err != nil {
		return nil, err
	}
	for _, ps := range r.snap.Topics {
		r.partitions += len(ps)
	}
	if err := phase("shed-plan", &r.shedPlan, func() (err error) {
		// Not the raised topic: both plans come from one read, and the raise would undo the
		// reorders of its partitions (two events would each read afresh).
		r.shed, err = plan.Shed(r.snap, plan.ShedRequest{Broker: shedBroker, DemoteToEnd: true, ExcludeTopics: []string{scale.BigTopic}})
		return err
	}); err != nil {
		return nil, err
	}
	if err := phase("rf-plan", &r.rfPlan, func() (err error) {
		r.rf, err = plan.ReplicationFactor(r.snap, plan.RFRequest{Topic: scale.BigTopic, Factor: 4, MinISR: minISR})
		return err
	}); err != nil {
		return nil, err
	}

	// Apply as the api strategy does (without the journal): every reorder in one request,
	// the elections in one batch, the raise's reassignments (the fake completes them at once).
	if err := phase("apply", &r.apply, func() error {
		be := kafka.NewAPIBackend(cl)
		if err := be.Reorder(ctx, r.shed.Reorders()); err != nil {
			return err
		}
		out, err := be.ElectPreferred(ctx, r.shed.Elections())
		if err != nil {
			return err
		}
		for tp, err := range out {
			if err != nil {
				return fmt.Errorf("elect %s: %w", tp, err)
			}
		}
		targets := map[model.TopicPartition][]int32{}
		for _, ch := range r.rf.Changes {
			targets[ch.TopicPartition] = ch.ReplicasAfter
		}
		return kafka.SubmitReassignment(ctx, cl, targets)
	}); err != nil {
		return nil, err
	}

	// Verify as reorderOp.run and rfTask.resume do: a fresh read of the planned
	// partitions, the comparisons with the plan, and the changes the result reports.
	if err := phase("verify", &r.verify, func() (err error) {
		none := map[model.TopicPartition]bool{}
		if r.shedNow, err = observe(ctx, rd, r.shed.Changes, 30*time.Second, none, true); err != nil {
			return err
		}
		if back := unelected(r.shed.Changes, func(tp model.TopicPartition) (model.Partition, bool) {
			p, ok := r.shedNow[tp]
			return p, ok
		}); len(back) > 0 {
			return fmt.Errorf("%d partitions reordered without their election", len(back))
		}
		r.shedChanged = changedFrom(r.shed.Changes, r.shedNow, true)
		for _, ch := range r.shed.Changes {
			if shows(r.shedNow[ch.TopicPartition], ch, true) {
				r.shedVerified++
			}
		}
		if r.rfNow, err = observe(ctx, rd, r.rf.Changes, 30*time.Second, none, false); err != nil {
			return err
		}
		r.rfChanged = changedFrom(r.rf.Changes, r.rfNow, false)
		for _, ch := range r.rf.Changes {
			if p, ok := r.rfNow[ch.TopicPartition]; ok && shows(p, ch, false) {
				r.rfVerified++
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	r.allocs = strings.Join(allocs, ", ")
	return r, nil
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// heapSampler samples runtime/metrics' /memory/classes/heap/objects:bytes (live objects
// and dead ones not yet swept: the heap the objects occupy) every millisecond between
// reset and stop, and keeps the largest value.
type heapSampler struct {
	peak atomic.Uint64
	done chan struct{}
	wg   sync.WaitGroup
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func readHeapObjects() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// reset starts sampling afresh.
func (m *heapSampler) reset() {
	m.stop()
	m.peak.Store(readHeapObjects())
	m.done = make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.done:
				return
			case <-t.C:
			}
		}
	}()
}

func (m *heapSampler) sample() {
	v := readHeapObjects()
	for {
		p := m.peak.Load()
		if v <= p || m.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// stop ends the sampling (if running) and returns the peak.
func (m *heapSampler) stop() uint64 {
	if m.done != nil {
		m.sample()
		close(m.done)
		m.wg.Wait()
		m.done = nil
	}
	return m.peak.Load()
}

// TestScalePlans checks the plans of the 100,000-partition cluster: the shed moves every
// leadership off the broker to in-sync replicas, balanced; the raise adds one replica per
// partition, rack-aware; applying them shows them in fresh reads. It asserts no time (a few
// seconds, under the race detector too).
func TestScalePlans(t *testing.T) {
	shape := scale.Shape100k
	fc := StartScale(t, shape)
	r, err := runScale(t.Context(), fc)
	if err != nil {
		t.Fatal(err)
	}
	if r.partitions != shape.Partitions {
		t.Fatalf("read %d partitions, want %d", r.partitions, shape.Partitions)
	}
	checkShedPlan(t, r.snap, r.shed, scale.BigTopic)
	checkRFPlan(t, r.snap, r.rf, shape.Big, fc.Racks())
	if r.shedVerified != len(r.shed.Changes) || len(r.shedChanged) != len(r.shed.Changes) {
		t.Errorf("shed: %d of %d changes verified, %d reported changed", r.shedVerified, len(r.shed.Changes), len(r.shedChanged))
	}
	if r.rfVerified != len(r.rf.Changes) || len(r.rfChanged) != len(r.rf.Changes) {
		t.Errorf("rf: %d of %d changes verified, %d reported changed", r.rfVerified, len(r.rf.Changes), len(r.rfChanged))
	}
	// A fresh read of the whole cluster: the broker leads and heads nothing (but in the
	// raised topic, which the shed left out).
	after, err := kafka.ReadSnapshot(t.Context(), ScaleClient(t, fc))
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range after.Topics {
		for _, p := range ps {
			if name == scale.BigTopic {
				continue
			}
			if p.Leader == shedBroker || p.Replicas[0] == shedBroker {
				t.Fatalf("after the shed %s: replicas %v, leader %d", p.TopicPartition, p.Replicas, p.Leader)
			}
		}
	}
	t.Logf("%d partitions: shed %d changes (%d leaders moved), raise %d replicas added; verified %d + %d",
		r.partitions, len(r.shed.Changes), len(r.shed.Elections()), len(r.rf.Changes), r.shedVerified, r.rfVerified)
}

// checkShedPlan: every partition the broker leads or heads (but in topic exclude) is
// changed; each change moves
// the head (and leadership) to a live in-sync replica other than the broker, keeps the
// replica set, demotes the broker to the tail; the leader counts of the brokers that could
// take some leadership end within one of each other, and the others' do not change.
func checkShedPlan(t *testing.T, s *model.Snapshot, p plan.Plan, exclude string) {
	t.Helper()
	if len(p.Skipped) > 0 || len(p.Blocked) > 0 {
		t.Fatalf("shed: %d skipped (first %+v), %d blocked", len(p.Skipped), p.Skipped[:min(1, len(p.Skipped))], len(p.Blocked))
	}
	load := map[int32]int{}
	for id := range s.Brokers {
		load[id] = 0
	}
	want := map[model.TopicPartition]bool{}
	kept := 0 // leaderships of the broker in topic exclude
	for name, ps := range s.Topics {
		for _, q := range ps {
			load[q.Leader]++
			if name == exclude {
				if q.Leader == shedBroker {
					kept++
				}
				continue
			}
			if q.Leader == shedBroker || q.Replicas[0] == shedBroker {
				want[q.TopicPartition] = true
			}
		}
	}
	if len(p.Changes) != len(want) {
		t.Fatalf("shed: %d changes, want one for each of the %d partitions the broker leads or heads", len(p.Changes), len(want))
	}
	takers := map[int32]bool{}
	for _, ch := range p.Changes {
		q, _ := s.Partition(ch.TopicPartition)
		if !want[ch.TopicPartition] {
			t.Fatalf("shed changes %s, which the broker neither leads nor heads", ch.TopicPartition)
		}
		to := ch.LeaderAfter
		_, live := s.Brokers[to]
		switch {
		case to == shedBroker || !live || !q.InSync(to):
			t.Fatalf("shed: %s goes to %d (isr %v)", ch.TopicPartition, to, q.ISR)
		case ch.ReplicasAfter[0] != to:
			t.Fatalf("shed: %s: %v is not headed by the new leader %d", ch.TopicPartition, ch.ReplicasAfter, to)
		case ch.ReplicasAfter[len(ch.ReplicasAfter)-1] != shedBroker:
			t.Fatalf("shed: %s: %v does not end with the broker", ch.TopicPartition, ch.ReplicasAfter)
		case !slices.Equal(sorted(ch.ReplicasAfter), sorted(q.Replicas)):
			t.Fatalf("shed: %s: %v is not a reorder of %v", ch.TopicPartition, ch.ReplicasAfter, q.Replicas)
		}
		if ch.LeaderBefore != to {
			load[ch.LeaderBefore]--
			load[to]++
			for _, id := range q.ISR {
				if _, ok := s.Brokers[id]; ok && id != shedBroker {
					takers[id] = true
				}
			}
		}
	}
	if load[shedBroker] != kept {
		t.Fatalf("shed: the broker still leads %d partitions (%d in %s)", load[shedBroker], kept, exclude)
	}
	lo, hi := -1, -1
	for id := range takers {
		if lo < 0 || load[id] < lo {
			lo = load[id]
		}
		hi = max(hi, load[id])
	}
	if hi-lo > 1 {
		t.Errorf("shed: leader counts of the brokers that could take leadership range %d..%d: %v", lo, hi, load)
	}
	t.Logf("shed: leader counts after: %v (brokers that could take some: %v)", load, slices.Sorted(maps.Keys(takers)))
}

// checkRFPlan: every partition of the topic gets exactly one new replica, appended, on a
// live broker that is not already one, leaving every rack with a replica and no rack with
// two more than another; leadership stays.
func checkRFPlan(t *testing.T, s *model.Snapshot, p plan.Plan, partitions int, racks map[int32]string) {
	t.Helper()
	if len(p.Changes) != partitions || len(p.Skipped)+len(p.Blocked)+len(p.Noop) > 0 {
		t.Fatalf("rf: %d changes (want %d), %d skipped, %d blocked, %d noop", len(p.Changes), partitions, len(p.Skipped), len(p.Blocked), len(p.Noop))
	}
	names := slices.Compact(slices.Sorted(maps.Values(racks)))
	for _, ch := range p.Changes {
		b, a := ch.ReplicasBefore, ch.ReplicasAfter
		if len(a) != len(b)+1 || !slices.Equal(a[:len(b)], b) || slices.Contains(b, a[len(b)]) || ch.LeaderAfter != ch.LeaderBefore {
			t.Fatalf("rf: %s: %v → %v (leader %d → %d) is not one replica appended", ch.TopicPartition, b, a, ch.LeaderBefore, ch.LeaderAfter)
		}
		if _, ok := s.Brokers[a[len(b)]]; !ok {
			t.Fatalf("rf: %s: new replica %d is no live broker", ch.TopicPartition, a[len(b)])
		}
		per := map[string]int{}
		for _, id := range a {
			per[racks[id]]++
		}
		lo, hi := len(a), 0
		for _, n := range names {
			lo, hi = min(lo, per[n]), max(hi, per[n])
		}
		if lo == 0 || hi-lo > 1 {
			t.Fatalf("rf: %s: %v has replicas per rack %v", ch.TopicPartition, a, per)
		}
	}
}

func sorted(ids []int32) []int32 { return slices.Sorted(slices.Values(ids)) }
