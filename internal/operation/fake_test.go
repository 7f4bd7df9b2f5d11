package operation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/operation/operationtest"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// A cluster in memory, and a task that copies on it the way a replication-factor change
// does, so that the engine's crash-safety rules run in milliseconds: each planned partition
// goes from replicas [1 2] to [1 2 3] through a reassignment (copying), under a throttle
// the task sets and restores; faults are injected at named points.

// fakeCluster is the cluster the fake tasks change.
type fakeCluster struct {
	mu         sync.Mutex
	replicas   map[model.TopicPartition][]int32
	copying    map[model.TopicPartition]bool
	epoch      map[model.TopicPartition]int32
	throttle   bool // our throttle is set
	cancelable bool // reassignments can be cancelled (Kafka 2.4+)
	// finishCopies: reassignments end as soon as they are submitted.
	finishCopies bool
}

const topic = "orders"

func newFakeCluster(partitions int) *fakeCluster {
	c := &fakeCluster{replicas: map[model.TopicPartition][]int32{}, copying: map[model.TopicPartition]bool{},
		epoch: map[model.TopicPartition]int32{}, cancelable: true, finishCopies: true}
	for i := range partitions {
		c.replicas[tp(i)] = []int32{1, 2}
	}
	return c
}

func tp(i int) model.TopicPartition { return model.TopicPartition{Topic: topic, Partition: int32(i)} }

// submit starts the reassignment of tp to [1 2 3].
func (c *fakeCluster) submit(tp model.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.replicas[tp]; !ok || slices.Equal(c.replicas[tp], []int32{1, 2, 3}) {
		return
	}
	if c.finishCopies {
		c.replicas[tp] = []int32{1, 2, 3}
		c.epoch[tp]++
		return
	}
	c.copying[tp] = true
}

// finish ends the reassignments copying.
func (c *fakeCluster) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range c.copying {
		c.replicas[tp] = []int32{1, 2, 3}
		c.epoch[tp]++
	}
	c.copying = map[model.TopicPartition]bool{}
}

// read is a snapshot of the partitions: replicas, copying, epochs.
func (c *fakeCluster) read() (map[model.TopicPartition][]int32, map[model.TopicPartition]bool, map[model.TopicPartition]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := map[model.TopicPartition][]int32{}
	for k, v := range c.replicas {
		r[k] = slices.Clone(v)
	}
	cp := map[model.TopicPartition]bool{}
	for k, v := range c.copying {
		cp[k] = v
	}
	ep := map[model.TopicPartition]int32{}
	for k, v := range c.epoch {
		ep[k] = v
	}
	return r, cp, ep
}

func (c *fakeCluster) deleteTopic() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicas, c.copying = map[model.TopicPartition][]int32{}, map[model.TopicPartition]bool{}
}

// leftovers says what of ours is left on the cluster: a throttle, copies.
func (c *fakeCluster) leftovers() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.throttle {
		errs = append(errs, errors.New("the throttle is left"))
	}
	if len(c.copying) > 0 {
		errs = append(errs, fmt.Errorf("%d reassignments left", len(c.copying)))
	}
	return errors.Join(errs...)
}

// faults are the failures to inject, by point: "plan", "throttle", "submit", "apply"
// (after the copies), "verify", "rollback", "restore". Each fires once (or n times).
type faults struct {
	mu sync.Mutex
	at map[string][]error
}

func (f *faults) set(point string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string][]error{}
	}
	f.at[point] = append(f.at[point], errs...)
}

func (f *faults) check(point string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.at[point]) == 0 {
		return nil
	}
	err := f.at[point][0]
	f.at[point] = f.at[point][1:]
	return err
}

// fakeTasks builds fakeTasks on one fakeCluster.
type fakeTasks struct {
	c      *fakeCluster
	faults *faults
	mu     sync.Mutex
	floors [][]model.Seen // the floor of each run planned or resumed
	built  []string       // "new <id>", "resume <id>"
	order  []string       // "prefetch <id>", "discard <id>", "resume <id>", "plan <id> prefetched|read", in turn
}

// Prefetch implements operation.Prefetcher: it records what the engine does with it.
func (f *fakeTasks) Prefetch(_ context.Context, ev *events.Event) operation.Prefetch {
	f.log("prefetch " + ev.ID)
	return &fakePrefetch{ts: f, id: ev.ID}
}

// snapshotOrder is a copy of order, safe beside a delivery running.
func (f *fakeTasks) snapshotOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

func (f *fakeTasks) log(s string) {
	f.mu.Lock()
	f.order = append(f.order, s)
	f.mu.Unlock()
}

type fakePrefetch struct {
	ts        *fakeTasks
	id        string
	discarded bool
}

func (p *fakePrefetch) Discard() {
	if !p.discarded {
		p.discarded = true
		p.ts.log("discard " + p.id)
	}
}

func (f *fakeTasks) Answer(context.Context, operation.Delivery) (*events.Result, error) {
	return nil, nil
}

func (f *fakeTasks) New(_ context.Context, ev *events.Event, res *events.Result) (operation.Task, error) {
	req := ev.Payload.(*events.ReplicaChange)
	if req.Topic != topic {
		return nil, operation.Reject("topic %q does not exist", req.Topic)
	}
	res.Strategy = "api"
	f.mu.Lock()
	f.built = append(f.built, "new "+ev.ID)
	f.mu.Unlock()
	return &fakeTask{ts: f, partitions: req.Partitions}, nil
}

func (f *fakeTasks) Resume(_ context.Context, ev *events.Event, e *journal.Entry, res *events.Result) (operation.Task, error) {
	if err := f.faults.check("resume"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.built = append(f.built, "resume "+e.Event)
	f.order = append(f.order, "resume "+e.Event)
	f.mu.Unlock()
	res.Strategy = e.Strategy
	return &fakeTask{ts: f, decoded: ev.Payload != nil}, nil
}

// fakeTask is one event's operation on the fake cluster.
type fakeTask struct {
	ts         *fakeTasks
	partitions []int32
	decoded    bool
}

func (t *fakeTask) Plan(_ context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	if err := t.ts.faults.check("plan"); err != nil {
		return nil, err
	}
	t.ts.mu.Lock()
	t.ts.floors = append(t.ts.floors, r.Floor())
	t.ts.mu.Unlock()
	if p, ok := r.Prefetched().(*fakePrefetch); ok && !p.discarded {
		t.ts.log("plan " + r.Event.ID + " prefetched")
	} else {
		t.ts.log("plan " + r.Event.ID + " read")
	}
	replicas, _, _ := t.ts.c.read()
	p := &operation.Planned{Deadline: time.Now().Add(time.Hour)}
	for _, i := range t.partitions {
		rs, ok := replicas[tp(int(i))]
		switch {
		case !ok:
			return nil, operation.Reject("no partition %d", i)
		case slices.Equal(rs, []int32{1, 2, 3}):
			p.Noop = append(p.Noop, tp(int(i)))
		default:
			p.Changes = append(p.Changes, events.Change{TopicPartition: tp(int(i)), ReplicasBefore: []int32{1, 2}, ReplicasAfter: []int32{1, 2, 3},
				LeaderBefore: 1, LeaderAfter: 1})
		}
	}
	return p, nil
}

func (t *fakeTask) Apply(ctx context.Context, r *operation.Run) error {
	if !t.decoded && r.Event.Payload == nil {
		return errors.New("fake task: cannot apply without its event")
	}
	t.ts.mu.Lock()
	t.ts.floors = append(t.ts.floors, r.Floor())
	t.ts.mu.Unlock()
	e := r.Entry()
	c := t.ts.c
	if e.Throttles == nil {
		e.Throttles = []events.ThrottleKey{{Entity: "broker", Name: "3", Key: "follower.replication.throttled.rate", Ours: "1000"}}
		if err := r.Save(ctx, journal.StepThrottling); err != nil {
			return err
		}
	}
	if err := t.ts.faults.check("throttle"); err != nil {
		return err
	}
	c.mu.Lock()
	c.throttle = true
	c.mu.Unlock()
	r.Step(operation.StepThrottled)
	var submit []model.TopicPartition
	replicas, copying, _ := c.read()
	for _, ch := range e.Changes {
		if rs, ok := replicas[ch.TopicPartition]; ok && slices.Equal(rs, ch.ReplicasBefore) && !copying[ch.TopicPartition] {
			submit = append(submit, ch.TopicPartition)
		}
	}
	if len(submit) > 0 {
		for _, p := range submit {
			if !e.Submitted(p) {
				e.Reassignments = append(e.Reassignments, p)
			}
		}
		if err := r.Save(ctx, journal.StepCopying); err != nil {
			return err
		}
	}
	for _, p := range submit {
		if err := t.ts.faults.check("submit"); err != nil {
			return err
		}
		c.submit(p)
	}
	r.Step(operation.StepCopying)
	if err := t.ts.faults.check("apply"); err != nil {
		return err
	}
	for {
		_, copying, _ := c.read()
		if len(copying) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
	return t.restore(ctx, r)
}

func (t *fakeTask) restore(ctx context.Context, r *operation.Run) error {
	if err := t.ts.faults.check("restore"); err != nil {
		return err
	}
	e := r.Entry()
	if e.Throttles == nil {
		return nil
	}
	t.ts.c.mu.Lock()
	t.ts.c.throttle = false
	t.ts.c.mu.Unlock()
	e.Throttles = nil
	return r.Op.Save(ctx)
}

// changes is what the cluster shows changed of the plan, and what it leaves.
func (t *fakeTask) changes(r *operation.Run) ([]events.Change, []model.Seen, int, []events.Skip) {
	replicas, _, epochs := t.ts.c.read()
	var out []events.Change
	var left []model.Seen
	var skips []events.Skip
	verified := 0
	for _, ch := range r.Entry().Changes {
		rs, ok := replicas[ch.TopicPartition]
		if !ok {
			skips = append(skips, events.Skip{TopicPartition: ch.TopicPartition, Reason: "the partition no longer exists", Code: "changed_since_plan"})
			continue
		}
		if slices.Equal(rs, ch.ReplicasAfter) {
			verified++
		}
		if !slices.Equal(rs, ch.ReplicasBefore) {
			out = append(out, events.Change{TopicPartition: ch.TopicPartition, ReplicasBefore: ch.ReplicasBefore, ReplicasAfter: rs, LeaderBefore: 1, LeaderAfter: 1})
			left = append(left, model.Seen{TopicPartition: ch.TopicPartition, Replicas: rs, Leader: 1, LeaderEpoch: epochs[ch.TopicPartition]})
		}
	}
	return out, left, verified, skips
}

func (t *fakeTask) Verify(_ context.Context, r *operation.Run) (int, error) {
	if err := t.ts.faults.check("verify"); err != nil {
		return 0, err
	}
	changes, left, verified, skips := t.changes(r)
	r.Result.Changes, r.Result.Noop = changes, r.Entry().Noop
	r.Result.Skipped = append(slices.Clone(r.Entry().Skipped), skips...)
	r.Entry().Left = left
	return verified, nil
}

func (t *fakeTask) Rollback(ctx context.Context, r *operation.Run) (string, error) {
	if err := t.ts.faults.check("rollback"); err != nil {
		return "", err
	}
	c := t.ts.c
	c.mu.Lock()
	n, cancelable := len(c.copying), c.cancelable
	if cancelable {
		c.copying = map[model.TopicPartition]bool{}
	}
	c.mu.Unlock()
	summary := fmt.Sprintf("cancelled %d", n)
	if n > 0 && !cancelable {
		r.Entry().Step = journal.StepAwaiting
		if err := r.Op.Save(ctx); err != nil {
			return "", err
		}
		summary = fmt.Sprintf("%d still copying, which the cluster cannot cancel", n)
	} else if err := t.restore(ctx, r); err != nil {
		return summary, err
	}
	r.Result.Changes, _, _, _ = t.changes(r)
	return summary, nil
}

func (t *fakeTask) AwaitDetached(ctx context.Context, r *operation.Run) error {
	for {
		_, copying, _ := t.ts.c.read()
		if len(copying) == 0 {
			return t.restore(ctx, r)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
}

// fakeGuard refuses what the test says, and records the counts.
type fakeGuard struct {
	mu       sync.Mutex
	refuse   error // Refuses
	cap      int   // Partitions: 0 no cap
	full     bool  // Count refuses
	counted  []string
	partsAsk []int
}

func (g *fakeGuard) Refuses(*events.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refuse
}

func (g *fakeGuard) Partitions(n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.partsAsk = append(g.partsAsk, n)
	if g.cap > 0 && n > g.cap {
		return operation.Reject("guardrails.max_partitions_per_event: the plan changes %d partitions, over the cap of %d", n, g.cap)
	}
	return nil
}

func (g *fakeGuard) Count(_ context.Context, alive func() error, ev *events.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := alive(); err != nil {
		return err
	}
	if slices.Contains(g.counted, ev.ID) {
		return nil
	}
	if g.full {
		return operation.Reject("guardrails.max_operations_per_hour: full")
	}
	g.counted = append(g.counted, ev.ID)
	return nil
}

// fakeCancels holds the requests to cancel events (operation-cancel), by event id.
type fakeCancels struct {
	mu  sync.Mutex
	why map[string]string
}

func (f *fakeCancels) cancel(id, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why == nil {
		f.why = map[string]string{}
	}
	f.why[id] = why
}

func (f *fakeCancels) Cancelled(_ context.Context, _, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.why[id], nil
}

// rig is an engine on fakes: the cluster, the journal in memory, results, locks.
type rig struct {
	t       *testing.T
	c       *fakeCluster
	faults  *faults
	tasks   *fakeTasks
	journal *journal.Store
	mem     *journal.Memory
	results *operationtest.Results
	locks   *operationtest.Locker
	guard   *fakeGuard
	cancels *fakeCancels
	hook    func(string) // the hook of the next run; reset after each
	mu      sync.Mutex
	engine  *operation.Engine
}

const cluster = "c1"

func newRig(t *testing.T, partitions int, opts ...func(*operation.Config)) *rig {
	t.Helper()
	store, mem := journal.NewMemory()
	r := &rig{t: t, c: newFakeCluster(partitions), faults: &faults{}, journal: store, mem: mem,
		results: operationtest.NewResults(), locks: operationtest.NewLocker(), guard: &fakeGuard{}, cancels: &fakeCancels{}}
	r.tasks = &fakeTasks{c: r.c, faults: r.faults}
	cfg := operation.Config{Clusters: []string{cluster}, Tasks: r.tasks, Journal: store, Results: r.results, Locks: r.locks, Guard: r.guard,
		Cancels: r.cancels, CancelPoll: 5 * time.Millisecond, Logger: zaptest.NewLogger(t), Hook: func(step string) {
			r.mu.Lock()
			h := r.hook
			r.mu.Unlock()
			if h != nil {
				h(step)
			}
		}}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := operation.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.engine = e
	return r
}

// onStep sets the hook of the runs to come.
func (r *rig) onStep(h func(string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = h
}

var seq int

// event is a replication-factor event for the partitions of the fake cluster.
func (r *rig) event(partitions ...int32) *events.Event {
	seq++
	data, _ := json.Marshal(map[string]any{"topic": topic, "partitions": partitions, "replication_factor": 3})
	env := events.Envelope{SpecVersion: events.SpecVersion, ID: fmt.Sprintf("ev-%d", seq), Source: "test", Type: events.TypeReplicaChangeRequested,
		Time: time.Now().UTC(), DataContentType: events.ContentTypeJSON, Data: data}
	body, _ := json.Marshal(env)
	ev, err := events.Decode(events.Subject(cluster, env.Type), nats.Header{}, body, events.DecodeOptions{Clusters: []string{cluster}})
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

func (r *rig) delivery(ev *events.Event) *operationtest.Delivery {
	return operationtest.NewDelivery(ev, "w1", r.results)
}

// crash is the panic value of a worker killed at a step.
type crash struct{ step string }

// crashAt makes the next run die at step: nothing after it runs, the lock goes when its
// session would expire (here: at once).
func (r *rig) crashAt(step string) {
	r.onStep(func(s string) {
		if s == step {
			r.onStep(nil)
			panic(crash{s})
		}
	})
}

// handle delivers d; a crash is recovered and reported as crashed.
func (r *rig) handle(d operation.Delivery) (res *events.Result, err error, crashed bool) {
	r.t.Helper()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crash); !ok {
				panic(v)
			}
			crashed = true
		}
	}()
	res, err = r.engine.HandleDelivery(r.t.Context(), d)
	return res, err, false
}

// entry is the cluster's journal entry (nil: none).
func (r *rig) entry() *journal.Record {
	r.t.Helper()
	rec, err := r.journal.Get(r.t.Context(), cluster)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// settled checks nothing is left: no open journal entry, no lock held, nothing of ours on
// the cluster.
func (r *rig) settled() {
	r.t.Helper()
	if rec := r.entry(); rec != nil && rec.Open() {
		r.t.Errorf("journal entry left open: event %s at step %s", rec.Event, rec.Step)
	}
	if h := r.locks.Holder(cluster); h != nil {
		r.t.Errorf("lock left held for %s", h.Event)
	}
	if err := r.c.leftovers(); err != nil {
		r.t.Error(err)
	}
}

// truthful checks res lists exactly what the cluster shows changed for the partitions.
func (r *rig) truthful(res *events.Result, partitions ...int) {
	r.t.Helper()
	replicas, _, _ := r.c.read()
	var want []events.Change
	for _, i := range partitions {
		if rs := replicas[tp(i)]; !slices.Equal(rs, []int32{1, 2}) {
			want = append(want, events.Change{TopicPartition: tp(i), ReplicasBefore: []int32{1, 2}, ReplicasAfter: rs, LeaderBefore: 1, LeaderAfter: 1})
		}
	}
	if !changesEqual(res.Changes, want) {
		r.t.Errorf("result %s lists changes %+v; the cluster shows %+v", res.Status, res.Changes, want)
	}
}

func changesEqual(a, b []events.Change) bool {
	return slices.EqualFunc(a, b, func(x, y events.Change) bool {
		return x.TopicPartition == y.TopicPartition && slices.Equal(x.ReplicasBefore, y.ReplicasBefore) && slices.Equal(x.ReplicasAfter, y.ReplicasAfter) &&
			x.LeaderBefore == y.LeaderBefore && x.LeaderAfter == y.LeaderAfter && x.Bytes == y.Bytes
	})
}

var errTransient = retry.Transient(errors.New("controller moved"))
