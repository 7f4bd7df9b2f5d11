// Package retry decides whether a failure is transient (worth trying again: a controller
// moving, a timeout, a lock held by another worker, a reassignment in progress) or permanent
// (the request cannot succeed as it is), and holds the small backoff loop used inside
// handlers. A transient failure that outlasts the handler's own retries becomes a negative
// acknowledgement with a delay, so the event is tried again later, possibly by another
// worker.
//
// # Contract: each package marks its own transient errors, retry only asks
//
// retry knows no other package's errors (it imports neither internal/kafka nor
// internal/locks nor their clients). An error is transient when any error in its tree
// (the chain of Unwrap() error, and every branch of Unwrap() []error, as errors.Is walks
// it) has the method
//
//	Transient() bool
//
// and it returns true. So a package that knows that one of its errors is worth a retry
// says so on the error itself: a sentinel of a type whose Transient returns true, or a
// wrapper that adds the method around a cause (keeping errors.Is and errors.As of the
// cause working through Unwrap). Wrapping a marked error with fmt.Errorf("...: %w") or
// errors.Join keeps it transient. A Transient method that returns false marks nothing and
// vetoes nothing: another marked error in the tree still makes the whole transient.
// Callers outside such a package mark errors with Transient.
//
// Besides the markers, retry recognises by itself what is transient whatever its source:
// context.Canceled (the worker is stopping, or the lock was lost: someone should do it
// later), context.DeadlineExceeded, and a net.Error whose Timeout() is true.
package retry

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// transient is the marker Transient adds.
type transient struct{ err error }

func (t *transient) Error() string   { return t.err.Error() }
func (t *transient) Unwrap() error   { return t.err }
func (t *transient) Transient() bool { return true }

// Transient marks err as worth retrying; errors.Is and errors.As still see err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transient{err}
}

// marker is what a package's transient errors implement.
type marker interface{ Transient() bool }

// IsTransient reports whether err is worth retrying later: an error in its tree is marked
// transient (see the package documentation), is context.Canceled or
// context.DeadlineExceeded, or is a net.Error that timed out.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return anyInTree(err, func(e error) bool {
		if m, ok := e.(marker); ok && m.Transient() {
			return true
		}
		ne, ok := e.(net.Error)
		return ok && ne.Timeout()
	})
}

// Marked reports whether an error in err's tree carries the transient marker (a Transient
// method that returns true). Packages that mark their own errors use it to mark an error
// once, not at every layer it passes.
func Marked(err error) bool {
	return anyInTree(err, func(e error) bool {
		m, ok := e.(marker)
		return ok && m.Transient()
	})
}

// inFlight is the marker InFlight adds.
type inFlight struct{ err error }

func (f *inFlight) Error() string   { return f.err.Error() }
func (f *inFlight) Unwrap() error   { return f.err }
func (f *inFlight) Transient() bool { return true }
func (f *inFlight) InFlight() bool  { return true }

// InFlight marks err as the failure of an operation left in flight: it is journaled and
// unfinished (or finished, with work it left running still to wait for), and this worker
// cannot carry it further now: its lock is lost, it is stopping, or the result could not
// be stored. The event must be delivered again, even past its last attempt and even when
// its result is stored: the next delivery finishes or rolls the operation back under the
// lock. Such a failure never becomes a final result. InFlight errors are transient.
func InFlight(err error) error {
	if err == nil {
		return nil
	}
	return &inFlight{err}
}

// IsInFlight reports whether err marks an operation left in flight (see InFlight).
func IsInFlight(err error) bool {
	return anyInTree(err, func(e error) bool {
		f, ok := e.(interface{ InFlight() bool })
		return ok && f.InFlight()
	})
}

// anyInTree reports whether f holds for err or any error it wraps, through every branch of
// joined errors. Unlike errors.As it does not stop at the first error of a type: a marker
// that says false does not hide a marked error further down.
func anyInTree(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if anyInTree(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// Do runs op until it succeeds, fails permanently, ctx ends or maxElapsed passes, backing
// off exponentially between transient failures. notify (may be nil) hears each retry.
func Do(ctx context.Context, maxElapsed time.Duration, op func() error, notify func(err error, next time.Duration)) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = maxElapsed
	return backoff.RetryNotify(func() error {
		err := op()
		if err == nil || IsTransient(err) && ctx.Err() == nil {
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(b, ctx), notify)
}

// Delay is how long to wait before the attempt-th delivery of an event whose previous
// attempt failed transiently: 2s, 4s, 8s … capped at 2 minutes.
func Delay(attempt int) time.Duration {
	d := 2 * time.Second
	for i := 1; i < attempt && d < 2*time.Minute; i++ {
		d *= 2
	}
	return min(d, 2*time.Minute)
}
