package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/console"
	"github.com/kafkamender/kafkamender/internal/handlers"
	"github.com/kafkamender/kafkamender/internal/metrics"
	"github.com/kafkamender/kafkamender/internal/operation"
	"github.com/kafkamender/kafkamender/internal/version"
)

// Timings of the prober and of shutdown.
const (
	probeInterval   = 10 * time.Second
	probeTimeout    = 5 * time.Second
	shutdownTimeout = 10 * time.Second
)

// lockZKName is the name label of the lock ZooKeeper; '@' cannot occur in a
// cluster name, so it never clashes with a cluster's ZooKeeper.
const lockZKName = "@lock"

// Worker is one kafkamender worker process.
type Worker struct {
	cfg      *config.Config
	logger   *zap.Logger
	registry *prometheus.Registry
	version  string
	health   *health
	metrics  *metrics.Metrics
	engine   *operation.Engine // set by newPipeline, before Run starts the sweep of plans
	survey   console.Surveyor  // set by newPipeline: the console checks plans with it

	probeInterval   time.Duration
	probeTimeout    time.Duration
	shutdownTimeout time.Duration

	started     atomic.Bool
	addr        atomic.Pointer[string]
	webhookAddr atomic.Pointer[string] // the webhook's own listener, when it has one
	consoleAddr atomic.Pointer[string] // the console's own listener, when it has one
}

// New builds a worker. It validates cfg, which must come from config.Load or
// config.Parse (they apply the defaults), and registers the worker's metrics
// on registry, which /metrics then serves; it does no I/O.
func New(cfg *config.Config, logger *zap.Logger, registry *prometheus.Registry) (*Worker, error) {
	if cfg == nil || logger == nil || registry == nil {
		return nil, errors.New("new worker: config, logger and registry are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	version := version.String()
	m, err := metrics.New(registry, metrics.Options{Clusters: cfg.ClusterNames(), SkipReasons: handlers.SkipCodes(), Version: version})
	if err != nil {
		return nil, fmt.Errorf("new worker: register metrics: %w", err)
	}
	h := newHealth(cfg.Worker.ID, logger, m)
	return &Worker{
		cfg:             cfg,
		logger:          logger,
		registry:        registry,
		version:         version,
		health:          h,
		metrics:         m,
		probeInterval:   probeInterval,
		probeTimeout:    probeTimeout,
		shutdownTimeout: shutdownTimeout,
	}, nil
}

// Addr returns the address the HTTP server listens on, or "" before Run has
// bound it. With http.listen set to port 0 it tells which port was picked.
func (w *Worker) Addr() string {
	if a := w.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// Run connects, serves and probes until ctx is cancelled, then shuts down
// and returns nil. It returns an error when it cannot start (the HTTP
// address is unusable, a client cannot be built) or when the HTTP server
// fails. A Worker runs once.
func (w *Worker) Run(ctx context.Context) (err error) {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("run worker: already started")
	}
	cfg, logger := w.cfg, w.logger

	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Listen, err)
	}
	addr := ln.Addr().String()
	w.addr.Store(&addr)
	wln, err := w.listenWebhook()
	if err != nil {
		_ = ln.Close()
		return err
	}
	cln, err := w.listenConsole()
	if err != nil {
		_ = ln.Close()
		if wln != nil {
			_ = wln.Close()
		}
		return err
	}
	closeListeners := func() {
		for _, l := range []net.Listener{ln, wln, cln} {
			if l != nil {
				_ = l.Close()
			}
		}
	}

	deps, err := w.connect()
	if err != nil {
		closeListeners()
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.shutdownTimeout)
		defer cancel()
		if cerr := deps.close(closeCtx); cerr != nil {
			logger.Warn("closing clients", zap.Error(cerr))
		}
		logger.Info("stopped")
	}()

	w.logStartup(addr)

	// Each cluster is probed, its permissions checked, before any of its events is taken:
	// a cluster the worker cannot change (unreachable, credentials refused, a permission
	// missing) is down by the time the pipeline asks (canServe).
	w.health.probeKinds(ctx, w.probeTimeout, kindKafka)

	pl, err := w.newPipeline(ctx, deps)
	if err != nil {
		closeListeners()
		return err
	}
	w.health.add(kindNATS, "jetstream", true, pipelineProbe(pl))
	w.health.setPaused(pl.Paused)
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	consumeDone := make(chan struct{})
	// What makes the process useless until it starts again: it stops, /healthz says why,
	// and Run returns it (the orchestrator restarts the worker).
	fatal := make(chan error, 2)
	sweepDone := make(chan struct{})
	go func() {
		defer close(consumeDone)
		if err := pl.Run(consumeCtx); consumeCtx.Err() == nil {
			fatal <- fmt.Errorf("the event pipeline stopped: %v", err)
		}
	}()
	go func() {
		defer close(sweepDone)
		// Plans nobody answered in time end expired (their events' results), on any worker.
		w.engine.RunSweeps(consumeCtx, operation.DefaultSweep, w.metrics.PlansAwaiting)
	}()
	go func() {
		select {
		case <-deps.nats.closed:
			// nats.go gives a connection up for good on a protocol error from the server
			// (a control line or payload over its limits, an authorization revoked):
			// without it the worker takes no event and publishes no result, for ever.
			if !w.health.isStopping() {
				fatal <- fmt.Errorf("the NATS connection is closed for good (%v)", deps.nats.conn.LastError())
			}
		case <-consumeCtx.Done():
		}
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", w.health.serveHealthz)
	mux.HandleFunc("GET /readyz", w.health.serveReadyz)
	bridge, err := w.newBridge(deps)
	if err != nil {
		stopConsuming()
		<-consumeDone
		closeListeners()
		return err
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.registry, promhttp.HandlerOpts{
		Registry:      w.registry,
		ErrorLog:      zap.NewStdLog(logger.Named("metrics")),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	servers := []*http.Server{w.httpServer(mux, "http")}
	listeners := []net.Listener{ln}
	if wln == nil {
		mux.Handle("POST "+alertmanager.Path, bridge)
	} else {
		wmux := http.NewServeMux()
		wmux.Handle("POST "+alertmanager.Path, bridge)
		servers, listeners = append(servers, w.httpServer(wmux, "webhook")), append(listeners, wln)
	}
	if cfg.Console.Enabled {
		ui, err := w.newConsole(deps, cln != nil && cfg.Console.TLS.CertFile != "")
		if err != nil {
			stopConsuming()
			<-consumeDone
			closeListeners()
			return err
		}
		cmux, csrv := mux, servers[0]
		if cln != nil {
			cmux = http.NewServeMux()
			csrv = w.httpServer(cmux, "console")
			servers, listeners = append(servers, csrv), append(listeners, cln)
		}
		csrv.RegisterOnShutdown(ui.Close) // its live streams would hold the shutdown
		cmux.Handle(console.Prefix, ui.Handler())
		cmux.Handle("GET /ui", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently))
	}
	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			if err := srv.Serve(listeners[i]); err != http.ErrServerClosed {
				serveErr <- fmt.Errorf("serve http on %s: %w", listeners[i].Addr(), err)
			}
		}()
	}

	probeCtx, stopProbes := context.WithCancel(ctx)
	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		w.health.runProbes(probeCtx, w.probeInterval, w.probeTimeout)
	}()

	select {
	case <-ctx.Done():
		logger.Info("stopping", zap.NamedError("reason", context.Cause(ctx)))
	case err = <-serveErr:
		logger.Error("http server failed, stopping", zap.Error(err))
	case err = <-fatal:
		w.health.setFatal(err)
		logger.Error("the worker can no longer work; stopping so that it is started again", zap.Error(err))
	}

	w.health.setStopping()
	// Stop taking events; handlers in progress see their context end, stop before their
	// next write and leave their event for redelivery.
	stopConsuming()
	<-consumeDone
	<-sweepDone
	stopProbes()
	<-probesDone

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.shutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if serr := srv.Shutdown(shutdownCtx); serr != nil {
			logger.Warn("http server shutdown", zap.Error(serr))
			_ = srv.Close()
		}
	}
	return err
}

// httpServer serves mux with the webhook's read timeout (requests here are small: a slow
// sender holds no connection longer).
func (w *Worker) httpServer(mux http.Handler, name string) *http.Server {
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       w.cfg.Alertmanager.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(w.logger.Named(name)),
	}
}

// listenWebhook binds the webhook's own listener (alertmanager.listen), with its TLS;
// nil when the webhook is served on http.listen.
func (w *Worker) listenWebhook() (net.Listener, error) {
	am := w.cfg.Alertmanager
	if am.Listen == "" {
		return nil, nil
	}
	return listenTLS(am.Listen, am.TLS, "alertmanager", &w.webhookAddr)
}

// listenTLS binds a listener of its own at addr (<section>.listen), with its TLS, and
// stores the address bound.
func listenTLS(addr string, t config.WebhookTLS, section string, bound *atomic.Pointer[string]) (net.Listener, error) {
	tc, err := t.ServerTLS()
	if err != nil {
		return nil, fmt.Errorf("%s.tls: %w", section, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s.listen): %w", addr, section, err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	a := ln.Addr().String()
	bound.Store(&a)
	return ln, nil
}

// WebhookAddr is the address of the webhook's own listener (alertmanager.listen), or ""
// when it has none or Run has not bound it.
func (w *Worker) WebhookAddr() string {
	if a := w.webhookAddr.Load(); a != nil {
		return *a
	}
	return ""
}

// newBridge builds the Alertmanager webhook bridge (POST /v1/alertmanager), which
// publishes the events of firing alerts on the worker's NATS connection.
func (w *Worker) newBridge(c *clients) (*alertmanager.Bridge, error) {
	js, err := jetstream.New(c.nats.conn)
	if err != nil {
		return nil, err
	}
	return alertmanager.New(w.cfg.Alertmanager, w.cfg.ClusterNames(), js, w.logger.Named("alertmanager"), w.metrics), nil
}

// clients is everything Run connects to, for closing.
type clients struct {
	nats     *natsConn
	clusters []*kafkaCluster
	lockZK   *zkConn
}

// connect builds every client and registers its dependency. On error it
// closes what it had built.
func (w *Worker) connect() (_ *clients, err error) {
	cfg, logger, h := w.cfg, w.logger, w.health
	c := &clients{}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), w.shutdownTimeout)
			defer cancel()
			_ = c.close(ctx)
		}
	}()

	natsDep := h.add(kindNATS, "nats", true, nil)
	c.nats, err = connectNATS(cfg, logger, h, natsDep)
	if err != nil {
		return c, err
	}
	natsDep.probe = c.nats.probe

	if cfg.NeedsLockZooKeeper() {
		lockDep := h.add(kindZooKeeper, lockZKName, true, nil)
		c.lockZK, err = connectZK(cfg.Lock.ZooKeeper, cfg.Lock.SessionTimeout, lockAuth(cfg),
			logger.Named("zookeeper").With(zap.String("zookeeper", lockZKName)), h, lockDep)
		if err != nil {
			return c, fmt.Errorf("lock %w", err)
		}
		lockDep.probe = c.lockZK.probe
	}

	for _, name := range cfg.ClusterNames() {
		cl := cfg.Clusters[name]
		kc, err := newKafkaCluster(cl, logger)
		if err != nil {
			return c, err
		}
		c.clusters = append(c.clusters, kc)
		h.add(kindKafka, name, true, kc.probe)
		if cl.ZooKeeper == "" {
			continue
		}
		zkDep := h.add(kindZooKeeper, name, cl.Strategy.NeedsZooKeeper(), nil)
		kc.zk, err = connectZK(cl.ZooKeeper, cfg.Lock.SessionTimeout, clusterZKAuth(cfg, cl),
			logger.Named("zookeeper").With(zap.String("cluster", name)), h, zkDep)
		if err != nil {
			return c, fmt.Errorf("cluster %s: %w", name, err)
		}
		zkDep.probe = kc.zk.probe
	}
	return c, nil
}

// close closes the Kafka and ZooKeeper clients, then drains NATS.
func (c *clients) close(ctx context.Context) error {
	for _, kc := range c.clusters {
		kc.client.Close()
		if kc.zk != nil {
			kc.zk.sess.Close()
		}
	}
	if c.lockZK != nil {
		c.lockZK.sess.Close()
	}
	if c.nats != nil {
		return c.nats.drain(ctx)
	}
	return nil
}

// clusterSummary is how the startup log shows a cluster.
type clusterSummary struct {
	Name             string   `json:"name"`
	BootstrapServers []string `json:"bootstrap_servers"`
	ZooKeeper        string   `json:"zookeeper,omitempty"`
	Strategy         string   `json:"strategy"`
	Lock             string   `json:"lock"`
}

func (w *Worker) logStartup(addr string) {
	cfg := w.cfg
	clusters := make([]clusterSummary, 0, len(cfg.Clusters))
	for _, name := range cfg.ClusterNames() {
		cl := cfg.Clusters[name]
		clusters = append(clusters, clusterSummary{
			Name:             name,
			BootstrapServers: cl.BootstrapServers,
			ZooKeeper:        cl.ZooKeeper,
			Strategy:         string(cl.Strategy),
			Lock:             string(cfg.LockBackend(name)),
		})
	}
	w.logger.Info("kafkamender worker started",
		zap.String("worker", cfg.Worker.ID),
		zap.String("version", w.version),
		zap.String("http", addr),
		zap.Stringer("nats", cfg.NATS.URL), // without credentials
		zap.String("lock_zookeeper", cfg.Lock.ZooKeeper),
		zap.String("lock_root", cfg.Lock.Root),
		zap.Any("clusters", clusters),
		zap.Strings("config_from_env", cfg.EnvOverrides), // names only: values may be secrets
		zap.String("console", w.consoleURL(addr)),
	)
}

// consoleURL is where the console is served ("" when it is off).
func (w *Worker) consoleURL(httpAddr string) string {
	c := w.cfg.Console
	if !c.Enabled {
		return ""
	}
	scheme, addr := "http", httpAddr
	if c.Listen != "" {
		addr = w.ConsoleAddr()
		if c.TLS.CertFile != "" {
			scheme = "https"
		}
	}
	return scheme + "://" + addr + console.Prefix
}

// listenConsole binds the console's own listener (console.listen), with its TLS; nil
// when the console is off or served on http.listen.
func (w *Worker) listenConsole() (net.Listener, error) {
	c := w.cfg.Console
	if !c.Enabled || c.Listen == "" {
		return nil, nil
	}
	return listenTLS(c.Listen, c.TLS, "console", &w.consoleAddr)
}

// ConsoleAddr is the address of the console's own listener (console.listen), or "" when
// it has none or Run has not bound it.
func (w *Worker) ConsoleAddr() string {
	if a := w.consoleAddr.Load(); a != nil {
		return *a
	}
	return ""
}

// newConsole builds the web console (console.enabled) on the worker's NATS connection.
func (w *Worker) newConsole(c *clients, secure bool) (*console.Server, error) {
	js, err := jetstream.New(c.nats.conn)
	if err != nil {
		return nil, err
	}
	return console.New(console.Config{
		Console:   w.cfg.Console,
		Consumer:  w.cfg.NATS.Consumer,
		Approvers: w.cfg.Approval.Approvers,
		Survey:    w.survey,
		Secure:    secure,
		Logger:    w.logger.Named("console"),
	}, c.nats.conn, js)
}
