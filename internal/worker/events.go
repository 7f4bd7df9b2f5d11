package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/cancel"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/pause"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// newPipeline builds the event pipeline and its handlers on the connected clients. A
// cluster with its own ZooKeeper keeps its lock there (same ensemble as its metadata, so
// the backends' ZooKeeper writes are fenced by the lock); the others use the lock
// ZooKeeper, or the NATS key-value lock (lock backend nats).
func (w *Worker) newPipeline(ctx context.Context, c *clients) (*pipeline.Pipeline, error) {
	cfg := w.cfg
	// Every stream and bucket the worker creates gets nats.replicas; /readyz lists those
	// found with fewer.
	js, err := natsjs.New(c.nats.conn, cfg.NATS.Replicas, w.logger.Named("nats"))
	if err != nil {
		return nil, err
	}
	w.health.setAssets(js.Shortfalls)
	kvLocker, err := locks.NewKV(js, locks.KVConfig{Bucket: cfg.Lock.NATS.Bucket, Worker: cfg.Worker.ID, TTL: cfg.Lock.NATS.TTL,
		Wait: cfg.Lock.AcquireTimeout, Logger: w.logger.Named("locks")})
	if err != nil {
		return nil, err
	}
	if err := kvAgreedAtStart(ctx, cfg, kvLocker, c.nats.conn.IsConnected()); err != nil {
		return nil, err
	}
	records := lockBackends(js)
	clusters := map[string]*handlers.Cluster{}
	lockSessions := map[string]*locks.Session{} // cluster: the ZooKeeper session its lock needs
	for _, kc := range c.clusters {
		hc := &handlers.Cluster{Name: kc.cfg.Name, Client: kc.client, Strategy: kafka.Strategy(kc.cfg.Strategy),
			Capacity: maps.Clone(kc.cfg.CapacityBytes)}
		if t := kc.cfg.CapacityThreshold; t != nil {
			hc.CapacityThreshold = *t
		}
		var sess *locks.Session
		if c.lockZK != nil {
			sess = c.lockZK.sess
		}
		if kc.zk != nil {
			sess, hc.ZK, hc.Chroot = kc.zk.sess, kc.zk.sess, kc.zk.chroot
		}
		agreed := &agreedBackend{records: records, cluster: kc.cfg.Name, location: lockLocation(cfg, kc.cfg.Name)}
		hc.Locker = agreed
		clusters[hc.Name] = hc
		if c.nats.conn.IsConnected() { // else the first lock of the cluster checks
			if err := agreedAtStart(ctx, agreed); err != nil {
				return nil, err
			}
		}
		if cfg.LockBackend(kc.cfg.Name) == config.LockNATS {
			agreed.Backend = kvLocker
			continue
		}
		lcfg := locks.Config{
			Root:   cfg.Lock.Root,
			Worker: cfg.Worker.ID,
			Wait:   cfg.Lock.AcquireTimeout,
			Logger: w.logger.Named("locks"), // its lines name the cluster themselves
		}
		if auth := lockAuth(cfg); auth != nil {
			lcfg.ACL = auth[0].ACL() // the fleet's identity alone changes the locks
		}
		lk, err := locks.New(sess, lcfg)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: lock: %w", kc.cfg.Name, err)
		}
		agreed.Backend = locks.ZK(lk)
		lockSessions[kc.cfg.Name] = sess
	}
	h, err := handlers.New(handlers.Config{
		Clusters:         clusters,
		JS:               js,
		Logger:           w.logger.Named("handlers"),
		Metrics:          w.metrics,
		RF:               cfg.ReplicationFactor,
		LogDir:           cfg.LogDir,
		Overloaded:       cfg.BrokerOverloaded,
		PartitionOffline: cfg.PartitionOffline,
		Guardrails:       cfg.Guardrails,
	})
	if err != nil {
		return nil, err
	}
	w.survey = h
	cancels := cancel.New(js)
	eng, err := h.Engine(operation.Config{
		Cancels:  cancels,
		Approval: cfg.Approval,
		Plans:    approval.NewStore(js),
		Journal:  journal.New(js),
		Results:  pipeline.ResultsOn(js),
		Logger:   w.logger.Named("operation"),
		Metrics:  w.metrics,
		Hook:     pauseHook(w.logger, ctx.Done()),
	})
	if err != nil {
		return nil, err
	}
	w.engine = eng
	hs := map[string]pipeline.Handler{}
	for _, typ := range h.Types() {
		hs[typ] = eng
	}
	pauses := pause.New(js)
	ph := &pause.Handler{Store: pauses, Guard: h, Logger: w.logger.Named("pause")}
	hs[events.TypeClusterPause], hs[events.TypeClusterResume] = ph, ph
	hs[events.TypeOperationCancel] = &cancel.Handler{Store: cancels, Results: pipeline.ResultsOn(js), Guard: h, Logger: w.logger.Named("cancel")}
	return pipeline.New(c.nats.conn, hs, pipeline.Config{
		Worker:          cfg.Worker.ID,
		JetStream:       js,
		Clusters:        cfg.ClusterNames(),
		Consumer:        cfg.NATS.Consumer,
		FilterSubjects:  cfg.NATS.Subjects,
		AckWait:         cfg.NATS.AckWait,
		MaxAttempts:     cfg.NATS.MaxAttempts,
		EventsMaxBytes:  cfg.NATS.EventsMaxBytes,
		ResultsMaxBytes: cfg.NATS.ResultsMaxBytes,
		CanServe:        w.canServe(lockSessions),
		Pauses:          pauses,
		Cancels:         cancels,
		Logger:          w.logger,
		Metrics:         w.metrics,
	})
}

// pipelineProbe reports whether the streams and consumer are set up.
func pipelineProbe(p *pipeline.Pipeline) probeFunc {
	return func(context.Context) (string, error) {
		if err := p.Ready(); err != nil {
			return "", err
		}
		return "consuming " + events.EventsStream, nil
	}
}

// agreedAtStart compares the worker's lock location for a cluster with the fleet's record
// at start-up: a mismatch stops the worker; NATS being unreachable leaves the check to
// the first lock of the cluster.
func agreedAtStart(ctx context.Context, a *agreedBackend) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.check(cctx); err != nil && errors.Is(err, errLockMismatch) {
		return err
	}
	return nil
}

// kvAgreedAtStart checks, when a cluster keeps its lock in NATS and NATS answers, that the
// lock bucket expires entries after this worker's lock.nats.ttl: a worker that disagrees
// with the fleet stops at once rather than take no lock later.
func kvAgreedAtStart(ctx context.Context, cfg *config.Config, l *locks.KVLocker, connected bool) error {
	uses := false
	for _, name := range cfg.ClusterNames() {
		uses = uses || cfg.LockBackend(name) == config.LockNATS
	}
	if !uses || !connected {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var mismatch *locks.TTLMismatchError
	if err := l.Check(cctx); errors.As(err, &mismatch) {
		return err
	}
	return nil
}

// canServe is the pipeline's CanServe. A worker without a session on the ZooKeeper that
// holds a cluster's lock could take no lock, and one whose last probe found none of the
// cluster's brokers could change nothing: each event of the cluster it took would fail
// and use up a delivery, so it leaves them in the stream (to the workers that can, or
// until it can again). Other clusters (a lock in NATS, brokers up) go on.
func (w *Worker) canServe(sessions map[string]*locks.Session) func(cluster string) error {
	return func(cluster string) error {
		if s := sessions[cluster]; s != nil {
			if _, err := s.Current(); err != nil {
				return fmt.Errorf("cannot take the lock of cluster %s: %w", cluster, err)
			}
		}
		return w.health.down(kindKafka, cluster)
	}
}

// PauseEnv names the environment variable of fault tests: a comma-separated list of
// operation steps (operation.Step*) at which the worker stops until it is told to stop
// (SIGTERM), so that a test can kill it there (kill -9) or stop it there at a known point.
// Unset in production.
const PauseEnv = "KAFKAMENDER_PAUSE_AT"

// pauseHook returns the handlers' step hook from PauseEnv, or nil.
func pauseHook(logger *zap.Logger, stopping <-chan struct{}) func(step string) {
	list := os.Getenv(PauseEnv)
	if list == "" {
		return nil
	}
	steps := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		steps[strings.TrimSpace(s)] = true
	}
	logger.Warn("fault-test pauses are on: the worker stops for ever at these steps", zap.String(PauseEnv, list))
	return func(step string) {
		if !steps[step] {
			return
		}
		logger.Warn("paused for a fault test", zap.String("step", step))
		_ = logger.Sync()
		// The marker a test waits for, on stderr whatever the log format.
		fmt.Fprintf(os.Stderr, "KAFKAMENDER-PAUSED %s\n", step)
		<-stopping
	}
}
