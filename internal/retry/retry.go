// Package retry is kafkamender's one place that decides which failures are transient (worth
// trying again: a controller moving, a timeout, a lock held by another worker, a
// reassignment in progress) and which are permanent (the request cannot succeed as it is),
// and the small backoff loop used inside handlers. A transient failure that outlasts the
// handler's own retries becomes a negative acknowledgement with a delay, so the event is
// tried again later, possibly by another worker.
package retry

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
)

type transient struct{ err error }

func (t *transient) Error() string { return t.err.Error() }
func (t *transient) Unwrap() error { return t.err }

// Transient marks err as worth retrying.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transient{err}
}

// IsTransient reports whether err is worth retrying later.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var t *transient
	var ne net.Error
	switch {
	case errors.As(err, &t):
		return true
	case errors.Is(err, context.Canceled):
		// The worker is stopping (or the lock was lost): someone should do it later.
		return true
	case errors.Is(err, kafka.ErrReassignmentInProgress), errors.Is(err, kafka.ErrNoController):
		return true
	case locks.IsTransient(err):
		return true
	case kerr.IsRetriable(err), errors.Is(err, kerr.NotController), errors.Is(err, kerr.RequestTimedOut):
		return true
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrClosing):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return true
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
