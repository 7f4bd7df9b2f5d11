package worker

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// newPipeline builds the event pipeline and its handlers on the connected clients. A
// cluster with its own ZooKeeper keeps its lock there (same ensemble as its metadata, so
// the backends' ZooKeeper writes are fenced by the lock); the others use the lock
// ZooKeeper.
func (w *Worker) newPipeline(c *clients) (*pipeline.Pipeline, error) {
	cfg := w.cfg
	clusters := map[string]*handlers.Cluster{}
	for _, kc := range c.clusters {
		sess := c.lockZK.sess
		hc := &handlers.Cluster{Name: kc.cfg.Name, Client: kc.client, Strategy: kafka.Strategy(kc.cfg.Strategy)}
		if kc.zk != nil {
			sess, hc.ZK, hc.Chroot = kc.zk.sess, kc.zk.sess, kc.zk.chroot
		}
		lk, err := locks.New(sess, locks.Config{
			Root:   cfg.Lock.Root,
			Worker: cfg.Worker.ID,
			Wait:   cfg.Lock.AcquireTimeout,
			Logger: w.logger.Named("locks").With(zap.String("cluster", kc.cfg.Name)),
		})
		if err != nil {
			return nil, fmt.Errorf("cluster %s: lock: %w", kc.cfg.Name, err)
		}
		hc.Locker = lk
		clusters[hc.Name] = hc
	}
	metrics, err := handlers.NewMetrics(w.registry)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.nats.conn)
	if err != nil {
		return nil, err
	}
	bo, rf := cfg.BrokerOverloaded, cfg.ReplicationFactor
	hs := map[string]pipeline.Handler{
		events.TypeReplicaChangeRequested: &handlers.ReplicaChange{Clusters: clusters, Logger: w.logger.Named("replica-change"), Metrics: metrics,
			RF: handlers.RFOptions{Throttle: rf.ThrottleBytesPerSec, Timeout: rf.Timeout, MaxMovesPerBroker: rf.MaxMovesPerBroker,
				ForeignWait: rf.ForeignWait, AllowInternal: rf.AllowInternal}},
		events.TypeBrokerOverloaded: &handlers.BrokerOverloaded{Clusters: clusters, JS: js, Logger: w.logger.Named("broker-overloaded"), Metrics: metrics,
			CoolDown: bo.CoolDown, ElectionBatch: bo.ElectionBatchSize, WaitForReassignment: bo.WaitForReassignment},
	}
	return pipeline.New(c.nats.conn, hs, pipeline.Config{
		Worker:         cfg.Worker.ID,
		Clusters:       cfg.ClusterNames(),
		Consumer:       cfg.NATS.Consumer,
		FilterSubjects: cfg.NATS.Subjects,
		Logger:         w.logger,
		Registerer:     w.registry,
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
