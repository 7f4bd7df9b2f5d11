package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// Sentinel errors. Errors returned by this package wrap them (with %w) together with the
// cluster and the ZooKeeper session they concern; test them with errors.Is.
//
// The transient ones (ErrBusy, ErrLost, ErrNoSession, ErrDisconnected) carry the marker
// package retry looks for (a Transient method that returns true), and so does every
// error this package returns that IsTransient accepts (a ZooKeeper connection error, a
// timeout): retry.IsTransient needs no knowledge of this package.
var (
	// ErrBusy: Acquire gave up (its wait timed out) while another claim held the lock.
	// The error is a *BusyError, which names the holder.
	ErrBusy error = retry.Transient(errors.New("lock busy"))
	// ErrLost: the lock, or the claim that waited for it, is gone: its ZooKeeper session
	// expired, was closed, or was cut off for longer than SessionConfig.LossAfterDisconnect,
	// or its claim node was deleted. A Held that reports it must not be used again.
	ErrLost error = retry.Transient(errors.New("lock lost"))
	// ErrReleased: the Held was released; it is the cause of its Context.
	ErrReleased = errors.New("lock released")
	// ErrNoSession: the lock's server cannot be used at the moment: the ZooKeeper
	// connection has no session, or NATS (the nats lock backend) does not answer. The
	// wrapping error names which.
	ErrNoSession error = retry.Transient(errors.New("no session with the lock's server"))
	// ErrDisconnected: the connection was down for longer than
	// SessionConfig.LossAfterDisconnect, so its session is treated as expired.
	ErrDisconnected error = retry.Transient(errors.New("disconnected from zookeeper for too long"))
	// ErrClosed: the Session was closed.
	ErrClosed = errors.New("zookeeper session closed")
)

// BusyError is the error of an Acquire that timed out while another claim held the lock.
// It wraps ErrBusy and the reason the wait ended (context.DeadlineExceeded).
type BusyError struct {
	// Holder is who held the lock when the wait ended, as its claim node says.
	Holder Holder
	// cause is why the wait ended.
	cause error
}

func (e *BusyError) Error() string {
	h := e.Holder
	if h.Worker == "" && h.Event == "" {
		return fmt.Sprintf("%v: held by claim %s", ErrBusy, h.Node)
	}
	msg := fmt.Sprintf("%v: held by worker %s for event %s", ErrBusy, h.Worker, h.Event)
	if since := h.Since(); !since.IsZero() {
		msg += " since " + since.UTC().Format(time.RFC3339)
	}
	return msg
}

// Unwrap returns ErrBusy and the reason the wait ended.
func (e *BusyError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrBusy}
	}
	return []error{ErrBusy, e.cause}
}

// mark adds the transient marker to an error that IsTransient accepts and that has no
// marker yet. Exported functions pass their errors through it, so that package retry
// recognises them without knowing this package.
func mark(err error) error {
	if err == nil || !IsTransient(err) || retry.Marked(err) {
		return err
	}
	return retry.Transient(err)
}

// IsTransient reports whether err is worth retrying later, possibly on another worker:
// the lock was busy or lost, there was no session, ZooKeeper could not be reached, or a
// wait timed out. A cancelled context, a closed Session and invalid arguments are not.
// Every error of this package that it accepts also carries the marker package retry
// looks for, so retry.IsTransient accepts it too.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	for _, target := range []error{
		ErrBusy, ErrLost, ErrNoSession, ErrDisconnected,
		zk.ErrSessionExpired, zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrSessionMoved,
		context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// retryableZK reports whether a ZooKeeper call that failed with err may succeed when
// tried again on the same connection: the connection dropped or the session changed.
func retryableZK(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, zk.ErrClosing)
}

// TTLMismatchError: the lock bucket expires entries after BucketTTL, and this worker's
// TTL (lock.nats.ttl) differs. Every worker of a fleet must use the bucket's: a holder
// that renewed on a longer TTL than the bucket's could lose its entry, and the lock to
// another worker, while it still counts on it. It is transient, so that events wait for
// the configuration to be fixed rather than fail.
type TTLMismatchError struct {
	Bucket         string
	BucketTTL, TTL time.Duration
}

func (e *TTLMismatchError) Error() string {
	return fmt.Sprintf("lock bucket %s expires locks after %s but this worker's lock.nats.ttl is %s: every worker of the fleet must use the same ttl "+
		"(to change it, stop the fleet and delete the bucket: nats kv del %s)", e.Bucket, e.BucketTTL, e.TTL, e.Bucket)
}

// Unwrap marks the error transient.
func (e *TTLMismatchError) Unwrap() error { return errTTLMismatch }

var errTTLMismatch = retry.Transient(errors.New("lock ttl mismatch"))
