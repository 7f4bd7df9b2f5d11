// Package pipeline consumes kafkamender events from JetStream and turns every one of them
// into exactly one published result.
//
// Guarantees, in order of importance:
//   - No event is lost: a message is acknowledged only after its result is stored in the
//     KAFKAMENDER_RESULTS stream. A worker that dies mid-way leaves the message
//     unacknowledged; JetStream redelivers it (AckWait) to a worker that is alive, whose
//     handler re-reads the cluster and finishes or finds nothing left to do.
//   - No event runs twice: before running, and again under the cluster lock, the result
//     stream is asked for an earlier result of the same event id; if there is one it is
//     published again (replayed) and the message acknowledged. Publishers also set the
//     JetStream message id to the event id, so a re-publish inside the stream's duplicate
//     window is not even stored.
//   - Every outcome is deliberate: invalid events get a "rejected" result and are
//     terminated (never retried); expired ones get "expired"; transient failures are
//     negatively acknowledged with a growing delay until MaxAttempts, then "failed";
//     permanent failures get "failed" at once. Long operations keep their message alive
//     with in-progress acknowledgements.
package pipeline

import (
	"context"
	"encoding/json"
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

// Job is one delivery of an event to a handler.
type Job struct {
	Event   *events.Event
	Attempt int
	Worker  string
	Started time.Time
	p       *Pipeline
	msg     jetstream.Msg
}

// Earlier returns the result already published for this event id, if any. Handlers call
// it again once they hold the cluster lock: another worker may have finished the same
// event while this one waited.
func (j *Job) Earlier(ctx context.Context) (*events.Result, bool, error) {
	return j.p.earlier(ctx, j.Event.ID)
}

// Progress publishes a progress report on kafkamender.progress.<id> (best effort) and
// tells JetStream the message is still being worked on.
func (j *Job) Progress(v any) {
	_ = j.msg.InProgress()
	raw, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = j.p.nc.Publish(events.ProgressSubject(j.Event.ID), raw)
}

// Handler handles one event type. It returns the result to publish, or an error: a
// transient one (retry.IsTransient) makes the event be tried again later, a permanent one
// becomes a "failed" result, keeping whatever the returned result already lists as done.
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
	MaxAttempts int
	// ResultsMaxAge is how long results (the audit trail) are kept. Default 90 days.
	ResultsMaxAge time.Duration
	Logger        *zap.Logger
	Registerer    prometheus.Registerer
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

	mu      sync.Mutex
	results jetstream.Stream
	cons    jetstream.Consumer

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

// Setup creates the streams and the durable consumer, or checks that they exist with a
// compatible configuration.
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
	cons, err := evs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:           p.cfg.Consumer,
		Description:       "shared by every kafkamender worker",
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           p.cfg.AckWait,
		MaxAckPending:     1000,
		FilterSubjects:    p.cfg.FilterSubjects,
		InactiveThreshold: p.cfg.InactiveThreshold,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w%s", p.cfg.Consumer, err, p.overlapping(ctx, evs, err))
	}
	p.mu.Lock()
	p.results, p.cons = res, cons
	p.mu.Unlock()
	return nil
}

// Run sets up (retrying while NATS is unavailable) and handles events until ctx ends, then
// waits for the events in hand: their handlers see ctx cancelled and stop before their
// next write, and the events are left for redelivery.
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
	p.log.Info("consuming events", zap.String("stream", events.EventsStream), zap.String("consumer", p.cfg.Consumer),
		zap.Int("concurrency", p.cfg.Concurrency))
	var wg sync.WaitGroup
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
