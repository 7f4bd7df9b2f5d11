// Package kafka reads a Kafka cluster's placement state and applies placement changes to it
// through one of three backends ("strategies"):
//
//   - api: AlterPartitionReassignments with the same replica set in a new order (KIP-455,
//     Kafka 2.4+, ZooKeeper mode or KRaft), then ElectLeaders(PREFERRED).
//   - zk-reassign: /admin/reassign_partitions, then a preferred election through
//     ElectLeaders (2.2+) or /admin/preferred_replica_election, for ZooKeeper clusters older
//     than 2.4. One reassignment znode may exist at a time: the backend waits for a foreign
//     one to go and for its own to be consumed.
//   - zk-nudge: the seeds' second method made safe: a version-checked rewrite of
//     /brokers/topics/<t> that keeps every field (topic_id, adding_replicas, unknown ones),
//     refused when a KRaft controller owns the cluster, then a controller failover by
//     deleting /controller, then a preferred election. Only reorders: never a change of the
//     replica set.
//
// Every ZooKeeper write is fenced: it runs in a Multi whose first operation checks the
// caller's lock node, so a worker that lost its lock (session expired) cannot write. And
// none is made while /controller names a KRaft controller (a ZooKeeper migration, 3.4+),
// which would ignore it: ErrKRaftController (CheckZKController).
//
// Capabilities (Probe, every broker's ApiVersions) choose each path; a path a cluster lacks
// is never tried. Before 2.4 a running reassignment shows only in /admin/reassign_partitions
// (the metadata shows its target replicas from the start): Reader reads it there.
//
// A preferred election is never sent with an empty partition list: Kafka reads an empty
// list as "every partition of the cluster". Callers get ErrEmptyElection instead.
//
// Replication throttles are planned, applied and restored as plain data (ThrottleKey) that
// the caller journals before each write: a Throttler's PlanThrottles, ApplyThrottles and
// RestoreThrottles compare before they write, so nobody else's value is overwritten or
// written back, through the config znodes (ZooKeeper mode: a compare-and-set) or
// IncrementalAlterConfigs (ChooseConfigs).
//
// Errors worth a retry carry package retry's marker (a Transient method): the sentinels
// ErrReassignmentInProgress and ErrNoController, and, marked where exported functions
// return them, Kafka's retriable errors, NOT_CONTROLLER, REQUEST_TIMED_OUT and ZooKeeper
// connection errors. errors.Is and errors.As still see the original error.
package kafka
