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
// Poison messages. A handler that panics does not take the worker down: the panic is
// recovered (the handler's own defers, such as its lock release, have run), logged with
// its stack, the event gets a "failed" result naming the panic, a copy of the message goes
// to the dead-letter stream KAFKAMENDER_DEAD (subject kafkamender.dead.<cluster>, headers
// in package events) and the message is terminated. An event whose workers die while
// handling it (a crash the handler causes, an OOM) is bounded too: the consumer delivers
// a message at most MaxAttempts+1 times, and a delivery beyond MaxAttempts (possible only
// when earlier ones ended without a result: their workers stopped, or could not store it)
// does not run the handler: it gets a "failed" result, a dead letter and is terminated. If even that delivery is lost,
// JetStream's max-deliveries advisory, which every pipeline listens to, has any worker
// do the same from the stream, and delete the message, which a work-queue stream would
// otherwise keep for ever. Each of these steps is idempotent across workers: results are
// stored once, and dead letters once (their message id is dead-<stream sequence>).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
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
	Worker   string
	Clusters []string // known cluster names
	// Consumer is the durable consumer shared by the workers of a fleet, and
	// FilterSubjects the event subjects it takes. Defaults: DefaultConsumer and every
	// event subject. Consumers of the work-queue stream must not overlap.
	Consumer       string
	FilterSubjects []string
	// InactiveThreshold, when set, lets JetStream delete the consumer after it had no
	// worker for that long (tests use it so a crashed test leaves nothing behind). Zero
	// keeps the consumer for ever, as a fleet's should.
	InactiveThreshold time.Duration
	Concurrency       int // events handled at once by this worker; default 4
	// AckWait is how long JetStream waits for an acknowledgement before redelivering;
	// in-progress acknowledgements extend it while a handler runs. Default 30s.
	AckWait time.Duration
	// MaxAttempts bounds deliveries of an event that keeps failing transiently. Default 10.
	// The consumer delivers a message at most MaxAttempts+1 times: the last delivery only
	// records that the workers handling the event stopped each time.
	MaxAttempts int
	// RetryDelay is how long to wait before the next delivery of an event whose attempt
	// failed transiently (attempt is the failed one). Default retry.Delay.
	RetryDelay func(attempt int) time.Duration
	// ResultsMaxAge is how long results (the audit trail) are kept. Default 90 days.
	ResultsMaxAge time.Duration
	Logger        *zap.Logger
	Registerer    prometheus.Registerer
	// CanServe, when set, is asked before each fetch: while it returns an error this worker
	// takes no events (those in hand go on), so that a worker that cannot do its work (it
	// has no ZooKeeper session for its locks) leaves the events to the workers that can,
	// instead of failing each transiently and using up its deliveries.
	CanServe func() error
}

func (c *Config) setDefaults() {
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer
	}
	if len(c.FilterSubjects) == 0 {
		c.FilterSubjects = []string{events.EventsSubjects}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
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
	cannotServe bool // the last CanServe said no
	results     *streamResults
	evs         jetstream.Stream
	cons        jetstream.Consumer

	events   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// New builds a pipeline; handlers maps event types to their handler.
func New(nc *nats.Conn, handlers map[string]Handler, cfg Config) (*Pipeline, error) {
	cfg.setDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{cfg: cfg, nc: nc, js: js, handlers: handlers, log: cfg.Logger.Named("pipeline"),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamender_events_total", Help: "Events handled, by type and result status.",
		}, []string{"type", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kafkamender_event_duration_seconds", Help: "Time from the start of handling to the result, by type.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"type"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{p.events, p.duration} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
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
	}); err != nil {
		return fmt.Errorf("stream %s: %w", events.DeadStream, err)
	}
	cons, err := evs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:           p.cfg.Consumer,
		Description:       "shared by every kafkamender worker",
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           p.cfg.AckWait,
		MaxDeliver:        p.cfg.MaxAttempts + 1,
		MaxAckPending:     1000,
		FilterSubjects:    p.cfg.FilterSubjects,
		InactiveThreshold: p.cfg.InactiveThreshold,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w%s", p.cfg.Consumer, err, p.overlapping(ctx, evs, err))
	}
	p.mu.Lock()
	p.results, p.evs, p.cons = &streamResults{js: p.js, stream: res}, evs, cons
	p.mu.Unlock()
	return nil
}

// Run sets up (retrying while NATS is unavailable) and handles events until ctx ends, then
// waits for the events in hand: their handlers see ctx cancelled and stop before their
// next write, and the events are left for redelivery (soon, by another worker). It also
// handles the consumer's max-deliveries advisories (see the package doc).
func (p *Pipeline) Run(ctx context.Context) error {
	// Subscribed before Setup, so that once Ready the server has the subscription (it
	// handles a connection's requests in order); advisories wait in the channel meanwhile.
	advisories := make(chan *nats.Msg, 64)
	sub, err := p.nc.ChanSubscribe(p.maxDeliveriesSubject(), advisories)
	if err != nil {
		return fmt.Errorf("subscribe to max-deliveries advisories: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	err = retry.Do(ctx, 0, func() error {
		if err := p.Setup(ctx); err != nil {
			p.log.Warn("jetstream setup failed; retrying", zap.Error(err))
			return retry.Transient(err)
		}
		return nil
	}, nil)
	if err != nil {
		return err
	}
	p.log.Info("consuming events", zap.String("stream", events.EventsStream), zap.String("consumer", p.cfg.Consumer),
		zap.Int("concurrency", p.cfg.Concurrency))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-advisories:
				p.maxDeliveries(ctx, m.Data)
			}
		}
	}()
	for range p.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (p *Pipeline) loop(ctx context.Context) {
	for ctx.Err() == nil {
		if !p.canServe() {
			sleep(ctx, canServePoll)
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := p.cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() == nil {
				p.log.Debug("fetch", zap.Error(err))
				sleep(ctx, time.Second)
			}
			continue
		}
		for msg := range batch.Messages() {
			p.handle(ctx, msg)
		}
		cancel()
	}
}

// canServePoll is how often a worker that cannot serve asks again.
const canServePoll = 250 * time.Millisecond

// canServe asks Config.CanServe, logging when the answer changes.
func (p *Pipeline) canServe() bool {
	var err error
	if p.cfg.CanServe != nil {
		err = p.cfg.CanServe()
	}
	p.mu.Lock()
	changed := (err != nil) != p.cannotServe
	p.cannotServe = err != nil
	p.mu.Unlock()
	switch {
	case changed && err != nil:
		p.log.Warn("not taking events: this worker cannot serve them now; other workers take them", zap.Error(err))
	case changed:
		p.log.Info("taking events again")
	}
	return err == nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Ready reports whether the streams and the consumer are set up.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cons == nil {
		return errors.New("jetstream streams and consumer not set up yet")
	}
	return nil
}

// overlapping explains a refused consumer on the work-queue stream: it names the other
// consumers, whose subjects overlap ours.
func (p *Pipeline) overlapping(ctx context.Context, evs jetstream.Stream, err error) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeWQConsumerNotUnique {
		return ""
	}
	var others []string
	infos := evs.ListConsumers(ctx)
	for ci := range infos.Info() {
		if ci.Name == p.cfg.Consumer {
			continue
		}
		subjects := ci.Config.FilterSubjects
		if ci.Config.FilterSubject != "" {
			subjects = append(subjects, ci.Config.FilterSubject)
		}
		others = append(others, fmt.Sprintf("%s %v", ci.Name, subjects))
	}
	return fmt.Sprintf(" (a work-queue stream gives each subject to one consumer; these consumers take some of %v: %s; delete them or narrow nats.subjects)",
		p.cfg.FilterSubjects, strings.Join(others, ", "))
}

// errCodeWQConsumerNotUnique is JetStream's "filtered consumer not unique on workqueue
// stream" (nats.go has no constant for it).
const errCodeWQConsumerNotUnique jetstream.ErrorCode = 10100
