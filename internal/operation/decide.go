package operation

import "github.com/kafkamender/kafkamender/internal/journal"

// Facts are what decides what to do with a cluster's journal entry: read under the
// cluster's lock when a delivery takes it, and again when the run of an operation fails.
type Facts struct {
	// Step is the entry's step: "" when the cluster has no entry, journal.StepClosed when
	// its last operation is over.
	Step journal.Step
	// Ours: the entry is this delivery's event's (else another event's: an orphan whose
	// holder is gone, since this delivery holds the lock).
	Ours bool
	// Stored: the entry's event has a stored result.
	Stored bool
	// Held: the delivery holds the cluster's lock (the lock may be lost at any time).
	Held bool
	// Stopping: the worker is stopping (its delivery's context ended).
	Stopping bool
	// Final: a transient failure of the entry's operation now is final (this delivery is
	// the event's last attempt; for another event's orphan, this delivery's last attempt
	// too: it was tried once per delivery).
	Final bool
	// Abandoning: the event was delivered more often than allowed and is given up on; its
	// operation must not go on.
	Abandoning bool
	// Rebuilt: the entry's operation could be rebuilt from its event to be carried on (the
	// request decodes and names a cluster served here). When not, it can only be verified
	// or rolled back, from the entry alone.
	Rebuilt bool
	// Failed is how the run of the entry's operation just failed; FailedNone when no run
	// failed (the lock was just taken).
	Failed Failure
}

// Failure classifies the failure of a run.
type Failure int

const (
	FailedNone      Failure = iota
	FailedTransient         // worth trying again (a timeout, a controller moving, a read that failed)
	FailedPermanent         // cannot succeed as it is (a rejection, the operation's timeout)
)

// Action is what to do with the entry.
type Action int

const (
	// Leave: write nothing more. A failure is left for the next delivery, which decides
	// again under the lock: the event must be delivered again, even past its last attempt.
	Leave Action = iota
	// Fresh: no operation is in hand: run this event (its entry, once journaled, begins
	// over a closed one).
	Fresh
	// Resume: carry the operation on from wherever the cluster stands, verify it, publish
	// its result, close the entry.
	Resume
	// Verify: the operation is done: verify it with a fresh read, publish its result,
	// close the entry.
	Verify
	// RollBack: undo what is half-done, publish a failed result with the changes that
	// remain, close the entry (or await what the cluster cannot cancel).
	RollBack
	// Await: the result is stored; the operation left work running that the cluster cannot
	// cancel: wait for it to end, restore the throttles it needs, close the entry.
	Await
	// Clean: the result is stored, but the operation was left half-done (its holder gave
	// up without finishing): undo what is half-done, close the entry; no result.
	Clean
	// Close: the result is stored and the operation is over: close the entry.
	Close
	// Replay: this event's result is stored and nothing of it is left: answer with it.
	Replay
)

var actionNames = [...]string{"leave", "fresh", "resume", "verify", "roll back", "await", "clean", "close", "replay"}

func (a Action) String() string { return actionNames[a] }

// Decide is what to do with a cluster's journal entry (see Facts and Action). It is the
// one place the engine's crash-safety rules live:
//
//   - Nothing is written without the lock, and an operation journaled and unfinished is
//     never finalized without it: a failure then leaves it for the next delivery.
//   - A transient failure is tried again on the next delivery, from the journal; only the
//     last attempt rolls back, and only under the lock.
//   - An operation whose outcome is done is never rolled back: a missing result is
//     published from a fresh read, however often its event was delivered.
//   - Another event's orphan is resolved (finished, rolled back or closed) before this
//     event runs; one that cannot be rebuilt is rolled back from its entry alone, so that
//     the cluster's queue never stops behind it.
//   - A stored result is never replaced; an open operation without one gets one.
func Decide(f Facts) Action {
	if !f.Held || f.Stopping && f.Failed != FailedNone {
		return Leave
	}
	open := f.Step != "" && f.Step != journal.StepClosed
	if f.Failed != FailedNone {
		switch {
		case !open:
			return Leave // nothing journaled: the delivery's error says it all
		case f.Step == journal.StepDone:
			return Leave // the outcome is done: only its result is missing
		case f.Failed == FailedTransient && !f.Final:
			return Leave
		case f.Stored:
			// Undoing what an operation left after its result failed for good: close the
			// entry, so that the cluster's events go on (what is left is logged).
			return Close
		}
		return RollBack
	}
	switch f.Step {
	case "", journal.StepClosed:
		if f.Ours && f.Stored {
			return Replay
		}
		return Fresh
	case journal.StepDone:
		if f.Stored {
			return Close
		}
		return Verify
	case journal.StepAwaiting:
		if f.Stored {
			return Await
		}
		return RollBack // the rollback that decided to await did not publish: again
	case journal.StepRollingBack:
		if f.Stored {
			return Clean
		}
		return RollBack
	}
	switch {
	case f.Stored:
		return Clean
	case f.Abandoning && f.Ours, !f.Rebuilt:
		return RollBack
	}
	return Resume
}
