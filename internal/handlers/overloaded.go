package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kvbucket"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// overloadedTask moves partition leadership off a broker (only the leader's load leaves
// it; no data moves), balanced across the in-sync replicas of the other brokers, with
// every reorder in one request and one batched preferred election: broker-overloaded.
type overloadedTask struct {
	reorderOp
	req *events.BrokerOverloaded // nil when a journaled request no longer decodes
	ev  *events.Event
	kv  jetstream.KeyValue
	log *zap.Logger
}

func (h *Handlers) newOverloaded(ctx context.Context, c *Cluster, ev *events.Event, req *events.BrokerOverloaded, res *events.Result, log *zap.Logger) (operation.Task, error) {
	strategy, caps, err := h.strategyFor(ctx, c, "")
	if err != nil {
		return nil, err
	}
	res.Strategy = string(strategy)
	kv, err := h.cool.bucket.KeyValue(ctx)
	if err != nil {
		return nil, err
	}
	return &overloadedTask{reorderOp: h.reorderOp(c, strategy, caps, h.cfg.Overloaded.ElectionBatchSize), req: req, ev: ev, kv: kv, log: log}, nil
}

// Plan reads every topic (balance is cluster-wide) and plans the shed, away from brokers
// shed recently. A fresh run first checks the cool-down again under the lock (another
// fleet may have shed the broker since Answer), then waits for partitions under
// reassignment when so configured.
func (t *overloadedTask) Plan(ctx context.Context, r *operation.Run, dry bool) (*operation.Planned, error) {
	res := r.Result
	now := time.Now()
	recent, err := t.h.cool.recent(ctx, t.kv, t.c.Name, now)
	if err != nil {
		return nil, err
	}
	if prev, ok := recent[*t.req.Broker]; !dry && ok && prev.Event != t.ev.ID && prev.Scope.covers(scopeOf(t.req)) {
		t.h.coolNoop(res, *t.req.Broker, prev)
		t.log.Info("alert within the cool-down", zap.String("previous_event", prev.Event))
		return &operation.Planned{}, nil
	}
	req := plan.ShedRequest{Broker: *t.req.Broker, Topics: t.req.Topics, ExcludeTopics: t.req.ExcludeTopics,
		MaxPartitions: t.req.MaxPartitions, DemoteToEnd: t.req.DemoteToEnd, WaitBlocked: t.h.cfg.Overloaded.WaitForReassignment,
		Protected: t.h.protected()}
	for b := range recent {
		if b != *t.req.Broker {
			req.Avoid = append(req.Avoid, b)
		}
	}
	wait := t.h.cfg.BlockedWait
	if dry {
		wait = 0
	}
	p, err := planUntilUnblocked(ctx, wait, func(ctx context.Context) (*model.Snapshot, plan.Plan, error) {
		snap, err := readNamed(ctx, t.c, t.rd(r), nil, t.req.Topics...) // every topic: balance is cluster-wide
		if err != nil {
			return nil, plan.Plan{}, err
		}
		p, err := plan.Shed(snap, req)
		if !dry {
			t.planned = snap
		}
		return snap, p, err
	}, t.log)
	if err != nil {
		return nil, err
	}
	if len(p.Changes) == 0 && len(p.Skipped) == 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("broker %d leads no partition here (and heads no assignment)", *t.req.Broker))
	}
	return p, nil
}

// Verify is the reorder's, and records the shed for the cool-down once some leadership
// moved.
func (t *overloadedTask) Verify(ctx context.Context, r *operation.Run) (int, error) {
	verified, err := t.reorderOp.Verify(ctx, r)
	if err != nil || verified == 0 || t.req == nil {
		return verified, err
	}
	rec, _ := json.Marshal(shedRecord{Event: r.Result.ID, At: time.Now().UTC(), Worker: r.Entry().Worker, Scope: scopeOf(t.req)})
	// Tried again for a while (a NATS node stopping fails a write or two): without the
	// record, the alerts that follow are not noops naming this event, and each takes the
	// lock to find the broker shed already.
	err = retry.Do(ctx, operation.CleanupTimeout, func() error {
		_, err := t.kv.Put(ctx, coolKey(t.c.Name, *t.req.Broker), rec)
		return retry.Transient(err)
	}, nil)
	if err != nil {
		r.Log.Warn("record the cool-down", zap.Error(err))
	}
	return verified, nil
}

// Answer implements operation.Tasks: a broker-overloaded alert for a broker shed within
// the cool-down (by another event) is answered before anything else: a noop naming that
// event, from one key-value read, without the lock and without touching Kafka, as alert
// storms need. A record only ever gets newer, so what it says holds when the lock would be
// taken.
func (h *Handlers) Answer(ctx context.Context, d operation.Delivery) (*events.Result, error) {
	ev := d.Event()
	req, ok := ev.Payload.(*events.BrokerOverloaded)
	if !ok || ev.DryRun() {
		return nil, nil
	}
	if _, known := h.cfg.Clusters[ev.Cluster]; !known {
		return nil, nil
	}
	rec, ok, err := h.cool.shedNow(ctx, ev.Cluster, *req.Broker)
	if err != nil || !ok || rec.Event == ev.ID || !rec.Scope.covers(scopeOf(req)) {
		return nil, err
	}
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Reason: req.Reason}
	h.coolNoop(res, *req.Broker, rec)
	return res, nil
}

// coolNoop makes res the noop of an alert for broker within the cool-down of the shed rec.
func (h *Handlers) coolNoop(res *events.Result, broker int32, rec shedRecord) {
	res.Status, res.PreviousEvent = events.StatusNoop, rec.Event
	res.Note = fmt.Sprintf("broker %d was shed by event %s at %s (worker %s); cool-down %s: not shedding again",
		broker, rec.Event, rec.At.Format(time.RFC3339), rec.Worker, h.cfg.Overloaded.CoolDown)
}

// Absorber implements pipeline.Absorber: after a broker-overloaded event sheds a broker,
// or finds it in the cool-down, the alerts for the same broker that follow it in the
// stream within the cool-down are noops naming the event that acted, answered in bulk.
func (h *Handlers) Absorber(ctx context.Context, done *events.Event, res *events.Result) (func(*events.Event, time.Time) *events.Result, error) {
	req, ok := done.Payload.(*events.BrokerOverloaded)
	if !ok || done.DryRun() || (res.Status != events.StatusSucceeded && res.Status != events.StatusNoop) {
		return nil, nil
	}
	rec, ok, err := h.cool.shedNow(ctx, done.Cluster, *req.Broker)
	if err != nil || !ok {
		return nil, err
	}
	return func(next *events.Event, now time.Time) *events.Result {
		nreq, ok := next.Payload.(*events.BrokerOverloaded)
		if !ok || *nreq.Broker != *req.Broker || !rec.Scope.covers(scopeOf(nreq)) || next.DryRun() || next.Expired(now) || next.ID == rec.Event ||
			now.Sub(rec.At) >= h.cool.ttl || h.refuses(next) != nil { // a guardrail's refusal is its answer
			return nil
		}
		out := &events.Result{Reason: nreq.Reason}
		h.coolNoop(out, *req.Broker, rec)
		return out
	}, nil
}

// coolDown keeps the brokers shed recently (events.OverloadedBucket).
type coolDown struct {
	bucket *kvbucket.Bucket
	ttl    time.Duration
}

func newCoolDown(js jetstream.JetStream, ttl time.Duration) *coolDown {
	return &coolDown{ttl: ttl, bucket: kvbucket.New(js, jetstream.KeyValueConfig{
		Bucket:      events.OverloadedBucket,
		Description: "brokers shed recently, per cluster: cool-down of broker-overloaded alerts",
		TTL:         ttl,
		History:     1,
		Storage:     jetstream.FileStorage,
		MaxBytes:    16 << 20, // full: a write fails, nothing dropped
	})}
}

// shedRecord is the value of a cool-down key.
type shedRecord struct {
	Event  string    `json:"event"`
	At     time.Time `json:"at"`
	Worker string    `json:"worker"`
	// Scope is what the event that shed asked; records of earlier versions have none,
	// which reads as the whole broker.
	Scope shedScope `json:"scope,omitzero"`
}

// shedScope is what a broker-overloaded request asks to shed: all of the broker's
// leadership (what an alert asks), or the leadership of some topics, up to a number of
// partitions; and whether to demote the broker in the assignments too.
type shedScope struct {
	Topics        []string `json:"topics,omitempty"`
	ExcludeTopics []string `json:"exclude_topics,omitempty"`
	MaxPartitions int      `json:"max_partitions,omitempty"`
	DemoteToEnd   bool     `json:"demote_to_end,omitempty"`
}

func scopeOf(req *events.BrokerOverloaded) shedScope {
	set := func(l []string) []string { return slices.Compact(slices.Sorted(slices.Values(l))) }
	return shedScope{set(req.Topics), set(req.ExcludeTopics), req.MaxPartitions, req.DemoteToEnd}
}

func (s shedScope) whole() bool {
	return len(s.Topics) == 0 && len(s.ExcludeTopics) == 0 && s.MaxPartitions == 0
}

// covers reports whether a shed of scope s answers a request of scope r within the
// cool-down: a shed of all the broker's leadership answers any request (one that asks for
// a demotion only if it demoted too), a narrower shed only the same request. So the shed
// of one topic does not silence the next alert for the whole broker.
func (s shedScope) covers(r shedScope) bool {
	if s.whole() {
		return !r.DemoteToEnd || s.DemoteToEnd
	}
	return slices.Equal(s.Topics, r.Topics) && slices.Equal(s.ExcludeTopics, r.ExcludeTopics) &&
		s.MaxPartitions == r.MaxPartitions && s.DemoteToEnd == r.DemoteToEnd
}

func coolKey(cluster string, broker int32) string { return cluster + "." + strconv.Itoa(int(broker)) }

// shedNow returns the record of broker of cluster if it was shed within the cool-down.
func (c *coolDown) shedNow(ctx context.Context, cluster string, broker int32) (shedRecord, bool, error) {
	kv, err := c.bucket.KeyValue(ctx)
	if err != nil {
		return shedRecord{}, false, err
	}
	return c.record(ctx, kv, cluster, broker, time.Now())
}

// record returns the record of broker of cluster if it was shed within the cool-down
// at now.
func (c *coolDown) record(ctx context.Context, kv jetstream.KeyValue, cluster string, broker int32, now time.Time) (shedRecord, bool, error) {
	e, err := kv.Get(ctx, coolKey(cluster, broker))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return shedRecord{}, false, nil
	}
	if err != nil {
		return shedRecord{}, false, transient(err)
	}
	var r shedRecord
	if json.Unmarshal(e.Value(), &r) != nil || now.Sub(r.At) >= c.ttl {
		return shedRecord{}, false, nil
	}
	return r, true, nil
}

// recent returns the brokers of cluster shed within the cool-down, with their records.
func (c *coolDown) recent(ctx context.Context, kv jetstream.KeyValue, cluster string, now time.Time) (map[int32]shedRecord, error) {
	out := map[int32]shedRecord{}
	lister, err := kv.ListKeysFiltered(ctx, cluster+".*")
	if err != nil {
		return nil, transient(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		id, err := strconv.Atoi(strings.TrimPrefix(k, cluster+"."))
		if err != nil {
			continue
		}
		r, ok, err := c.record(ctx, kv, cluster, int32(id), now)
		if err != nil {
			return nil, err
		}
		if ok {
			out[int32(id)] = r
		}
	}
	return out, nil
}
