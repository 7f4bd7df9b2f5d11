package locks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// DefaultSessionTimeout is the session timeout asked of ZooKeeper when none is configured.
const DefaultSessionTimeout = 10 * time.Second

// SessionConfig configures a Session.
type SessionConfig struct {
	// Servers are the ZooKeeper servers, host:port each. Required. go-zookeeper has no
	// chroot: a Session sees the whole tree.
	Servers []string
	// Timeout is the session timeout asked of ZooKeeper: how long the server keeps the
	// session, and the claims made in it, after it last heard from this client. The server
	// clamps it into its [minSessionTimeout, maxSessionTimeout]. Default 10s.
	Timeout time.Duration
	// LossAfterDisconnect is how long the connection may be down before the session is
	// treated as lost without waiting for the server's verdict, which the client only hears
	// when it reconnects (never, while a partition lasts). Default Timeout/3: go-zookeeper
	// notices a silent connection 2/3 of the timeout after it last heard from the server,
	// so the server may expire the session about Timeout/3 after that. Negative: only the
	// server's verdict (or Close) ends a session.
	LossAfterDisconnect time.Duration
	// Logger receives session changes and go-zookeeper's own messages (as warnings).
	// Default: no logging.
	Logger *zap.Logger
	// OnEvent, when set, is called with every event of the connection (session changes
	// and watch events), after the Session has handled it. It runs on go-zookeeper's
	// goroutine and must not block.
	OnEvent func(zk.Event)
	// ConnOptions are more zk.Connect options (zk.WithHostProvider, zk.WithDialer, …).
	// Do not pass zk.WithEventCallback: use OnEvent.
	ConnOptions []func(*zk.Conn)
	// Auth are the digest identities the connection authenticates as, on every
	// connection: the session has none until the server has taken all of them, so that no
	// request is made without them (see Session).
	Auth []DigestAuth
}

// DigestAuth is a ZooKeeper digest identity, the "digest" scheme's user:password.
type DigestAuth struct {
	User     string
	Password string
}

// ACL is the ACL of znodes that only this identity may change or delete, which anyone
// may read: zk.DigestACL(zk.PermAll, user, password) and world read.
func (a DigestAuth) ACL() []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, a.User, a.Password), zk.WorldACL(zk.PermRead)...)
}

// String names the identity, never its password.
func (a DigestAuth) String() string { return "digest:" + a.User }

func (c *SessionConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultSessionTimeout
	}
	if c.LossAfterDisconnect == 0 {
		c.LossAfterDisconnect = c.Timeout / 3
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports every problem of the configuration.
func (c SessionConfig) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers: none given"))
	}
	for _, s := range c.Servers {
		if s == "" {
			errs = append(errs, errors.New("servers: empty address"))
		}
	}
	for _, a := range c.Auth {
		if a.User == "" || strings.Contains(a.User, ":") {
			errs = append(errs, fmt.Errorf("auth: user %q: want a name without ':'", a.User))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: %s is negative", c.Timeout))
	}
	return errors.Join(errs...)
}

// Session is a long-lived ZooKeeper connection (go-zookeeper's *zk.Conn) that keeps track
// of which ZooKeeper session the connection has. go-zookeeper reconnects on its own and,
// when the server has expired the session, silently starts a new one; ephemeral nodes and
// watches of the old session are gone by then. Session turns that into a Generation per
// session, whose Expired channel closes when that session is over, so that whatever
// depends on the session (a lock's claim node) learns it is gone.
//
// Session state arrives through zk.WithEventCallback, which runs on go-zookeeper's own
// goroutine before it sends anything on a new session: when a request made for an old
// session completes in a new one, the old Generation has already ended.
//
// With SessionConfig.Auth, the Session adds the identities (conn.AddAuth) once the first
// session is there, and has no session (Current, Wait) until the server took them.
// go-zookeeper remembers identities added and sends them again on every later
// connection, new session or not, before any other request (resendZkAuth, go-zookeeper
// v1.0.4); an AddAuth whose reply raced a reconnection is sent again.
type Session struct {
	conn    *zk.Conn
	logger  *zap.Logger
	lossAft time.Duration
	onEvent func(zk.Event)

	// Guarded by mu.
	authed   bool   // every identity of SessionConfig.Auth was taken (true without any)
	connects uint64 // sessions established or resumed: connections that authenticated

	mu       sync.Mutex
	gen      *Generation   // the current session, or the last one (then ended), or nil
	seq      uint64        // generations started so far
	changed  chan struct{} // closed and replaced when a generation starts or ends
	timerSeq uint64        // identifies the live loss timer; 0 when none
	timer    *time.Timer
	closed   bool
	done     chan struct{} // closed when the Session is closed
	subs     map[*subscriber]struct{}
}

// Generation is one ZooKeeper session of a Session's connection.
type Generation struct {
	id   int64
	seq  uint64
	done chan struct{}
	err  error // why the session ended; written before done is closed
}

// ID is ZooKeeper's id of the session.
func (g *Generation) ID() int64 { return g.id }

// Expired is closed when the session is over: the server expired it, the connection was
// down for longer than SessionConfig.LossAfterDisconnect, or the Session was closed.
func (g *Generation) Expired() <-chan struct{} { return g.done }

// Err is nil while the session lives, then why it ended.
func (g *Generation) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

func (g *Generation) String() string { return fmt.Sprintf("0x%x#%d", g.id, g.seq) }

type subscriber struct{ ch chan zk.Event }

// Connect starts a Session: like zk.Connect it returns at once and connects in the
// background; use Wait for the first session. Close it when done.
func Connect(cfg SessionConfig) (*Session, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("zookeeper session config: %w", err)
	}
	s := &Session{
		logger:  cfg.Logger,
		lossAft: cfg.LossAfterDisconnect,
		onEvent: cfg.OnEvent,
		authed:  len(cfg.Auth) == 0,
		changed: make(chan struct{}),
		done:    make(chan struct{}),
		subs:    map[*subscriber]struct{}{},
	}
	extra := cfg.ConnOptions
	// Held until s.conn is set: go-zookeeper may report events before zk.Connect returns.
	s.mu.Lock()
	conn, events, err := zk.Connect(cfg.Servers, cfg.Timeout,
		zk.WithLogger(zkLogger{cfg.Logger}),
		zk.WithLogInfo(false),
		func(c *zk.Conn) {
			for _, o := range extra {
				o(c)
			}
		},
		zk.WithEventCallback(s.handle),
	)
	if err != nil {
		s.mu.Unlock()
		return nil, mark(fmt.Errorf("connect to zookeeper %s: %w", strings.Join(cfg.Servers, ","), err))
	}
	s.conn = conn
	s.mu.Unlock()
	go func() {
		// Events are handled by the callback; the channel tells when the connection
		// is finished for good: go-zookeeper closes it last.
		for range events {
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shutdown()
	}()
	if len(cfg.Auth) > 0 {
		go s.authenticate(cfg.Auth)
	}
	return s, nil
}

// authenticate adds the identities to the connection once it has a session, and again
// whenever a reconnection came between an AddAuth and its reply (the new connection may
// then have been authenticated without it); then it marks the Session authenticated.
// It gives up when the Session is closed.
func (s *Session) authenticate(auth []DigestAuth) {
	const maxPause = 2 * time.Second
	pause := 50 * time.Millisecond
	for {
		s.mu.Lock()
		connects, changed, closed := s.connects, s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		if connects == 0 {
			select { // no session yet: AddAuth would wait in the queue and fail on a drop
			case <-changed:
			case <-s.done:
			}
			continue
		}
		var err error
		for _, a := range auth {
			if err = s.conn.AddAuth("digest", []byte(a.User+":"+a.Password)); err != nil {
				err = fmt.Errorf("zookeeper auth %s: %w", a, err)
				break
			}
		}
		s.mu.Lock()
		if err == nil && s.connects == connects && !s.closed {
			s.authed = true
			s.logger.Debug("zookeeper identities added", zap.Int("identities", len(auth)))
			s.notify()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if err != nil {
			s.logger.Warn("zookeeper authentication not taken yet; trying again", zap.Error(err))
		}
		select {
		case <-time.After(pause):
		case <-s.done:
			return
		}
		pause = min(2*pause, maxPause)
	}
}

// Conn is the connection. Use it for reads and, fenced with a Held, for writes; do not
// close it: close the Session.
func (s *Session) Conn() *zk.Conn { return s.conn }

// Current returns the session the connection has now, or an error wrapping ErrNoSession
// (between sessions) or ErrClosed.
func (s *Session) Current() (*Generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.currentLocked()
}

func (s *Session) currentLocked() (*Generation, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.gen != nil && s.gen.Err() == nil {
		if !s.authed {
			return nil, fmt.Errorf("%w: zookeeper connection %s, authentication not taken yet", ErrNoSession, stateName(s.conn.State()))
		}
		return s.gen, nil
	}
	return nil, fmt.Errorf("%w: zookeeper connection %s", ErrNoSession, stateName(s.conn.State()))
}

// Authenticated reports whether the identities of SessionConfig.Auth were taken (true
// when there are none); from then on they are on every connection.
func (s *Session) Authenticated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authed
}

// Wait returns the current session, waiting for one as long as ctx allows.
func (s *Session) Wait(ctx context.Context) (_ *Generation, err error) {
	defer func() { err = mark(err) }()
	for {
		s.mu.Lock()
		g, err := s.currentLocked()
		changed := s.changed
		s.mu.Unlock()
		if err == nil || errors.Is(err, ErrClosed) {
			return g, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", err, context.Cause(ctx))
		}
	}
}

// Expired is the Expired channel of the current session; it is already closed when the
// connection has no session. Each session has its own channel: take it again after a new
// session started.
func (s *Session) Expired() <-chan struct{} {
	g, err := s.Current()
	if err != nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return g.Expired()
}

// Done is closed when the Session is closed (by Close, or because go-zookeeper stopped).
func (s *Session) Done() <-chan struct{} { return s.done }

// Subscribe returns a channel that receives the connection's session events
// (zk.EventSession: connecting, connected, has session, expired, disconnected), and a
// function that ends the subscription. Events that find the channel's buffer full are
// dropped: use Generation for the session's end, which is never missed. The channel is
// closed when the subscription or the Session ends.
func (s *Session) Subscribe(buffer int) (<-chan zk.Event, func()) {
	sub := &subscriber{ch: make(chan zk.Event, max(buffer, 1))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(sub.ch)
		return sub.ch, func() {}
	}
	s.subs[sub] = struct{}{}
	return sub.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[sub]; ok {
			delete(s.subs, sub)
			close(sub.ch)
		}
	}
}

// Close ends the session: every Generation ends with ErrClosed and the connection closes,
// which deletes the session's ephemeral nodes (claims included) on the server.
func (s *Session) Close() {
	s.mu.Lock()
	s.shutdown()
	s.mu.Unlock()
	s.conn.Close()
}

// handle is go-zookeeper's event callback. It must not block.
func (s *Session) handle(ev zk.Event) {
	if ev.Type == zk.EventSession {
		s.mu.Lock()
		s.transition(ev)
		for sub := range s.subs {
			select {
			case sub.ch <- ev:
			default:
			}
		}
		s.mu.Unlock()
	}
	if s.onEvent != nil {
		s.onEvent(ev)
	}
}

// transition follows a session state change. s.mu is held.
func (s *Session) transition(ev zk.Event) {
	if s.closed {
		return
	}
	g := s.gen
	alive := g != nil && g.Err() == nil
	switch ev.State {
	case zk.StateHasSession:
		s.connects++
		s.stopTimer()
		id := s.conn.SessionID()
		if alive && g.id == id {
			s.logger.Info("zookeeper session resumed", zap.String("session", g.String()), zap.String("server", ev.Server))
			return
		}
		if alive {
			s.end(g, fmt.Errorf("zookeeper session 0x%x replaced by 0x%x: %w", g.id, id, zk.ErrSessionExpired))
		}
		s.seq++
		s.gen = &Generation{id: id, seq: s.seq, done: make(chan struct{})}
		s.logger.Info("zookeeper session established", zap.String("session", s.gen.String()), zap.String("server", ev.Server))
		s.notify()
	case zk.StateExpired:
		s.stopTimer()
		if alive {
			s.end(g, fmt.Errorf("zookeeper session 0x%x: %w", g.id, zk.ErrSessionExpired))
		}
	case zk.StateDisconnected, zk.StateAuthFailed:
		if !alive || s.timer != nil || s.lossAft < 0 {
			return
		}
		s.logger.Warn("zookeeper connection lost; session kept for now",
			zap.String("session", g.String()), zap.Duration("lost_after", s.lossAft))
		s.timerSeq++
		seq, d := s.timerSeq, s.lossAft
		s.timer = time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.closed || s.timerSeq != seq || s.gen != g || g.Err() != nil {
				return
			}
			s.timer, s.timerSeq = nil, 0
			if s.conn.State() == zk.StateHasSession {
				return
			}
			s.end(g, fmt.Errorf("zookeeper session 0x%x: %w (%s)", g.id, ErrDisconnected, d))
		})
	}
}

func (s *Session) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer, s.timerSeq = nil, 0
	}
}

// end ends a generation. s.mu is held.
func (s *Session) end(g *Generation, err error) {
	g.err = mark(err) // Generation.Err is exported: a ZooKeeper expiry is transient
	close(g.done)
	level := zap.WarnLevel
	if errors.Is(err, ErrClosed) {
		level = zap.InfoLevel
	}
	s.logger.Log(level, "zookeeper session over", zap.String("session", g.String()), zap.Error(err))
	s.notify()
}

func (s *Session) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// shutdown marks the Session closed. s.mu is held.
func (s *Session) shutdown() {
	if s.closed {
		return
	}
	s.stopTimer()
	if g := s.gen; g != nil && g.Err() == nil {
		s.end(g, fmt.Errorf("zookeeper session 0x%x: %w", g.id, ErrClosed))
	}
	s.closed = true
	for sub := range s.subs {
		close(sub.ch)
	}
	s.subs = nil
	close(s.done)
	s.notify()
}

func stateName(st zk.State) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "State"))
}

// zkLogger routes go-zookeeper's messages, which are about problems only (WithLogInfo
// false), into zap.
type zkLogger struct{ logger *zap.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.logger.Warn("zookeeper client: " + fmt.Sprintf(format, args...))
}
