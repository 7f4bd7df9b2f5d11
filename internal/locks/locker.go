package locks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Defaults of Config.
const (
	DefaultRoot           = "/kafkamender/locks"
	DefaultWait           = 5 * time.Minute
	DefaultCleanupTimeout = 5 * time.Second
)

// Config configures a Locker.
type Config struct {
	// Root is the znode under which the locks live, one child per cluster. Default
	// /kafkamender/locks.
	Root string
	// Worker identifies this worker in its claims (host name, pod name). Required.
	Worker string
	// Wait bounds how long Acquire waits for another holder, unless its context ends
	// first or WithWait says otherwise. Default 5m.
	Wait time.Duration
	// CleanupTimeout bounds how long a failed Acquire, Do's release, or a claim lost to
	// a long disconnection waits for its claim node to be deleted before leaving the
	// deletion to the background. Default 5s.
	CleanupTimeout time.Duration
	// ACL of the nodes created: Root, the lock nodes under it and the claims. Default
	// zk.WorldACL(zk.PermAll). With a DigestAuth.ACL, the locks are the identity's alone
	// (the Session must authenticate as it).
	ACL []zk.ACL
	// ParentACL is the ACL of the parents of Root that do not exist yet, which other users
	// of the ensemble may share (/kafkamender of /kafkamender/locks). Default
	// zk.WorldACL(zk.PermAll).
	ParentACL []zk.ACL
	// Logger. Default: no logging.
	Logger *zap.Logger
}

func (c *Config) setDefaults() {
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	if c.ACL == nil {
		c.ACL = zk.WorldACL(zk.PermAll)
	}
	if c.ParentACL == nil {
		c.ParentACL = zk.WorldACL(zk.PermAll)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if err := checkPath(c.Root); err != nil {
		errs = append(errs, fmt.Errorf("root %q: %w", c.Root, err))
	}
	if strings.TrimSpace(c.Worker) == "" {
		errs = append(errs, errors.New("worker: empty"))
	}
	if c.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait: %s is negative", c.Wait))
	}
	if c.CleanupTimeout < 0 {
		errs = append(errs, fmt.Errorf("cleanup timeout: %s is negative", c.CleanupTimeout))
	}
	return errors.Join(errs...)
}

// Locker takes per-cluster locks in ZooKeeper on a Session. It is safe for concurrent use;
// every Acquire is a claim of its own (a Locker is not reentrant: two Acquires of the same
// cluster from one Locker exclude each other like any two).
type Locker struct {
	sess   *Session
	conn   *zk.Conn
	cfg    Config
	logger *zap.Logger
}

// New returns a Locker that takes locks on sess's connection.
func New(sess *Session, cfg Config) (*Locker, error) {
	if sess == nil {
		return nil, errors.New("locker: nil session")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("locker config: %w", err)
	}
	return &Locker{sess: sess, conn: sess.Conn(), cfg: cfg, logger: cfg.Logger}, nil
}

// Path is the lock node of a cluster: Root/cluster.
func (l *Locker) Path(cluster string) string { return l.cfg.Root + "/" + cluster }

// AcquireOption changes one Acquire.
type AcquireOption func(*acquireOptions)

type acquireOptions struct{ wait time.Duration }

// WithWait bounds how long this Acquire waits for another holder (instead of
// Config.Wait). Non-positive values keep Config.Wait.
func WithWait(d time.Duration) AcquireOption {
	return func(o *acquireOptions) {
		if d > 0 {
			o.wait = d
		}
	}
}

// waitContext bounds an Acquire's wait: wait, or what its options say.
func waitContext(ctx context.Context, wait time.Duration, opts []AcquireOption) (context.Context, context.CancelFunc) {
	o := acquireOptions{wait: wait}
	for _, opt := range opts {
		opt(&o)
	}
	return context.WithTimeout(ctx, o.wait)
}

// Acquire takes the lock of cluster for the event eventID, waiting for the holder before
// it as long as ctx and the wait (Config.Wait, WithWait) allow.
//
// On error no claim is left behind: Acquire deletes its claim node before it returns (if
// ZooKeeper cannot be reached, it waits CleanupTimeout, then the deletion goes on in the
// background until it succeeds or the Session closes), and nothing it started can take
// the lock later. Errors wrap:
//   - *BusyError (ErrBusy and context.DeadlineExceeded) when the wait ran out while
//     another claim held the lock;
//   - ErrLost when the session ended while waiting, or the claim node was deleted;
//   - ErrNoSession when the connection had no session during the wait;
//   - the context's error when ctx was cancelled;
//   - ErrClosed when the Session is closed.
//
// Use IsTransient to tell the errors that are worth a retry later.
func (l *Locker) Acquire(ctx context.Context, cluster, eventID string, opts ...AcquireOption) (_ *Held, err error) {
	start := time.Now()
	defer func() {
		if err != nil {
			err = mark(fmt.Errorf("acquire lock for cluster %s: %w", cluster, err))
		}
	}()
	if err := checkName(cluster); err != nil {
		return nil, fmt.Errorf("cluster name %q: %w", cluster, err)
	}
	wctx, cancel := waitContext(ctx, l.cfg.Wait, opts)
	defer cancel()

	g, err := l.sess.Wait(wctx)
	if err != nil {
		return nil, err
	}
	a := &attempt{
		l: l, g: g, cluster: cluster, event: eventID,
		c: newClaim(l.Path(cluster)),
		logger: l.logger.With(zap.String("cluster", cluster), zap.String("event", eventID),
			zap.String("session", g.String())),
	}
	acquired := false
	defer func() {
		// Every exit but success, a panic included.
		if !acquired {
			a.abandon()
		}
	}()
	h, err := a.run(wctx)
	if err != nil {
		return nil, a.explain(wctx, start, err)
	}
	acquired = true
	a.logger.Info("lock acquired", zap.String("node", h.node), zap.Duration("waited", time.Since(start)))
	return h, nil
}

// Do runs fn under the lock of cluster: it acquires the lock, runs fn with a context that
// is cancelled when ctx is or when the lock is lost (context.Cause says why), and releases
// the lock when fn returns or panics. fn must stop writing once its context is done.
func (l *Locker) Do(ctx context.Context, cluster, eventID string, fn func(context.Context, *Held) error, opts ...AcquireOption) (err error) {
	h, err := l.Acquire(ctx, cluster, eventID, opts...)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.CleanupTimeout)
		defer cancel()
		if rerr := h.Release(rctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.Context(), func() { cancel(context.Cause(h.Context())) })
	defer stop()
	return fn(fctx, h)
}

// Holder returns who holds the lock of cluster, or nil when nobody does.
func (l *Locker) Holder(ctx context.Context, cluster string) (_ *Holder, err error) {
	defer func() { err = mark(err) }()
	if err := checkName(cluster); err != nil {
		return nil, fmt.Errorf("lock holder of cluster %q: %w", cluster, err)
	}
	dir := l.Path(cluster)
	for {
		children, err := call(ctx, nil, func() ([]string, error) {
			ch, _, err := l.conn.Children(dir)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("lock holder of cluster %s: %w", cluster, err)
		}
		claims := sortedClaims(children)
		if len(claims) == 0 {
			return nil, nil
		}
		node := dir + "/" + claims[0].name
		data, err := call(ctx, nil, func() ([]byte, error) {
			d, _, err := l.conn.Get(node)
			return d, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("lock holder of cluster %s: %w", cluster, err)
		}
		h := parseHolder(node, data)
		return &h, nil
	}
}

// attempt is one Acquire.
type attempt struct {
	l       *Locker
	g       *Generation
	cluster string
	event   string
	c       *claim
	logger  *zap.Logger

	node    string  // path of the claim's node once known
	holder  *Holder // the holder last seen while waiting
	claimed time.Time
}

// run makes the claim and waits until it is the lowest.
func (a *attempt) run(ctx context.Context) (*Held, error) {
	l, g := a.l, a.g
	if err := a.create(ctx); err != nil {
		return nil, err
	}
	bo := newBackoff()
	waited := false
	for {
		children, err := call(ctx, g, func() ([]string, error) {
			ch, _, err := l.conn.Children(a.c.dir)
			return ch, err
		})
		if err != nil {
			if retryableZK(err) && !errors.Is(err, ErrLost) {
				if err := pause(ctx, g, bo.NextBackOff()); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		claims := sortedClaims(children)
		mine := a.c.mine(claims)
		if len(mine) == 0 {
			return nil, fmt.Errorf("%w: claim node %s was deleted", ErrLost, a.node)
		}
		me := mine[0]
		a.node = a.c.dir + "/" + me.name
		if claims[0].name == me.name {
			return a.take(ctx, waited)
		}
		waited = true
		// Wait for the claim just before this one: when it goes, this one may be the
		// lowest (or wait for the one before that). No herd: each waits on one node.
		var pred claimName
		for _, cl := range claims {
			if cl.seq < me.seq || (cl.seq == me.seq && cl.name < me.name) {
				pred = cl
			}
		}
		predPath := a.c.dir + "/" + pred.name
		type watched struct {
			data []byte
			ch   <-chan zk.Event
		}
		w, err := call(ctx, g, func() (watched, error) {
			d, _, ch, err := l.conn.GetW(predPath)
			return watched{d, ch}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			if retryableZK(err) && !errors.Is(err, ErrLost) {
				if err := pause(ctx, g, bo.NextBackOff()); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		bo.Reset()
		if pred.name == claims[0].name {
			h := parseHolder(predPath, w.data)
			a.holder = &h
		} else if a.holder == nil || a.holder.Node != a.c.dir+"/"+claims[0].name {
			a.readHolder(ctx, a.c.dir+"/"+claims[0].name)
		}
		a.logger.Debug("lock busy; waiting", zap.String("node", a.node), zap.String("predecessor", pred.name))
		select {
		case <-w.ch: // deleted, changed, or not watched any more: look again
		case <-g.Expired():
			return nil, lostSession(g)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// create makes the claim's node. A create whose reply is lost (the connection dropped)
// may have happened: the node is then looked for by the claim's guid.
func (a *attempt) create(ctx context.Context) error {
	l, g, c := a.l, a.g, a.c
	a.claimed = time.Now().UTC().Truncate(time.Millisecond)
	data, err := json.Marshal(Holder{Worker: l.cfg.Worker, Event: a.event, ClaimedAt: a.claimed})
	if err != nil {
		return err
	}
	bo := newBackoff()
	for parents := 0; ; {
		c.creating.Add(1)
		done := make(chan result[string], 1)
		go func() {
			defer c.creating.Done()
			p, err := l.conn.Create(c.prefix(), data, zk.FlagEphemeral|zk.FlagSequence, l.cfg.ACL)
			done <- result[string]{p, err}
		}()
		var r result[string]
		select {
		case r = <-done:
			if g.Err() != nil {
				return lostSession(g)
			}
		case <-g.Expired():
			return lostSession(g)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		switch {
		case r.err == nil:
			a.node = r.v
			a.logger.Debug("lock claim created", zap.String("node", a.node))
			return nil
		case errors.Is(r.err, zk.ErrNoNode) && parents < 3:
			parents++
			if err := a.ensureDir(ctx); err != nil {
				return err
			}
		case retryableZK(r.err):
			// The create may have happened: look for the node by the claim's guid.
			if err := pause(ctx, g, bo.NextBackOff()); err != nil {
				return err
			}
			children, err := call(ctx, g, func() ([]string, error) {
				ch, _, err := l.conn.Children(c.dir)
				return ch, err
			})
			switch {
			case err == nil:
				if mine := c.mine(sortedClaims(children)); len(mine) > 0 {
					a.node = c.dir + "/" + mine[0].name
					return nil
				}
			case errors.Is(err, zk.ErrNoNode):
			case retryableZK(err) && !errors.Is(err, ErrLost):
			default:
				return err
			}
		default:
			return fmt.Errorf("create claim under %s: %w", c.dir, r.err)
		}
	}
}

// ensureDir creates the lock node and its parents: those above Root with ParentACL,
// Root and the lock node with ACL.
func (a *attempt) ensureDir(ctx context.Context) error {
	p := ""
	for seg := range strings.SplitSeq(strings.TrimPrefix(a.c.dir, "/"), "/") {
		p += "/" + seg
		acl := a.l.cfg.ACL
		if len(p) < len(a.l.cfg.Root) {
			acl = a.l.cfg.ParentACL
		}
		_, err := call(ctx, a.g, func() (string, error) {
			return a.l.conn.Create(p, nil, zk.FlagPersistent, acl)
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// readHolder reads the data of the holding claim, for the message of a busy error. A read
// that fails leaves what was known.
func (a *attempt) readHolder(ctx context.Context, node string) {
	data, err := call(ctx, a.g, func() ([]byte, error) {
		d, _, err := a.l.conn.Get(node)
		return d, err
	})
	if err == nil {
		h := parseHolder(node, data)
		a.holder = &h
	}
}

// take turns the lowest claim into a Held. A claim that waited records the time it took the
// lock in its node, which also checks that the node is still there and gives the version
// the fence checks. One that was the lowest at once (the usual case: a cluster's events
// run one at a time) saves that write, a ZooKeeper transaction: its node, just listed,
// still has the version it was created with, and its holder is since its claim.
func (a *attempt) take(ctx context.Context, waited bool) (*Held, error) {
	a.holder = nil // nobody else holds it: an error now is no busy lock
	info := Holder{Worker: a.l.cfg.Worker, Event: a.event, ClaimedAt: a.claimed, Node: a.node}
	if !waited {
		return newHeld(a.l, a.g, a.cluster, a.c, a.node, 0, info, ctx), nil
	}
	info.AcquiredAt = time.Now().UTC().Truncate(time.Millisecond)
	data, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	stat, err := call(ctx, a.g, func() (*zk.Stat, error) {
		return a.l.conn.Set(a.node, data, -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("%w: claim node %s was deleted", ErrLost, a.node)
	}
	if err != nil {
		return nil, fmt.Errorf("record acquisition in %s: %w", a.node, err)
	}
	return newHeld(a.l, a.g, a.cluster, a.c, a.node, stat.Version, info, ctx), nil
}

// abandon removes the claim of an Acquire that failed, waiting for it CleanupTimeout at
// most.
func (a *attempt) abandon() {
	t := time.NewTimer(a.l.cfg.CleanupTimeout)
	defer t.Stop()
	select {
	case <-a.l.remove(a.c):
		if a.c.removeErr != nil {
			a.logger.Error("claim of a failed acquire not removed", zap.Error(a.c.removeErr))
		}
	case <-t.C:
		a.logger.Warn("claim of a failed acquire not removed yet; removal goes on in the background",
			zap.String("lock", a.c.dir), zap.Duration("waited", a.l.cfg.CleanupTimeout))
	}
}

// explain turns the error that ended the wait into what Acquire returns.
func (a *attempt) explain(ctx context.Context, start time.Time, err error) error {
	switch {
	case errors.Is(err, ErrLost):
		a.logger.Warn("lock claim lost while waiting", zap.Error(err))
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		waited := time.Since(start).Round(time.Millisecond)
		if a.holder != nil {
			a.logger.Info("lock busy", zap.String("holder", a.holder.Worker),
				zap.String("holder_event", a.holder.Event), zap.Duration("waited", waited))
			return &BusyError{Holder: *a.holder, cause: err}
		}
		return fmt.Errorf("gave up after %s: %w", waited, err)
	}
	return err
}

func parseHolder(node string, data []byte) Holder {
	var h Holder
	if err := json.Unmarshal(data, &h); err != nil {
		h = Holder{}
	}
	h.Node = node
	return h
}

// checkPath checks an absolute znode path other than "/".
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case p[0] != '/':
		return errors.New("must start with '/'")
	case p == "/":
		return errors.New("must name a znode below '/'")
	case strings.HasSuffix(p, "/"):
		return errors.New("must not end with '/'")
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if err := checkName(seg); err != nil {
			return err
		}
	}
	return nil
}

// checkName checks one segment of a znode path (a cluster name).
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("empty name")
	case s == "." || s == "..":
		return fmt.Errorf("relative name %q", s)
	case strings.ContainsAny(s, "/\x00"):
		return errors.New("name contains '/' or NUL")
	}
	return nil
}
