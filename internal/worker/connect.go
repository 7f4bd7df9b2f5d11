package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
)

// natsDrainTimeout bounds the drain of the NATS connection at shutdown.
const natsDrainTimeout = 10 * time.Second

// natsConn is the worker's NATS connection.
type natsConn struct {
	conn   *nats.Conn
	cfg    config.NATS
	closed chan struct{} // closed by the client once the connection is closed

	mu sync.Mutex
	// refusal is why the server refused the last attempt to connect (credentials, a
	// certificate), when the client does not say: it is reported until a connection is up.
	refusal error
}

func (nc *natsConn) setRefusal(err error) {
	nc.mu.Lock()
	nc.refusal = err
	nc.mu.Unlock()
}

func (nc *natsConn) lastRefusal() error {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	return nc.refusal
}

// How soon a connection to a server that answers nothing is given up (connectNATS).
const (
	natsPingInterval = 5 * time.Second
	natsMaxPingsOut  = 2
)

// connectNATS connects to NATS. A server that is down is not an error: the
// client keeps retrying, for ever, and reports to dep as it goes. Only an
// unusable URL or option fails.
func connectNATS(cfg *config.Config, logger *zap.Logger, h *health, dep *dependency) (*natsConn, error) {
	logger = logger.Named("nats")
	security, err := natsSecurityOptions(cfg.NATS)
	if err != nil {
		return nil, err
	}
	nc := &natsConn{closed: make(chan struct{}), cfg: cfg.NATS}
	var closeOnce sync.Once
	opts := []nats.Option{
		nats.Name("kafkamender-worker " + cfg.Worker.ID),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		// A server that hangs (a frozen process, a node cut off from the network) keeps
		// the connection open and answers nothing: pings find it within about
		// natsPingInterval × (natsMaxPingsOut + 1), and the client moves to another node
		// of the cluster. nats.go's default, 2 minutes × 2, left a worker on a hung node
		// for minutes.
		nats.PingInterval(natsPingInterval),
		nats.MaxPingsOutstanding(natsMaxPingsOut),
		nats.DrainTimeout(natsDrainTimeout),
		nats.ConnectHandler(func(c *nats.Conn) {
			nc.setRefusal(nil)
			logger.Debug("nats connected", zap.String("server", c.ConnectedUrlRedacted()))
			h.set(dep, "connected to "+c.ConnectedUrlRedacted(), nil)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if h.isStopping() {
				return // we are closing it
			}
			if err == nil {
				err = errors.New("disconnected")
			} else {
				err = fmt.Errorf("disconnected: %w", err)
			}
			logger.Warn("nats disconnected", zap.Error(err))
			h.set(dep, "", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			nc.setRefusal(nil)
			logger.Debug("nats reconnected", zap.String("server", c.ConnectedUrlRedacted()))
			h.set(dep, "connected to "+c.ConnectedUrlRedacted(), nil)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if isNATSSecurityError(cfg.NATS, err) {
				// Credentials refused, a certificate not trusted: no retry will do, and
				// /readyz and the log say why at once (set logs it when it changes).
				nc.setRefusal(explainNATSError(cfg.NATS, err))
				h.set(dep, "", nc.lastRefusal())
				return
			}
			logger.Debug("nats reconnect attempt failed", zap.Error(err))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			logger.Error("nats asynchronous error", fields...)
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			closeOnce.Do(func() { close(nc.closed) })
		}),
	}
	conn, err := nats.Connect(cfg.NATS.URL.Reveal(), append(opts, security...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", cfg.NATS.URL, explainNATSError(cfg.NATS, err))
	}
	nc.conn = conn
	if !conn.IsConnected() {
		// The first attempt failed and the client retries in the background, where it
		// keeps a refused credential or an untrusted certificate to itself until the next
		// probe. One attempt of our own says at once when no retry will do.
		go func() {
			probe, err := nats.Connect(cfg.NATS.URL.Reveal(), append(security, nats.NoReconnect(), nats.Timeout(5*time.Second))...)
			if probe != nil {
				probe.Close() // it only had to say why the first attempt failed
			}
			if err != nil && isNATSSecurityError(cfg.NATS, err) && !conn.IsConnected() {
				nc.setRefusal(explainNATSError(cfg.NATS, err))
				h.set(dep, "", nc.lastRefusal())
			}
		}()
	}
	return nc, nil
}

// probe reports whether the connection is up; its last error otherwise.
func (nc *natsConn) probe(context.Context) (string, error) {
	if nc.conn.IsConnected() {
		return "connected to " + nc.conn.ConnectedUrlRedacted(), nil
	}
	status := strings.ToLower(nc.conn.Status().String())
	if err := nc.conn.LastError(); err != nil {
		return "", fmt.Errorf("%s: %w", status, explainNATSError(nc.cfg, err))
	}
	if err := nc.lastRefusal(); err != nil {
		return "", fmt.Errorf("%s: %w", status, err)
	}
	return "", fmt.Errorf("not connected (%s)", status)
}

// drain lets in-flight messages finish, closes the connection and waits for
// it to be closed, at most until ctx is done.
func (nc *natsConn) drain(ctx context.Context) error {
	if err := nc.conn.Drain(); err != nil {
		// Drain refuses a connection that is not connected; it closes it
		// instead, which is all there is to do.
		if !errors.Is(err, nats.ErrConnectionReconnecting) && !errors.Is(err, nats.ErrConnectionClosed) {
			nc.conn.Close()
			return fmt.Errorf("drain nats: %w", err)
		}
	}
	select {
	case <-nc.closed:
		return nil
	case <-ctx.Done():
		nc.conn.Close()
		return fmt.Errorf("drain nats: %w", ctx.Err())
	}
}

// kafkaCluster is the worker's connection to one Kafka cluster.
type kafkaCluster struct {
	cfg    *config.Cluster
	client *kgo.Client
	zk     *zkConn // the cluster's own ZooKeeper; nil when not configured

	mu     sync.Mutex
	topics topicPermissions // the last check of the topics' permissions
}

// topicPermissionsEvery spaces the checks of the topics' permissions, which read the
// metadata of every topic; the cluster's permissions are checked on every probe.
const topicPermissionsEvery = time.Minute

// topicPermissions is what the last check of the topics' permissions found.
type topicPermissions struct {
	at      time.Time
	checked int
	missing map[string][]kmsg.ACLOperation
}

// connIdle is how long a connection to a broker stays open unused. franz-go closes one
// after 20s by default, so an event after a quiet spell paid a new connection (TCP, TLS,
// SASL, ApiVersions: 2–8 ms on loopback, more across a network) to each broker its reads
// happened to ask; brokers close connections idle for connections.max.idle.ms (10 min by
// default), so keep them for less than that.
const connIdle = 5 * time.Minute

// newKafkaCluster builds the clients of one cluster. franz-go dials lazily,
// so a cluster that is down does not fail this; the first probe says so.
func newKafkaCluster(cl *config.Cluster, logger *zap.Logger) (*kafkaCluster, error) {
	security, err := kafkaSecurityOptions(cl)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}
	client, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cl.BootstrapServers...),
		kgo.ClientID("kafkamender"),
		kgo.ConnIdleTimeout(connIdle),
		kgo.WithLogger(kzap.New(logger.Named("kafka").With(zap.String("cluster", cl.Name)))),
	}, security...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for cluster %s: %w", cl.Name, err)
	}
	return &kafkaCluster{cfg: cl, client: client}, nil
}

// probe asks the cluster for its brokers and controller (a fresh request, not the
// client's cache), then which of the permissions the worker needs it has: a missing one,
// like a cluster that cannot be reached, makes the cluster down, and the worker takes
// none of its events. Its errors name the cluster and, where the cause is in the
// configuration (credentials refused, a certificate not trusted), what to check.
func (kc *kafkaCluster) probe(ctx context.Context) (string, error) {
	md, err := kafka.BrokerMetadata(ctx, kc.client)
	if err != nil {
		return "", fmt.Errorf("cluster %s: %w", kc.cfg.Name, explainKafkaError(kc.cfg, fmt.Errorf("broker %w", err)))
	}
	cluster := ""
	if md.ClusterID != nil {
		cluster = *md.ClusterID
	}
	perms, err := kc.checkPermissions(ctx, time.Now())
	if err != nil {
		return "", fmt.Errorf("cluster %s: %w", kc.cfg.Name, err)
	}
	return fmt.Sprintf("cluster id %s, %d brokers, controller %d; %s", cluster, len(md.Brokers), md.ControllerID, perms), nil
}

// checkPermissions checks the cluster's permissions, and the topics' when they were last
// checked topicPermissionsEvery ago or more (what that check found holds until the next).
func (kc *kafkaCluster) checkPermissions(ctx context.Context, now time.Time) (string, error) {
	kc.mu.Lock()
	last := kc.topics
	kc.mu.Unlock()
	due := last.at.IsZero() || now.Sub(last.at) >= topicPermissionsEvery

	rep, err := kafka.CheckPermissions(ctx, kc.client, due)
	perr, denied := errors.AsType[*kafka.PermissionError](err)
	if err != nil && !denied {
		return "", fmt.Errorf("check permissions: %w", explainKafkaError(kc.cfg, err))
	}
	if !denied {
		perr = &kafka.PermissionError{}
	}
	if due {
		last = topicPermissions{at: now, checked: rep.TopicsChecked, missing: perr.Topics}
		if denied {
			last.checked = perr.TopicsChecked
		}
		kc.mu.Lock()
		kc.topics = last
		kc.mu.Unlock()
	}
	perr.Topics, perr.TopicsChecked = last.missing, last.checked
	if len(perr.Cluster) > 0 || len(perr.Topics) > 0 {
		return "", perr
	}
	if !rep.ClusterChecked {
		return "permissions not checked: the cluster cannot tell (Kafka < 2.3)", nil
	}
	if last.checked == 0 {
		// Metadata lists only the topics the worker may describe: none may be a cluster
		// without topics, or a missing Describe on every topic, which events will show.
		return "permissions checked (cluster; no topic visible: Describe on Topic missing, or no topics)", nil
	}
	return fmt.Sprintf("permissions checked (cluster, %d topics)", last.checked), nil
}

// zkConn is a ZooKeeper connection and its chroot, which the client library
// does not handle: users of the connection prefix their paths with it.
type zkConn struct {
	sess    *locks.Session // the session locks are taken in
	conn    *zk.Conn
	servers []string
	chroot  string
}

// connectZK starts a ZooKeeper session in the background: zk.Connect
// returns at once and keeps trying. Session changes are logged and reported
// to dep; the library's own messages, which are then only about problems,
// are logged as warnings.
func connectZK(connect string, sessionTimeout time.Duration, auth []locks.DigestAuth, logger *zap.Logger, h *health, dep *dependency) (*zkConn, error) {
	servers, chroot, err := config.ParseZKConnect(connect)
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", connect, err)
	}
	var (
		mu         sync.Mutex
		hadSession bool
	)
	onEvent := func(ev zk.Event) {
		if ev.Type != zk.EventSession || h.isStopping() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch ev.State {
		case zk.StateHasSession:
			hadSession = true
			logger.Debug("zookeeper session established", zap.String("server", ev.Server))
			h.set(dep, "session on "+ev.Server, nil)
		case zk.StateExpired:
			hadSession = false
			logger.Warn("zookeeper session expired", zap.String("server", ev.Server))
			h.set(dep, "", errors.New("session expired"))
		case zk.StateAuthFailed:
			logger.Error("zookeeper authentication failed", zap.String("server", ev.Server))
			h.set(dep, "", errors.New("authentication failed"))
		case zk.StateDisconnected:
			if hadSession {
				hadSession = false
				logger.Warn("zookeeper connection lost", zap.String("server", ev.Server))
				h.set(dep, "", errors.New("connection lost"))
			}
		}
	}
	sess, err := locks.Connect(locks.SessionConfig{
		Servers:     servers,
		Timeout:     sessionTimeout,
		Logger:      logger,
		OnEvent:     onEvent,
		ConnOptions: []func(*zk.Conn){zk.WithHostProvider(&staticHostProvider{})},
		Auth:        auth,
	})
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", connect, err)
	}
	return &zkConn{sess: sess, conn: sess.Conn(), servers: servers, chroot: chroot}, nil
}

// probe reports whether the connection has a session, its identities added, waiting for
// one until ctx is done: a session being (re)established is not yet a failure.
func (z *zkConn) probe(ctx context.Context) (string, error) {
	const poll = 50 * time.Millisecond
	for {
		st := z.conn.State()
		authed := z.sess.Authenticated()
		if st == zk.StateHasSession && authed {
			return fmt.Sprintf("session 0x%x on %s", z.conn.SessionID(), z.conn.Server()), nil
		}
		select {
		case <-ctx.Done():
			if st == zk.StateHasSession {
				return "", errors.New("session, but its digest identities are not taken yet")
			}
			return "", fmt.Errorf("no session (%s)", strings.ToLower(strings.TrimPrefix(st.String(), "State")))
		case <-time.After(poll):
		}
	}
}

// lockAuth is the identity the worker's locks belong to (lock.zookeeper_auth); nil
// without one.
func lockAuth(cfg *config.Config) []locks.DigestAuth {
	return digestAuth(cfg.Lock.ZooKeeperAuth)
}

// clusterZKAuth is what a cluster's own ZooKeeper session authenticates as: the lock's
// identity (its lock lives there) and the one Kafka's znodes were created with.
func clusterZKAuth(cfg *config.Config, cl *config.Cluster) []locks.DigestAuth {
	return append(lockAuth(cfg), digestAuth(cl.ZooKeeperAuth)...)
}

func digestAuth(a config.ZooKeeperAuth) []locks.DigestAuth {
	if a.User == "" {
		return nil
	}
	return []locks.DigestAuth{{User: a.User, Password: a.Password.Reveal()}}
}

// staticHostProvider hands out the configured servers round-robin and
// leaves name resolution to each dial. go-zookeeper's default provider
// resolves every name once, in zk.Connect, and fails it if one name does not
// resolve; with this one a ZooKeeper whose name does not resolve yet is just
// a server that is down.
type staticHostProvider struct {
	mu      sync.Mutex
	servers []string
	curr    int
	last    int
}

var _ zk.HostProvider = (*staticHostProvider)(nil)

func (p *staticHostProvider) Init(servers []string) error {
	if len(servers) == 0 {
		return errors.New("no zookeeper servers")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servers = append([]string(nil), servers...)
	p.curr, p.last = -1, -1
	return nil
}

func (p *staticHostProvider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.servers)
}

// Next returns the next server; retryStart is true once every server has
// been tried since the last successful connection.
func (p *staticHostProvider) Next() (server string, retryStart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.curr = (p.curr + 1) % len(p.servers)
	retryStart = p.curr == p.last
	if p.last == -1 {
		p.last = 0
	}
	return p.servers[p.curr], retryStart
}

func (p *staticHostProvider) Connected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = p.curr
}
