package operation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/retry"
)

// CleanupTimeout bounds the writes of a rollback, a throttle restore and the publication of
// a result, which run after the operation's own context may have ended (its timeout).
const CleanupTimeout = 30 * time.Second

// Run is one event's operation under the cluster's lock, as its task sees it: the event,
// its result, its journal entry once journaled, and the lease every cluster write is made
// under.
type Run struct {
	// Event is the operation's event; its Payload is nil when its journaled request no
	// longer decodes (the task then verifies or rolls back from the entry alone).
	Event *events.Event
	// Result is the event's result being filled.
	Result *events.Result
	// Op is the journal entry; nil until the plan is journaled.
	Op  *journal.Op
	Log *zap.Logger

	floor []model.Seen // what the cluster's last operation left, before the entry has its own
	lease Lease
	ctx   context.Context // the delivery's context, also ended when the lock is lost
	deliv Delivery
	hook  func(string)
	final bool     // a transient failure now is final
	pre   Prefetch // the plan's first read, started as the lock was asked for (Prefetcher)
}

// Prefetched hands over the read the engine started for the plan of a fresh run (see
// Prefetcher), once: nil when there is none, or it was handed over already.
func (r *Run) Prefetched() Prefetch {
	p := r.pre
	r.pre = nil
	return p
}

// Entry is the journal entry (the run must be journaled).
func (r *Run) Entry() *journal.Entry { return &r.Op.Entry }

// Save records the step reached, with whatever else changed in the entry.
func (r *Run) Save(ctx context.Context, step journal.Step) error {
	r.Op.Entry.Step = step
	return r.Op.Save(ctx)
}

// Step marks a named step of the operation (the Step* constants): fault tests stop or
// kill a worker there.
func (r *Run) Step(name string) {
	r.Log.Debug("step", zap.String("step", name))
	r.hook(name)
}

// Progress reports progress (its ID is set to the run's event) and keeps the delivery
// alive.
func (r *Run) Progress(p events.Progress) {
	p.ID = r.Result.ID
	r.deliv.Progress(p)
}

// Lease is the lock the run holds: ZooKeeper writes are fenced by it (a task asks it for
// what its backend needs, e.g. kafka.FencedWriter).
func (r *Run) Lease() Lease { return r.lease }

// Alive is nil while the lock is held, else why it is not.
func (r *Run) Alive() error { return r.lease.Err() }

// Floor is what the cluster's previous operation left on the partitions it changed: reads
// of the cluster must show at least that (a broker's metadata lags the controller).
func (r *Run) Floor() []model.Seen {
	if r.Op != nil {
		return r.Op.Entry.Floor
	}
	return r.floor
}

// Cleanup returns a context for writes that must happen after the operation's context
// ended (a timeout's rollback, the result): it lives while the lock is held, at most
// CleanupTimeout.
func (r *Run) Cleanup() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.lease.Context(), CleanupTimeout)
}

func (r *Run) stopping() bool { return r.ctx.Err() != nil && r.lease.Err() == nil }

// Conclude sets the result's status from what was verified (ok planned partitions shown as
// planned) and what was skipped.
func Conclude(res *events.Result, ok int) {
	switch {
	case len(res.Skipped) == 0 && ok == 0 && len(res.Changes) == 0:
		res.Status = events.StatusNoop
	case len(res.Skipped) == 0:
		res.Status = events.StatusSucceeded
	case ok > 0 || len(res.Noop) > 0:
		res.Status = events.StatusPartial
	default:
		res.Status = events.StatusFailed
		var reasons []string
		for _, s := range res.Skipped {
			reasons = append(reasons, s.TopicPartition.String()+": "+s.Reason)
		}
		res.Error = "nothing could be changed: " + strings.Join(reasons, "; ")
	}
}

// Reject is a rejection: the request cannot be carried out as asked, and nothing was
// changed (result "rejected").
func Reject(format string, args ...any) error {
	return &rejection{fmt.Sprintf(format, args...)}
}

type rejection struct{ reason string }

func (r *rejection) Error() string   { return r.reason }
func (r *rejection) Rejection() bool { return true }

// IsRejection reports whether an error in err's chain is a rejection: it has a method
// Rejection() bool that returns true (Reject's, plan.RejectError, guardrails.Violation).
func IsRejection(err error) bool {
	var r interface{ Rejection() bool }
	return errors.As(err, &r) && r.Rejection()
}

// answer turns a rejection into a rejected result; other errors stay errors.
func answer(res *events.Result, err error) (*events.Result, error) {
	if IsRejection(err) {
		res.Status, res.Error = events.StatusRejected, err.Error()
		return res, nil
	}
	return res, err
}

// failure classifies the error of a run.
func failure(err error) Failure {
	switch {
	case err == nil:
		return FailedNone
	case retry.IsTransient(err) && !IsRejection(err):
		return FailedTransient
	}
	return FailedPermanent
}
