package main

// kafkamender's worker, run in this process from deployments/local/worker.yaml, its Kafka
// clients' per-request debug lines recorded (franz-go logs "wrote <Kind> vN" after writing
// a request and "read <Kind> vN" after reading its response): the timestamps of the
// worker's own overhead, with nothing added to the product.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/worker"
)

// recorder keeps the Kafka requests the worker made.
type recorder struct {
	mu    sync.Mutex
	calls []kafkaCall
}

func (r *recorder) add(c kafkaCall) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// since returns the calls recorded at or after t.
func (r *recorder) since(t time.Time) []kafkaCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kafkaCall
	for _, c := range r.calls {
		if !c.at.Before(t) {
			out = append(out, c)
		}
	}
	return out
}

// reset forgets every call recorded so far (between events, to keep memory flat).
func (r *recorder) reset() {
	r.mu.Lock()
	r.calls = nil
	r.mu.Unlock()
}

// captureCore records the Kafka clients' per-request debug lines (logger "kafka", its
// "cluster" field) and hands every other entry to next.
type captureCore struct {
	rec     *recorder
	cluster string
	next    zapcore.Core
}

func (c *captureCore) Enabled(zapcore.Level) bool { return true }

func (c *captureCore) With(fs []zapcore.Field) zapcore.Core {
	cluster := c.cluster
	for _, f := range fs {
		if f.Key == "cluster" && f.Type == zapcore.StringType {
			cluster = f.String
		}
	}
	return &captureCore{rec: c.rec, cluster: cluster, next: c.next.With(fs)}
}

func (c *captureCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level == zapcore.DebugLevel && e.LoggerName == "kafka" {
		if kind, write, ok := parseKafkaLog(e.Message); ok {
			c.rec.add(kafkaCall{at: e.Time, cluster: c.cluster, write: write, kind: kind})
		}
		return ce
	}
	if e.Level == zapcore.DebugLevel && e.LoggerName == "operation" && strings.HasPrefix(e.Message, "phase: ") {
		// The engine's phases (lock taken, journal read, planned, …): not Kafka requests,
		// marked as such for the trace and the overhead (kafkaCall.phase).
		c.rec.add(kafkaCall{at: e.Time, cluster: c.cluster, kind: strings.TrimPrefix(e.Message, "phase: "), phase: true})
		return ce
	}
	return c.next.Check(e, ce)
}

func (c *captureCore) Write(zapcore.Entry, []zapcore.Field) error { return nil }
func (c *captureCore) Sync() error                                { return c.next.Sync() }

// benchWorker is the worker running in this process.
type benchWorker struct {
	rec  *recorder
	stop context.CancelFunc
	done chan error
	log  string
	addr string // its HTTP listener, which also serves the Alertmanager webhook
}

// startWorker runs a worker with the stack's configuration (its HTTP listener on a free
// port, serving the Alertmanager webhook too as worker.yaml has it, its id
// "bench-<pid>", its default replication throttle the bench's -throttle: copies from an
// alert, which names none, run at the same throttle as the events the bench sends), its
// log at info level in dir/worker.log, and waits until it is ready.
func startWorker(ctx context.Context, root, dir string, throttle int64) (*benchWorker, error) {
	cfg, err := config.Load(filepath.Join(root, "deployments", "local", "worker.yaml"))
	if err != nil {
		return nil, err
	}
	cfg.HTTP.Listen = "127.0.0.1:0"
	if cfg.Alertmanager.Listen != "" {
		cfg.Alertmanager.Listen = "127.0.0.1:0"
	}
	cfg.ReplicationFactor.ThrottleBytesPerSec = throttle
	cfg.Worker.ID = fmt.Sprintf("bench-%d", os.Getpid())
	logPath := filepath.Join(dir, "worker.log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	file := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(f), zapcore.InfoLevel)
	rec := &recorder{}
	logger := zap.New(&captureCore{rec: rec, next: file})
	w, err := worker.New(cfg, logger, prometheus.NewRegistry())
	if err != nil {
		f.Close()
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	bw := &benchWorker{rec: rec, stop: stop, done: make(chan error, 1), log: logPath}
	go func() {
		err := w.Run(wctx)
		_ = logger.Sync()
		f.Close()
		bw.done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if addr := w.Addr(); addr != "" {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					bw.addr = addr
					if wa := w.WebhookAddr(); wa != "" {
						bw.addr = wa
					}
					return bw, nil
				}
			}
		}
		select {
		case err := <-bw.done:
			return nil, fmt.Errorf("the worker stopped before it was ready (log %s): %v", logPath, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			bw.close()
			return nil, fmt.Errorf("the worker not ready within a minute (log %s)", logPath)
		}
	}
}

// close stops the worker and waits for it.
func (w *benchWorker) close() error {
	w.stop()
	err := <-w.done
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
