package operation_test

import (
	"testing"

	"github.com/kafkamender/kafkamender/internal/journal"
	"github.com/kafkamender/kafkamender/internal/operation"
)

var (
	allSteps = []journal.Step{"", journal.StepClosed, journal.StepPlanned, journal.StepReordering, journal.StepElecting,
		journal.StepThrottling, journal.StepCopying, journal.StepRollingBack, journal.StepDone, journal.StepAwaiting}
	allFailures = []operation.Failure{operation.FailedNone, operation.FailedTransient, operation.FailedPermanent}
)

// every calls f with every combination of facts.
func every(f func(operation.Facts)) {
	bools := []bool{false, true}
	for _, step := range allSteps {
		for _, ours := range bools {
			for _, stored := range bools {
				for _, held := range bools {
					for _, stopping := range bools {
						for _, final := range bools {
							for _, abandoning := range bools {
								for _, rebuilt := range bools {
									for _, failed := range allFailures {
										f(operation.Facts{Step: step, Ours: ours, Stored: stored, Held: held, Stopping: stopping, Final: final,
											Abandoning: abandoning, Rebuilt: rebuilt, Failed: failed})
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

func open(s journal.Step) bool { return s != "" && s != journal.StepClosed }

// The rules of operation.Decide hold for every combination of facts (9,216 of them): the promises the
// engine makes, each checked everywhere.
func TestDecideKeepsItsPromises(t *testing.T) {
	rules := []struct {
		name  string
		holds func(operation.Facts, operation.Action) bool
	}{
		{"nothing is written without the lock", func(f operation.Facts, a operation.Action) bool { return f.Held || a == operation.Leave }},
		{"a failure while stopping leaves the operation for the next holder", func(f operation.Facts, a operation.Action) bool {
			return !(f.Stopping && f.Failed != operation.FailedNone) || a == operation.Leave
		}},
		{"a done operation is never rolled back", func(f operation.Facts, a operation.Action) bool {
			return f.Step != journal.StepDone || a != operation.RollBack
		}},
		{"a transient failure before the last attempt is retried, not rolled back", func(f operation.Facts, a operation.Action) bool {
			return f.Failed != operation.FailedTransient || f.Final || a == operation.Leave
		}},
		{"only an open entry is carried, verified, rolled back, awaited, cleaned or closed", func(f operation.Facts, a operation.Action) bool {
			return open(f.Step) || a == operation.Leave || a == operation.Fresh || a == operation.Replay
		}},
		{"an event runs afresh only when no operation is open", func(f operation.Facts, a operation.Action) bool { return a != operation.Fresh || !open(f.Step) }},
		{"a stored result is never replaced", func(f operation.Facts, a operation.Action) bool {
			return !(f.Stored && open(f.Step)) || a == operation.Leave || a == operation.Await || a == operation.Clean || a == operation.Close
		}},
		{"an open operation without a result gets one", func(f operation.Facts, a operation.Action) bool {
			return !(open(f.Step) && !f.Stored) || a == operation.Leave || a == operation.Resume || a == operation.Verify || a == operation.RollBack
		}},
		{"an abandoned event's operation does not go on", func(f operation.Facts, a operation.Action) bool {
			return !(f.Abandoning && f.Ours) || a != operation.Resume
		}},
		{"an operation that cannot be rebuilt is not carried on", func(f operation.Facts, a operation.Action) bool { return f.Rebuilt || a != operation.Resume }},
		{"a replay answers this event's own stored result only", func(f operation.Facts, a operation.Action) bool { return a != operation.Replay || f.Ours && f.Stored }},
	}
	n := 0
	every(func(f operation.Facts) {
		n++
		a := operation.Decide(f)
		for _, r := range rules {
			if !r.holds(f, a) {
				t.Errorf("%s: %+v decides %s", r.name, f, a)
			}
		}
	})
	if n != len(allSteps)*2*2*2*2*2*2*2*len(allFailures) {
		t.Fatalf("checked %d combinations", n)
	}
}

// What operation.Decide does, case by case: every combination that matters, with its reason.
func TestDecide(t *testing.T) {
	held := func(f operation.Facts) operation.Facts { f.Held = true; return f }
	for _, tc := range []struct {
		why  string
		f    operation.Facts
		want operation.Action
	}{
		// The lock just taken, no failure.
		{"no entry: the event runs", held(operation.Facts{}), operation.Fresh},
		{"a closed entry of another event: the event runs over it", held(operation.Facts{Step: journal.StepClosed}), operation.Fresh},
		{"this event's entry closed, its result stored: replay", held(operation.Facts{Step: journal.StepClosed, Ours: true, Stored: true}), operation.Replay},
		{"no entry, this event's result stored (another worker finished it): replay", held(operation.Facts{Ours: true, Stored: true}), operation.Replay},
		{"this event's entry, unfinished: resume", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true}), operation.Resume},
		{"this event's entry, unfinished, last attempt: resume (only a failure now is final)", held(operation.Facts{Step: journal.StepPlanned, Ours: true, Rebuilt: true, Final: true}), operation.Resume},
		{"this event's entry, done, no result (publish failed): verify and publish", held(operation.Facts{Step: journal.StepDone, Ours: true}), operation.Verify},
		{"this event's entry, done, result stored (close failed): close", held(operation.Facts{Step: journal.StepDone, Ours: true, Stored: true}), operation.Close},
		{"this event's entry awaits copies, result stored: await", held(operation.Facts{Step: journal.StepAwaiting, Ours: true, Stored: true}), operation.Await},
		{"this event's entry awaits copies, result not stored: roll back (again) and publish", held(operation.Facts{Step: journal.StepAwaiting, Ours: true, Rebuilt: true}), operation.RollBack},
		{"this event's rollback was interrupted: roll back again", held(operation.Facts{Step: journal.StepRollingBack, Ours: true, Rebuilt: true}), operation.RollBack},
		{"cleaning after a stored result failed, not for good: leave", held(operation.Facts{Step: journal.StepRollingBack, Stored: true, Failed: operation.FailedTransient}), operation.Leave},
		{"cleaning after a stored result failed for good: close, so the cluster's events go on", held(operation.Facts{Step: journal.StepRollingBack, Stored: true, Failed: operation.FailedPermanent}), operation.Close},
		{"this event given up (past its attempts), unfinished: roll back", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Abandoning: true}), operation.RollBack},
		{"this event given up, but its operation was done: its true result", held(operation.Facts{Step: journal.StepDone, Ours: true, Abandoning: true}), operation.Verify},
		{"this event's request no longer decodes: roll back from the entry", held(operation.Facts{Step: journal.StepCopying, Ours: true}), operation.RollBack},
		{"another event's orphan, unfinished, no result: finish it as its redelivery would", held(operation.Facts{Step: journal.StepCopying, Rebuilt: true}), operation.Resume},
		{"another event's orphan that cannot be rebuilt (request no longer decodes): roll back from the entry", held(operation.Facts{Step: journal.StepCopying}), operation.RollBack},
		{"another event's orphan, done, no result: verify and publish its result", held(operation.Facts{Step: journal.StepDone}), operation.Verify},
		{"another event's orphan, done, result stored: close", held(operation.Facts{Step: journal.StepDone, Stored: true}), operation.Close},
		{"another event's orphan, result stored but left half-done: clean", held(operation.Facts{Step: journal.StepCopying, Stored: true, Rebuilt: true}), operation.Clean},
		{"another event's orphan whose rollback was interrupted after its result: clean", held(operation.Facts{Step: journal.StepRollingBack, Stored: true}), operation.Clean},
		{"another event's orphan awaiting copies, result stored: await", held(operation.Facts{Step: journal.StepAwaiting, Stored: true}), operation.Await},
		{"the lock is lost as soon as taken: leave", operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true}, operation.Leave},
		// After a failure of the run.
		{"transient, not the last attempt: leave for the next delivery", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Failed: operation.FailedTransient}), operation.Leave},
		{"transient, last attempt: roll back", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Failed: operation.FailedTransient, Final: true}), operation.RollBack},
		{"permanent (the timeout, a rejection): roll back", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Failed: operation.FailedPermanent}), operation.RollBack},
		{"the lock lost, last attempt: never finalize without it", operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Failed: operation.FailedTransient, Final: true}, operation.Leave},
		{"the worker stopping, permanent failure: leave (the next holder rolls back)", held(operation.Facts{Step: journal.StepCopying, Ours: true, Rebuilt: true, Failed: operation.FailedPermanent, Stopping: true}), operation.Leave},
		{"done, the result could not be stored, last attempt: leave (never a failed result for a success)", held(operation.Facts{Step: journal.StepDone, Ours: true, Failed: operation.FailedTransient, Final: true}), operation.Leave},
		{"nothing journaled: the failure is the delivery's", held(operation.Facts{Failed: operation.FailedPermanent}), operation.Leave},
	} {
		t.Run(tc.why, func(t *testing.T) {
			if got := operation.Decide(tc.f); got != tc.want {
				t.Errorf("operation.Decide(%+v) = %s, want %s", tc.f, got, tc.want)
			}
		})
	}
}
