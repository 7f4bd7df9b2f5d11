package locks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// Claim node names: "_c_<32 hex digits of guid>-lock-<sequence>", the layout of
// go-zookeeper's CreateProtectedEphemeralSequential (and Curator's protected mode). The
// guid lets the creator find its node when the reply to its create was lost.
const (
	protectedPrefix = "_c_"
	claimPrefix     = "lock-"
	guidLen         = 32
)

// Holder is what a claim node says about the claim: who made it and when it took the
// lock. It is the node's data, as JSON.
type Holder struct {
	// Worker is the id of the worker that made the claim.
	Worker string `json:"worker"`
	// Event is the id of the event the worker handles under the lock.
	Event string `json:"event"`
	// AcquiredAt is when the claim took the lock after waiting for it; zero while it
	// waits, and for a claim that took it at once (Since is then ClaimedAt).
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	// ClaimedAt is when the claim was made and began to wait.
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	// Node is the claim node's path (not in the data).
	Node string `json:"-"`
}

// Since is when the holder took the lock, or, if the node does not say, when it claimed it.
func (h Holder) Since() time.Time {
	if !h.AcquiredAt.IsZero() {
		return h.AcquiredAt
	}
	return h.ClaimedAt
}

// claimName is a parsed child of a lock node.
type claimName struct {
	name string
	guid string // "" for a node that is not protected
	seq  int64
}

// parseClaim parses a child of a lock node; ok is false for a node that is no claim.
func parseClaim(name string) (c claimName, ok bool) {
	i := strings.LastIndex(name, claimPrefix)
	if i < 0 {
		return c, false
	}
	digits := name[i+len(claimPrefix):]
	if digits == "" {
		return c, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return c, false
	}
	c = claimName{name: name, seq: seq}
	if strings.HasPrefix(name, protectedPrefix) && i == len(protectedPrefix)+guidLen+1 {
		c.guid = name[len(protectedPrefix) : len(protectedPrefix)+guidLen]
	}
	return c, true
}

// sortedClaims returns the claims among children, lowest sequence (the holder) first.
func sortedClaims(children []string) []claimName {
	claims := make([]claimName, 0, len(children))
	for _, ch := range children {
		if c, ok := parseClaim(ch); ok {
			claims = append(claims, c)
		}
	}
	sort.Slice(claims, func(i, j int) bool {
		if claims[i].seq != claims[j].seq {
			return claims[i].seq < claims[j].seq
		}
		return claims[i].name < claims[j].name
	})
	return claims
}

func newGUID() string {
	var b [guidLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// claim is one Acquire's claim: every node under dir whose name carries guid. Usually one
// node; more only when a create whose reply was lost was tried again.
type claim struct {
	dir  string
	guid string

	creating sync.WaitGroup // create calls still running

	removeOnce sync.Once
	removed    chan struct{} // closed when the claim's nodes are gone
	removeErr  error         // written before removed is closed
}

func newClaim(dir string) *claim {
	return &claim{dir: dir, guid: newGUID(), removed: make(chan struct{})}
}

// prefix is the path to create the claim's ephemeral sequential node with.
func (c *claim) prefix() string {
	return c.dir + "/" + protectedPrefix + c.guid + "-" + claimPrefix
}

// mine returns the claim's nodes among claims.
func (c *claim) mine(claims []claimName) []claimName {
	var out []claimName
	for _, cl := range claims {
		if cl.guid == c.guid {
			out = append(out, cl)
		}
	}
	return out
}

// remove deletes the claim's nodes in the background, once, and returns a channel closed
// when that is done. It waits for running create calls first, then deletes every node of
// the claim, trying again while ZooKeeper cannot be reached, until the nodes are gone,
// a permanent error occurs, or the Session closes (which ends the session and so the
// nodes). It never takes the lock.
func (l *Locker) remove(c *claim) <-chan struct{} {
	c.removeOnce.Do(func() {
		go func() {
			defer close(c.removed)
			created := make(chan struct{})
			go func() {
				c.creating.Wait()
				close(created)
			}()
			select {
			case <-created:
			case <-l.sess.Done():
				return
			}
			bo := newBackoff()
			for {
				err := l.deleteClaim(c)
				if err == nil {
					return
				}
				if !retryableZK(err) {
					c.removeErr = fmt.Errorf("remove claim %s/%s%s-*: %w", c.dir, protectedPrefix, c.guid, err)
					l.logger.Error("claim not removed", zap.String("lock", c.dir), zap.Error(c.removeErr))
					return
				}
				l.logger.Debug("claim removal failed; trying again", zap.String("lock", c.dir), zap.Error(err))
				t := time.NewTimer(bo.NextBackOff())
				select {
				case <-t.C:
				case <-l.sess.Done():
					t.Stop()
					return
				}
			}
		}()
	})
	return c.removed
}

// deleteClaim deletes every node of the claim.
func (l *Locker) deleteClaim(c *claim) error {
	children, _, err := l.conn.Children(c.dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range c.mine(sortedClaims(children)) {
		if err := l.conn.Delete(c.dir+"/"+n.name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		l.logger.Debug("claim node deleted", zap.String("node", c.dir+"/"+n.name))
	}
	return nil
}

// result is the outcome of a blocking call.
type result[T any] struct {
	v   T
	err error
}

// call runs fn, a blocking go-zookeeper call (which takes no context), and waits for it no
// longer than ctx allows and g lives (g may be nil). A call given up on finishes in the
// background: go-zookeeper answers every request, at the latest when the connection
// closes. Only reads, deletes and fenced writes are run this way, whose late completion is
// harmless; creates of claims are tracked by the claim. When g ended meanwhile, the result
// is dropped: a reply may come from the next session.
func call[T any](ctx context.Context, g *Generation, fn func() (T, error)) (T, error) {
	var zero T
	ch := make(chan result[T], 1)
	go func() {
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	var expired <-chan struct{}
	if g != nil {
		expired = g.Expired()
	}
	select {
	case r := <-ch:
		if g != nil && g.Err() != nil {
			return zero, lostSession(g)
		}
		return r.v, r.err
	case <-expired:
		return zero, lostSession(g)
	case <-ctx.Done():
		return zero, context.Cause(ctx)
	}
}

func lostSession(g *Generation) error {
	return fmt.Errorf("%w: %w", ErrLost, g.Err())
}

// pause waits before a retry, as long as ctx allows and g lives.
func pause(ctx context.Context, g *Generation, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-g.Expired():
		return lostSession(g)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0 // callers bound the retries
	return b
}
