// Package locks is kafkamender's distributed lock per Kafka cluster, so that only one
// worker changes a cluster at a time. Two backends share one contract (Backend, Lease; the
// conformance suite runs on both): ZooKeeper (Locker, described here) and NATS JetStream
// key-value (KVLocker, in kv.go, with its timing argument), for clusters without
// ZooKeeper.
//
// # Model
//
// A worker keeps one long-lived ZooKeeper connection, a Session, and builds a Locker on
// it. go-zookeeper reconnects by itself and, when the server has expired the session,
// silently starts a new one; the Session follows that and hands out a Generation per
// ZooKeeper session, whose Expired channel closes when that session is over.
//
// The lock of cluster C is the znode Root/C (Root defaults to /kafkamender/locks). To take
// it, Acquire creates a claim: an ephemeral sequential child
// "_c_<guid>-lock-<sequence>" (protected: when the reply to the create is lost, the node
// is found again by its guid, and cleanup deletes every node of the guid). The claim with
// the lowest sequence holds the lock; each other claim watches only the claim just before
// it (no herd effect) and looks again when that one goes. A claim's data is JSON,
// {"worker":…,"event":…,"claimed_at":…,"acquired_at":…}, so operators, Locker.Holder and
// the busy error can say who holds the lock and since when:
//
//	acquire lock for cluster local: lock busy: held by worker host-1 for event a1b2 since 2026-11-29T10:00:00Z
//
// # Guarantees
//
//   - Mutual exclusion, as strong as ZooKeeper's: at any time at most one claim of a lock
//     node is the lowest; a claim is ephemeral, so it vanishes with its session.
//   - Acquire honours its context and a wait bound (Config.Wait, WithWait). It removes its
//     claim on every way out but success, a panic included, and everything it waits on runs
//     in the caller's goroutine: nothing it leaves behind can take the lock after it
//     returned an error. (A ZooKeeper call it gave up on may finish later in the
//     background; a claim created that late is deleted, never used.)
//   - The holder is told when the lock is lost: Held.Lost closes and Held.Context is
//     cancelled, with a cause wrapping ErrLost, when the session expires, the Session is
//     closed, the connection is down for longer than SessionConfig.LossAfterDisconnect
//     (the client hears of an expiry only when it reconnects, so it does not wait for
//     that), or the claim node is deleted (an operator breaking the lock).
//   - Fenced writes: Held.Multi puts a check of the claim node (its path and version,
//     Held.Fence) first in a ZooKeeper transaction. ZooKeeper applies the transaction only
//     if the claim node still exists at that version, atomically with the writes, so a
//     holder whose session has expired cannot write to ZooKeeper even before it learns
//     that it lost the lock. This covers znodes of the ZooKeeper ensemble that holds the
//     locks (for a cluster whose metadata lives in the same ensemble, /admin and topic
//     znodes included).
//
// # What the holder must do
//
// Check Held.Context (or Lost) before every write that the fence does not cover (Kafka
// admin requests, writes to another ZooKeeper) and use Held.Multi for ZooKeeper writes.
// Once the lock is lost, stop before the next write, call Release (it is idempotent and
// also cleans up a claim that survived a long disconnection), and treat the operation as
// interrupted: another worker may hold the lock now and may have changed the cluster, so
// re-acquire, re-read and re-plan rather than resume. A write already sent when the loss
// happened cannot be recalled; unfenced writes are only as safe as the loss is timely,
// which LossAfterDisconnect bounds. Never use a Held again after it reported ErrLost, and
// never reuse one from an expired session. Locker.Do runs a function under the lock and
// releases it even when the function panics.
//
// Errors wrap ErrBusy (a *BusyError naming the holder), ErrLost, ErrNoSession,
// ErrDisconnected, ErrReleased or ErrClosed together with the cluster they concern.
// IsTransient tells which are worth retrying later (busy, lost, no session, ZooKeeper
// unreachable, timeouts): a handler negatively acknowledges those events with a delay.
// Every such error also carries package retry's marker (a Transient method that returns
// true), so retry.IsTransient recognises them without knowing this package.
package locks
