// Package operation is kafkamender's operation engine: it carries out each event's
// operation (a task, built by package handlers) under its cluster's lock, crash-safe
// through the operation journal, and gives every event exactly one true result. It knows
// nothing of Kafka: what it uses it reaches through narrow ports (ports.go) — the
// delivery (pipeline.Job), the results store, the lock, the journal, the guardrails and
// the tasks — so that its rules run as unit tests on fakes, in milliseconds.
//
// # The flow
//
//	guardrails that need no plan (refused: rejected, no lock taken) → the cool-down
//	answer (Tasks.Answer) → lock(cluster) → the journal entry, decided (Decide) →
//	plan → guardrails of the plan, what storage can hold → journal → apply → verify →
//	result (published under the lock) → entry closed
//
// A dry run plans, and takes no lock.
//
// # Crash safety: the journal and takeover
//
// Before its first write to a cluster, an operation records itself in the operation journal
// (package journal): the event, its plan with every partition's state before the first
// attempt, what the cluster's previous operation left (the floor of its reads), and then,
// as it goes, the reassignments it starts, the throttle keys it sets with the values they
// held, the zk-nudge progress, the step reached. Each record is written before the cluster
// write it describes. The result is published while the lock is still held; only then is
// the entry closed, keeping what the operation left on the cluster (see Run.Floor).
//
// Whoever takes a cluster's lock next reads the entry and asks Decide what to do with it,
// one pure function over the facts (the step, whose entry it is, whether its result is
// stored, whether the lock is held, whether this is the last attempt, whether the entry's
// task can be rebuilt); its table test is the list of cases. In short:
//
//   - No open entry: the event runs (over the closed entry, if any).
//   - The event's own entry (a retry, or the redelivery after a crash, a lost lock, a
//     shutdown): its operation is carried on from wherever the cluster stands; the task
//     compares the plan with a fresh read, never trusting the step. One that was done
//     gets its result from a fresh read (a publish that failed); one given up on is
//     rolled back.
//   - Another event's entry whose result is not stored: its holder is gone (the lock is
//     ours). It is finished exactly as its own redelivery would finish it, its result
//     published once (a result stored already wins), the entry closed; then this event
//     runs. One whose request no longer decodes cannot be carried on: it is rolled back
//     from its entry alone, and the cluster's events go on.
//   - Another event's entry whose result is stored: closed, once what its holder left
//     half-done (if any) is rolled back, or awaited (work the cluster cannot cancel).
//
// A delivery whose lock is held by a worker finishing this same event's operation waits
// for it instead of retrying, and then replays the stored result.
//
// # Failures
//
// Operations go forward; they are rolled back only on a final failure — a permanent error
// (a rejection found late, the operation's timeout), or a transient one on the last
// attempt — so that the cluster ends in the requested state or the state before the
// event, never between. A journaled operation is never finalized without the lock: when
// the lock is lost, the worker stops, or the result cannot be stored, the delivery ends
// with an error marked retry.InFlight, which the pipeline delivers again whatever the
// attempt (past the last one, the pipeline gives the event up, and the engine rolls it
// back under the lock: Abandon). An operation whose outcome is done is never rolled back.
// A rollback that fails for good is said in the failed result, and its entry stays open:
// the next holder of the lock finishes the rollback before its own event.
//
// Never cancelled or restored: on a graceful shutdown the lock is released, the journal
// and the copies in flight are left, and the next holder adopts them; when the lock is
// lost nothing is written at all. Work the cluster cannot cancel (Kafka before 2.4) keeps
// its entry open past the failed result, at journal.StepAwaiting, the lock held, until it
// ends and its throttles are put back; a worker that stops meanwhile leaves the event to
// be delivered again, and the redelivery (a replay) waits for it (Replayed).
//
// # Results tell the truth
//
// A task's Verify reads the cluster afresh: a change counts only when a fresh read shows
// it, and a result lists every change the event made, across all attempts (what differs
// from the state before the first attempt). A result that could not be stored is never
// replaced by one that says less: the next delivery publishes the same truth.
package operation
