package operation

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
)

// Cancelling. An operation-cancel records a request to cancel an event (package cancel);
// the engine, which alone writes to the cluster under its lock, carries it out:
//
//   - an event not begun (waiting in the queue, or for the lock) gets the result
//     "cancelled" when its turn comes, without a plan or a write;
//   - an operation that runs is stopped within Config.CancelPoll of the request (its apply's
//     context ends) and rolled back as a final failure is (Task.Rollback): copies in flight
//     cancelled, the partitions not finished back at their replicas and leader before the
//     event, throttles put back; what was finished keeps its new state. Its result is
//     "cancelled", listing what remains changed;
//   - an operation left in the journal by a worker that is gone, or by an earlier attempt,
//     is rolled back by whoever takes the lock next, instead of carried on;
//   - an operation whose outcome is done is not undone (its result is the true one);
//     work the cluster cannot cancel (Kafka before 2.4) is waited out, as a rollback does.

// Cancels says which events are cancelled (package cancel implements it): the port the
// pipeline uses too, for the events it holds.
type Cancels = pipeline.Cancels

// DefaultCancelPoll is how often a running operation looks for a request to cancel it.
const DefaultCancelPoll = time.Second

// cancelledError is the failure of an operation that was cancelled.
type cancelledError struct{ why string }

func (c *cancelledError) Error() string { return "cancelled: " + c.why }

// IsCancelled reports whether err is an operation's cancellation.
func IsCancelled(err error) bool {
	var c *cancelledError
	return errors.As(err, &c)
}

// cancelled asks Config.Cancels whether ev is cancelled; a failed read is logged and
// reads as not cancelled (the next look asks again; a write is never made on the strength
// of a read that failed, only stopped by one that succeeded).
func (e *Engine) cancelled(ctx context.Context, ev *events.Event) string {
	if e.cfg.Cancels == nil {
		return ""
	}
	why, err := e.cfg.Cancels.Cancelled(ctx, ev.Cluster, ev.ID)
	if err != nil {
		if ctx.Err() == nil {
			e.eventLog(ev).Debug("look for a request to cancel the event", zap.Error(err))
		}
		return ""
	}
	return why
}

// watchCancel returns a context for a run's apply that ends, with a *cancelledError as
// its cause, as soon as a request to cancel ev is seen; stop ends the watch.
func (e *Engine) watchCancel(ctx context.Context, ev *events.Event) (actx context.Context, stop func()) {
	if e.cfg.Cancels == nil {
		return ctx, func() {}
	}
	actx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(e.cfg.CancelPoll)
		defer t.Stop()
		for {
			if why := e.cancelled(actx, ev); why != "" {
				e.eventLog(ev).Warn("operation cancelled: stopping it and rolling back what is not finished", zap.String("why", why))
				cancel(&cancelledError{why: why})
				return
			}
			select {
			case <-actx.Done():
				return
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return actx, func() {
		close(done)
		<-finished
	}
}

// applyCancellable runs the task's apply under watchCancel: an apply stopped by a request
// to cancel returns the cancellation.
func (e *Engine) applyCancellable(ctx context.Context, r *Run, t Task) error {
	actx, stop := e.watchCancel(ctx, r.Event)
	err := t.Apply(actx, r)
	stop()
	var c *cancelledError
	if cause := context.Cause(actx); err != nil && errors.As(cause, &c) {
		return c
	}
	return err
}
