// Package pipeline consumes kafkamender events from JetStream and turns every one of them
// into exactly one stored result.
//
// Guarantees, in order of importance:
//   - No event is lost: a message is acknowledged only after its result is stored in the
//     KAFKAMENDER_RESULTS stream. A worker that dies mid-way leaves the message
//     unacknowledged; JetStream redelivers it (AckWait) to a worker that is alive, whose
//     handler re-reads the cluster and finishes or finds nothing left to do.
//   - One result per event id: every final result is stored with a publish that expects
//     no message on its subject yet (Results.Publish), so of several workers (or a worker
//     and another that took over its operation) exactly one stores its result; the others
//     acknowledge the message. The stream, the audit trail, holds one result per id.
//   - No event runs twice: before running, and again under the cluster lock, the result
//     stream is asked for an earlier result of the same event id; if there is one it is
//     published again with Replayed set, as a core NATS message that the results stream
//     refuses (waiters on the result subject hear it, the stream does not store it), and
//     the message acknowledged. Publishers
//     also set the JetStream message id to the event id, so a re-publish inside the
//     stream's duplicate window is not even stored.
//   - Every outcome is deliberate: invalid events get a "rejected" result and are
//     terminated (never retried); expired ones get "expired"; transient failures are
//     negatively acknowledged with a growing delay until MaxAttempts, then "failed";
//     permanent failures get "failed" at once. Long operations keep their message alive
//     with in-progress acknowledgements. A handler may store its result itself
//     (Job.Publish, while it still holds the cluster lock); the pipeline then only
//     acknowledges.
//   - A stopping worker hands its events on: a handler that gives up because the worker
//     stops (a transient error once Run's context is done) gets its message negatively
//     acknowledged with a short delay, never a final result, even on its last attempt.
//
// Order. Each cluster's events have a durable consumer of their own,
// ClusterConsumer(Config.Consumer, cluster), shared by every worker of the fleet, that
// hands out one message at a time (MaxAckPending 1): the next event of the cluster is
// delivered only once the one out is acknowledged or terminated, which the pipeline does
// only after its result is stored. So a cluster's events run one at a time, fleet-wide,
// in the order the stream stored them, while other clusters' events run in parallel. A
// transient failure's delayed negative acknowledgement keeps the event out, and the
// event of a worker that died is redelivered after the ack wait: either way it comes
// before any later event of its cluster. The price is head-of-line blocking: a cluster's
// event retried with growing delays holds up that cluster's later events (at most
// MaxAttempts deliveries), never another cluster's.
//
// Events no consumer takes (a cluster no fleet serves, a malformed subject) are found by
// every worker's sweep and rejected (see strays.go).
//
// Poison messages. A handler that panics does not take the worker down: the panic is
// recovered (the handler's own defers, such as its lock release, have run), logged with
// its stack, the event gets a "failed" result naming the panic, a copy of the message goes
// to the dead-letter stream KAFKAMENDER_DEAD (subject kafkamender.dead.<cluster>, headers
// in package events) and the message is terminated. An event whose workers die while
// handling it (a crash the handler causes, an OOM), or whose operation keeps being left
// in flight, is bounded too, by the pipeline (the consumer itself delivers without a
// limit): a delivery beyond MaxAttempts does not run the handler. It replays the result if
// one was stored meanwhile (its acknowledgement was lost); otherwise the handler rolls
// back what the attempts left, and the event gets a "failed" result, a dead letter, and is
// terminated. Should any of that fail (storage full), the message is delivered again
// later, so every event ends with a result once storage is back. Each of these steps is
// idempotent across workers: results are stored once, and dead letters once (their
// message id is dead-<stream sequence>). Consumers that an earlier version created with a
// delivery limit get none when a worker of this version sets them up.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// DefaultConsumer is the durable consumer shared by all workers.
const DefaultConsumer = "kafkamender-workers"

// Handler handles one event type. It returns the result to publish, or an error: a
// transient one (retry.IsTransient) makes the event be tried again later, a permanent one
// becomes a "failed" result, keeping whatever the returned result already lists as done.
// A returned result with Replayed set (an earlier result found under the lock) is sent
// again on the result subject, not stored. Once the handler stored its result with
// job.Publish, what it returns is only logged.
type Handler interface {
	Handle(ctx context.Context, job *Job) (*events.Result, error)
}

// Config configures a Pipeline.
type Config struct {
	Worker string
	// JetStream, when set, is the JetStream the pipeline creates its streams and consumers
	// through (the worker's gives them nats.replicas); default jetstream.New of the
	// connection.
	JetStream jetstream.JetStream
	Clusters  []string // known cluster names
	// Consumer names the fleet's durable consumers: cluster c's events are taken by the
	// consumer ClusterConsumer(Consumer, c), shared by the workers of a fleet, which hands
	// out one event at a time (see the package doc, "Order"). FilterSubjects are the event
	// subjects the fleet takes; each cluster's consumer takes the part of them about that
	// cluster. Defaults: DefaultConsumer and every event subject. Consumers of the
	// work-queue stream must not overlap.
	Consumer       string
	FilterSubjects []string
	// InactiveThreshold, when set, lets JetStream delete the consumers after they had no
	// worker for that long (tests use it so a crashed test leaves nothing behind). Zero
	// keeps them for ever, as a fleet's should.
	InactiveThreshold time.Duration
	// Concurrency bounds the events this worker handles at once; each cluster has at most
	// one in hand across the fleet anyway. Default: the number of clusters. When lower,
	// the clusters take turns.
	Concurrency int
	// AckWait is how long JetStream waits for an acknowledgement before redelivering;
	// in-progress acknowledgements extend it while a handler runs. Default 30s.
	AckWait time.Duration
	// MaxAttempts bounds the deliveries of an event that run its handler. Default 10. A
	// delivery beyond it gives the event up (see the package doc, "Poison messages"); the
	// consumer itself delivers without a limit, so that giving up is retried until it
	// succeeds.
	MaxAttempts int
	// RetryDelay is how long to wait before the next delivery of an event whose attempt
	// failed transiently (attempt is the failed one). Default retry.Delay.
	RetryDelay func(attempt int) time.Duration
	// ResultsMaxAge is how long results (the audit trail) are kept. Default 90 days.
	ResultsMaxAge time.Duration
	// EventsMaxBytes bounds the events stream (DefaultEventsMaxBytes). When it is full, a
	// publish is refused with an error (DiscardNew): the publisher knows, and no event
	// stored is ever dropped unanswered.
	EventsMaxBytes int64
	// ResultsMaxBytes bounds the results stream (DefaultResultsMaxBytes). When it is full,
	// the oldest results go first (DiscardOld): answered events, whose audit trail ends
	// sooner than ResultsMaxAge.
	ResultsMaxBytes int64
	// StrayGrace is how long an event no consumer takes (its cluster is unknown to every
	// fleet, or its subject malformed) waits before it is rejected, so that a fleet that is
	// just starting can create its consumers first. Default 3s.
	StrayGrace time.Duration
	Logger     *zap.Logger
	// Metrics records events, retries and dead letters; nil records nothing.
	Metrics *metrics.Metrics
	// CanServe, when set, is asked before each fetch for a cluster: while it returns an
	// error this worker takes no events of that cluster (those in hand go on), so that a
	// worker that cannot do that work (it has no ZooKeeper session for the cluster's lock)
	// leaves the events to the workers that can, instead of failing each transiently and
	// using up its deliveries. Other clusters go on.
	CanServe func(cluster string) error
	// Pauses, when set, says which clusters are paused: their events wait (see pause.go).
	Pauses Pauses
	// Cancels, when set, says which events are cancelled: an event held while its cluster
	// is paused is let go to its handler at once when it is (the handler answers it
	// cancelled without running it; see pause.go).
	Cancels Cancels
	// HoldScan is how often the events that wait while their cluster is paused get their
	// progress, and its dry runs their answer. Default 10s.
	HoldScan time.Duration
}

// Size limits of the streams (see Config): what a NATS server gives kafkamender at most.
const (
	// JetStream reserves what a stream may hold from its server's max_file_store: the
	// workers' streams and buckets together reserve about 2 GiB.
	DefaultEventsMaxBytes  = 256 << 20 // 256 MiB: 256 events of the largest size, about 250,000 of the usual
	DefaultResultsMaxBytes = 1 << 30   // 1 GiB
	DeadMaxBytes           = 128 << 20 // 128 MiB
)

// ClusterConsumer is the name of the durable consumer that takes cluster's events for
// the fleet whose consumer name is prefix.
func ClusterConsumer(prefix, cluster string) string { return prefix + "_" + cluster }

func (c *Config) setDefaults() {
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer
	}
	if len(c.FilterSubjects) == 0 {
		c.FilterSubjects = []string{events.EventsSubjects}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = max(1, len(c.Clusters))
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.RetryDelay == nil {
		c.RetryDelay = retry.Delay
	}
	if c.ResultsMaxAge <= 0 {
		c.ResultsMaxAge = 90 * 24 * time.Hour
	}
	if c.EventsMaxBytes <= 0 {
		c.EventsMaxBytes = DefaultEventsMaxBytes
	}
	if c.ResultsMaxBytes <= 0 {
		c.ResultsMaxBytes = DefaultResultsMaxBytes
	}
	if c.HoldScan <= 0 {
		c.HoldScan = holdScan
	}
	if c.StrayGrace <= 0 {
		c.StrayGrace = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Pipeline consumes events and publishes results.
type Pipeline struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	handlers map[string]Handler
	log      *zap.Logger

	mu          sync.Mutex
	cannotServe map[string]bool   // cluster: the last CanServe said no
	pausedNow   map[string]string // cluster: why it is paused, as last seen
	results     *streamResults
	evs         jetstream.Stream
	cons        map[string]jetstream.Consumer // by cluster; nil until set up
	control     map[string]jetstream.Consumer // the clusters' control consumers

	metrics *metrics.Metrics
}

// New builds a pipeline; handlers maps event types to their handler.
func New(nc *nats.Conn, handlers map[string]Handler, cfg Config) (*Pipeline, error) {
	cfg.setDefaults()
	js := cfg.JetStream
	if js == nil {
		var err error
		if js, err = jetstream.New(nc); err != nil {
			return nil, err
		}
	}
	p := &Pipeline{cfg: cfg, nc: nc, js: js, handlers: handlers, log: cfg.Logger.Named("pipeline"), metrics: cfg.Metrics}
	return p, nil
}

// Setup creates the streams (events, results, dead letters) and the durable consumer, or
// updates them to this worker's configuration (the consumer's AckWait and MaxDeliver).
func (p *Pipeline) Setup(ctx context.Context) error {
	evs, err := p.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        events.EventsStream,
		Description: "kafkamender requests, consumed once by a worker (work queue)",
		Subjects:    []string{events.EventsSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  10 * time.Minute,
		MaxMsgSize:  events.DefaultMaxBytes + 64<<10,
		MaxBytes:    p.cfg.EventsMaxBytes,
		Discard:     jetstream.DiscardNew, // full: the publish fails, nothing stored is dropped
		AllowDirect: true,                 // batched reads ahead of an alert storm (absorb.go)
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", events.EventsStream, err)
	}
	res, err := p.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        events.ResultsStream,
		Description: "kafkamender results: the audit trail, one subject per event id",
		Subjects:    []string{events.ResultsSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      p.cfg.ResultsMaxAge,
		MaxBytes:    p.cfg.ResultsMaxBytes,
		Discard:     jetstream.DiscardOld, // full: the oldest answers go first
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	if _, err := p.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        events.DeadStream,
		Description: "kafkamender dead letters: events that got a failed result because their handler panicked or their workers kept stopping",
		Subjects:    []string{events.DeadSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      p.cfg.ResultsMaxAge,
		// Workers that dead-letter the same message store one copy (message id
		// dead-<stream sequence>); they may do so minutes apart.
		Duplicates: min(time.Hour, p.cfg.ResultsMaxAge),
		MaxMsgSize: events.DefaultMaxBytes + 128<<10, // an event and the dead-letter headers
		MaxBytes:   DeadMaxBytes,
		Discard:    jetstream.DiscardOld, // copies of events that have their failed result
	}); err != nil {
		return fmt.Errorf("stream %s: %w", events.DeadStream, err)
	}
	if err := p.retireShared(ctx, evs); err != nil {
		return err
	}
	cons, control := map[string]jetstream.Consumer{}, map[string]jetstream.Consumer{}
	for _, cluster := range p.cfg.Clusters {
		work, ctl := SplitControl(ClusterFilters(p.cfg.FilterSubjects, cluster))
		if len(work) > 0 {
			// First, so that a consumer set up by an earlier version, which took every
			// subject of the cluster, no longer overlaps the control consumer.
			name := ClusterConsumer(p.cfg.Consumer, cluster)
			c, err := p.consumer(ctx, evs, name, "kafkamender: the events of cluster "+cluster+", one at a time, in stream order, for every worker of the fleet", work)
			if err != nil {
				return err
			}
			cons[cluster] = c
		}
		if len(ctl) > 0 {
			name := ControlConsumer(p.cfg.Consumer, cluster)
			c, err := p.consumer(ctx, evs, name, "kafkamender: the control events of cluster "+cluster+" (pause, resume), one at a time, in stream order, ahead of its other events", ctl)
			if err != nil {
				return err
			}
			control[cluster] = c
		}
	}
	p.mu.Lock()
	p.results, p.evs, p.cons, p.control = newStreamResults(p.js, res), evs, cons, control
	p.mu.Unlock()
	return nil
}

// consumer creates or updates a durable consumer of the cluster's events: see the package
// doc, "Order".
func (p *Pipeline) consumer(ctx context.Context, evs jetstream.Stream, name, description string, filters []string) (jetstream.Consumer, error) {
	c, err := evs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:     name,
		Description: description,
		AckPolicy:   jetstream.AckExplicitPolicy,
		AckWait:     p.cfg.AckWait,
		// No limit: the pipeline bounds the attempts itself (giveUp), and an event
		// whose giving up fails (storage full) must come again until it has a result.
		MaxDeliver: -1,
		// One event of the cluster out at a time, fleet-wide: the next is delivered
		// only once this one is acknowledged or terminated (after its result is
		// stored). A delayed negative acknowledgement keeps it out, so a retry, or
		// a redelivery after its worker died, comes before any later event.
		MaxAckPending:     1,
		FilterSubjects:    filters,
		InactiveThreshold: p.cfg.InactiveThreshold,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w%s", name, err, p.overlapping(ctx, evs, name, filters, err))
	}
	return c, nil
}

// retireShared deletes the consumer named Config.Consumer itself: before per-cluster
// order, every worker shared one consumer of that name for all clusters, which would
// overlap the per-cluster consumers. Its unacknowledged events stay in the work-queue
// stream and go to the per-cluster consumers, in stream order.
func (p *Pipeline) retireShared(ctx context.Context, evs jetstream.Stream) error {
	err := evs.DeleteConsumer(ctx, p.cfg.Consumer)
	switch {
	case err == nil:
		p.log.Warn("deleted the fleet's shared consumer of earlier versions; each cluster has its own consumer now",
			zap.String("consumer", p.cfg.Consumer))
		return nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil
	default:
		return fmt.Errorf("retire consumer %s: %w", p.cfg.Consumer, err)
	}
}

// ClusterFilters is the part of the fleet's subject filters that is about cluster: the
// filters the cluster's consumer takes. A filter whose cluster token is a wildcard yields
// the cluster's share of it; one about another cluster yields nothing.
func ClusterFilters(filters []string, cluster string) []string {
	prefix := strings.Split(events.EventsSubjectPrefix, ".")
	var out []string
	for _, f := range filters {
		toks := strings.Split(f, ".")
		if len(toks) <= len(prefix) || !slices.Equal(toks[:len(prefix)], prefix) {
			continue
		}
		var sub string
		switch rest := toks[len(prefix):]; {
		case rest[0] == ">":
			sub = events.EventsSubjectPrefix + "." + cluster + ".>"
		case (rest[0] == "*" || rest[0] == cluster) && len(rest) > 1:
			sub = events.EventsSubjectPrefix + "." + cluster + "." + strings.Join(rest[1:], ".")
		default:
			continue
		}
		if !slices.Contains(out, sub) {
			out = append(out, sub)
		}
	}
	return out
}

// Run sets up (retrying while NATS is unavailable) and handles events until ctx ends, then
// waits for the events in hand: their handlers see ctx cancelled and stop before their
// next write, and the events are left for redelivery (soon, by another worker). It also
// handles events no consumer takes (see the package doc).
func (p *Pipeline) Run(ctx context.Context) error {
	err := retry.Do(ctx, 0, func() error {
		if err := p.Setup(ctx); err != nil {
			p.log.Warn("jetstream setup failed; retrying", zap.Error(err))
			return retry.Transient(err)
		}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	p.mu.Lock()
	cons, control := p.cons, p.control
	p.mu.Unlock()
	p.log.Info("consuming events", zap.String("stream", events.EventsStream), zap.String("consumer", p.cfg.Consumer),
		zap.Strings("clusters", slices.Sorted(maps.Keys(cons))), zap.Int("concurrency", p.cfg.Concurrency))
	var wg sync.WaitGroup
	wg.Go(func() { p.sweepStrays(ctx) })
	slots := make(chan struct{}, p.cfg.Concurrency)
	for cluster, c := range cons {
		wg.Go(func() { p.loop(ctx, cluster, c, slots, false) })
	}
	for cluster, c := range control {
		// Control events take no slot: they are quick, and must not wait for the
		// cluster's (or another cluster's) long operations.
		wg.Go(func() { p.loop(ctx, cluster, c, nil, true) })
	}
	wg.Wait()
	return nil
}

// loop takes the events of one cluster, one at a time, while this worker can serve it
// and has a free slot (slots nil: the control events, which need none). While the cluster
// is paused, the event it takes is held (hold), its slot given back meanwhile; a fetch
// that finds none (another worker holds or runs one) scans the waiting events
// (scanHeld).
func (p *Pipeline) loop(ctx context.Context, cluster string, cons jetstream.Consumer, slots chan struct{}, control bool) {
	if slots == nil {
		slots = make(chan struct{}, 1)
	}
	var lastScan time.Time
	for ctx.Err() == nil {
		// Control events need nothing of the cluster (a pause or a cancel is written to
		// NATS): they are taken while the cluster, or its lock, is down.
		if !control && !p.canServe(cluster) {
			sleep(ctx, canServePoll)
			continue
		}
		sl := &slot{ch: slots}
		if !sl.take(ctx) {
			return
		}
		// The fetch is not cut short when the worker stops: a pull request cancelled on
		// the client may still be served, its message then lost in transit, which counts
		// as a delivery (an attempt) of the event. Left to end (within fetchWait), a
		// message it brings is handed back at once, and recorded as no attempt.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchWait)
		batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			sl.give()
			if ctx.Err() == nil {
				p.log.Debug("fetch", zap.String("cluster", cluster), zap.Error(err))
				sleep(ctx, time.Second)
			}
			continue
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			p.handle(ctx, msg, sl)
		}
		cancel()
		sl.give()
		if n == 0 && !control && time.Since(lastScan) >= p.cfg.HoldScan {
			if why := p.paused(ctx, cluster); why != "" {
				p.scanHeld(ctx, cluster, 0, why)
				lastScan = time.Now()
			}
		}
	}
}

// slot is a loop's share of Config.Concurrency, for the event in hand.
type slot struct {
	ch    chan struct{}
	taken bool
}

// take waits for a free slot; false: ctx ended first.
func (s *slot) take(ctx context.Context) bool {
	if s.taken {
		return true
	}
	select {
	case s.ch <- struct{}{}:
		s.taken = true
		return true
	case <-ctx.Done():
		return false
	}
}

// give gives the slot back, if taken.
func (s *slot) give() {
	if s.taken {
		<-s.ch
		s.taken = false
	}
}

// fetchWait is how long a fetch waits for an event: also how long a stopping worker may
// wait for its fetches to end.
const fetchWait = time.Second

// canServePoll is how often a worker that cannot serve a cluster asks again.
const canServePoll = 250 * time.Millisecond

// canServe asks Config.CanServe about cluster, logging when the answer changes.
func (p *Pipeline) canServe(cluster string) bool {
	var err error
	if p.cfg.CanServe != nil {
		err = p.cfg.CanServe(cluster)
	}
	p.mu.Lock()
	if p.cannotServe == nil {
		p.cannotServe = map[string]bool{}
	}
	changed := (err != nil) != p.cannotServe[cluster]
	p.cannotServe[cluster] = err != nil
	p.mu.Unlock()
	switch {
	case changed && err != nil:
		p.log.Warn("not taking events of this cluster: this worker cannot serve them now; other workers take them",
			zap.String("cluster", cluster), zap.Error(err))
	case changed:
		p.log.Info("taking events of this cluster again", zap.String("cluster", cluster))
	}
	return err == nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Ready reports whether the streams and the consumers are set up.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cons == nil {
		return errors.New("jetstream streams and consumers not set up yet")
	}
	return nil
}

// overlapping explains a refused consumer on the work-queue stream: it names the other
// consumers, whose subjects overlap ours.
func (p *Pipeline) overlapping(ctx context.Context, evs jetstream.Stream, name string, filters []string, err error) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeWQConsumerNotUnique {
		return ""
	}
	var others []string
	infos := evs.ListConsumers(ctx)
	for ci := range infos.Info() {
		if ci.Name == name {
			continue
		}
		others = append(others, fmt.Sprintf("%s %v", ci.Name, consumerFilters(ci.Config)))
	}
	return fmt.Sprintf(" (a work-queue stream gives each subject to one consumer; these consumers take some of %v: %s; delete them or narrow nats.subjects)",
		filters, strings.Join(others, ", "))
}

// consumerFilters lists the subjects a consumer takes.
func consumerFilters(c jetstream.ConsumerConfig) []string {
	subjects := slices.Clone(c.FilterSubjects)
	if c.FilterSubject != "" {
		subjects = append(subjects, c.FilterSubject)
	}
	if len(subjects) == 0 {
		subjects = []string{">"}
	}
	return subjects
}

// errCodeWQConsumerNotUnique is JetStream's "filtered consumer not unique on workqueue
// stream" (nats.go has no constant for it).
const errCodeWQConsumerNotUnique jetstream.ErrorCode = 10100
