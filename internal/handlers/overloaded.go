package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// OverloadedBucket is the JetStream key-value bucket that remembers which brokers were
// shed recently, per cluster (key <cluster>.<broker>), for the cool-down and for steering
// leadership away from brokers that are themselves overloaded.
const OverloadedBucket = "KAFKAMENDER_OVERLOADED"

// BrokerOverloaded handles broker-overloaded events: it moves partition leadership off the
// broker (only the leader's load leaves it; no data moves), balanced across the in-sync
// replicas of the other brokers, with every reorder in one request and one batched
// preferred election.
type BrokerOverloaded struct {
	Clusters map[string]*Cluster
	// JS holds the cool-down records (OverloadedBucket). Required.
	JS      jetstream.JetStream
	Logger  *zap.Logger
	Metrics *Metrics
	// CoolDown: another alert for the same broker within it is a noop naming the event
	// that acted (alerting systems re-send alerts every minute). Default 10m.
	CoolDown time.Duration
	// ElectionBatch caps the partitions of one election request; 0 = all in one.
	ElectionBatch int
	// WaitForReassignment waits (up to BlockedWait) for partitions under reassignment
	// instead of skipping them at once.
	WaitForReassignment bool
	BlockedWait         time.Duration
	ApplyTimeout        time.Duration
	VerifyTimeout       time.Duration

	kvMu sync.Mutex
	kv   jetstream.KeyValue
}

var _ pipeline.Handler = (*BrokerOverloaded)(nil)

func (h *BrokerOverloaded) defaults() {
	if h.CoolDown == 0 {
		h.CoolDown = 10 * time.Minute
	}
	if h.BlockedWait == 0 {
		h.BlockedWait = time.Minute
	}
	if h.ApplyTimeout == 0 {
		h.ApplyTimeout = 2 * time.Minute
	}
	if h.VerifyTimeout == 0 {
		h.VerifyTimeout = 30 * time.Second
	}
	if h.Logger == nil {
		h.Logger = zap.NewNop()
	}
}

// shedRecord is the value of a cool-down key.
type shedRecord struct {
	Event  string    `json:"event"`
	At     time.Time `json:"at"`
	Worker string    `json:"worker"`
}

func (h *BrokerOverloaded) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	h.kvMu.Lock()
	defer h.kvMu.Unlock()
	if h.kv != nil {
		return h.kv, nil
	}
	kv, err := h.JS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      OverloadedBucket,
		Description: "brokers shed recently, per cluster: cool-down of broker-overloaded alerts",
		TTL:         h.CoolDown,
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, retry.Transient(fmt.Errorf("key-value bucket %s: %w", OverloadedBucket, err))
	}
	h.kv = kv
	return kv, nil
}

func coolKey(cluster string, broker int32) string { return cluster + "." + strconv.Itoa(int(broker)) }

// recent returns the brokers of cluster shed within the cool-down, with their records.
func (h *BrokerOverloaded) recent(ctx context.Context, kv jetstream.KeyValue, cluster string, now time.Time) (map[int32]shedRecord, error) {
	out := map[int32]shedRecord{}
	lister, err := kv.ListKeysFiltered(ctx, cluster+".*")
	if err != nil {
		return nil, retry.Transient(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, retry.Transient(err)
		}
		var r shedRecord
		if json.Unmarshal(e.Value(), &r) != nil || now.Sub(r.At) >= h.CoolDown {
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(k, cluster+"."))
		if err == nil {
			out[int32(id)] = r
		}
	}
	return out, nil
}

// Handle implements pipeline.Handler.
func (h *BrokerOverloaded) Handle(ctx context.Context, job *pipeline.Job) (*events.Result, error) {
	h.defaults()
	ev := job.Event
	req := ev.Payload.(*events.BrokerOverloaded)
	res := &events.Result{ID: ev.ID, Type: ev.Type, Cluster: ev.Cluster, Reason: req.Reason}
	defer func() { h.Metrics.observe(res) }()
	log := h.Logger.With(zap.String("id", ev.ID), zap.String("cluster", ev.Cluster), zap.Int32("broker", *req.Broker))
	c, ok := h.Clusters[ev.Cluster]
	if !ok {
		return asResult(res, reject("unknown cluster %q", ev.Cluster))
	}
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return res, retry.Transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	strategy, err := kafka.Choose(c.Strategy, caps, c.ZK != nil)
	if err != nil {
		return asResult(res, reject("cluster %s: %v", c.Name, err))
	}
	res.Strategy = string(strategy)
	kv, err := h.bucket(ctx)
	if err != nil {
		return res, err
	}
	shedReq := plan.ShedRequest{Broker: *req.Broker, Topics: req.Topics, ExcludeTopics: req.ExcludeTopics,
		MaxPartitions: req.MaxPartitions, DemoteToEnd: req.DemoteToEnd, WaitBlocked: h.WaitForReassignment}

	planOnce := func(ctx context.Context) (*kafka.Snapshot, plan.Plan, error) {
		recent, err := h.recent(ctx, kv, c.Name, time.Now())
		if err != nil {
			return nil, plan.Plan{}, err
		}
		shedReq.Avoid = shedReq.Avoid[:0]
		for b := range recent {
			if b != *req.Broker {
				shedReq.Avoid = append(shedReq.Avoid, b)
			}
		}
		snap, err := kafka.ReadSnapshot(ctx, c.Client) // every topic: balance is cluster-wide
		if err != nil {
			return nil, plan.Plan{}, retry.Transient(err)
		}
		p, err := plan.Shed(snap, shedReq)
		return snap, p, err
	}

	lctx, release, done, err := begin(ctx, c, job, res, req.DryRun, planOnce, log)
	if done {
		return res, err
	}
	defer release()
	ctx = lctx

	// Alert storms: the same broker shed within the cool-down is a noop naming the event.
	recent, err := h.recent(ctx, kv, c.Name, res.StartedAt)
	if err != nil {
		return res, err
	}
	if prev, ok := recent[*req.Broker]; ok {
		res.Status, res.PreviousEvent = events.StatusNoop, prev.Event
		res.Note = fmt.Sprintf("broker %d was shed by event %s at %s (worker %s); cool-down %s: not shedding again",
			*req.Broker, prev.Event, prev.At.Format(time.RFC3339), prev.Worker, h.CoolDown)
		log.Info("alert within the cool-down", zap.String("previous_event", prev.Event))
		return res, nil
	}

	snap, p, err := planUntilUnblocked(ctx, h.BlockedWait, planOnce, log)
	if err != nil {
		return asResult(res, err)
	}
	res.Noop = p.Noop
	res.Skipped = append(p.Skipped, blockedSkips(snap, p.Blocked, h.BlockedWait)...)
	if len(p.Changes) == 0 {
		if len(res.Skipped) == 0 {
			res.Note = fmt.Sprintf("broker %d leads no partition here (and heads no assignment)", *req.Broker)
		}
		return finish(res, 0), nil
	}
	be, err := backend(ctx, c, strategy, caps)
	if err != nil {
		return res, err
	}
	verified, err := execute(ctx, be, c, p, res, execOptions{apply: h.ApplyTimeout, verify: h.VerifyTimeout, batch: h.ElectionBatch}, log)
	if err != nil {
		return res, err
	}
	finish(res, verified)
	if verified > 0 {
		rec, _ := json.Marshal(shedRecord{Event: ev.ID, At: time.Now().UTC(), Worker: job.Worker})
		if _, err := kv.Put(context.WithoutCancel(ctx), coolKey(c.Name, *req.Broker), rec); err != nil {
			log.Warn("record the cool-down", zap.Error(err))
		}
	}
	return res, nil
}
