package events

// The JetStream streams and key-value buckets of kafkamender, all in one place: the
// workers create each one on first use. docs/security.md's permission blocks and
// docs/operations.md name them too, so none may change. A bucket is stored in the stream
// KV_<bucket>.
const (
	// EventsStream is the JetStream stream, created by the workers, that
	// stores the events until a worker has handled them.
	EventsStream = "KAFKAMENDER_EVENTS"
	// ResultsStream stores the final result of each event (ResultsSubjects).
	ResultsStream = "KAFKAMENDER_RESULTS"
	// DeadStream stores the dead letters (DeadSubjects).
	DeadStream = "KAFKAMENDER_DEAD"

	// JournalBucket is the key-value bucket of the operation journal (package journal):
	// key = cluster name, the operation in hand on that cluster.
	JournalBucket = "KAFKAMENDER_JOURNAL"
	// LocksBucket is the default key-value bucket of the NATS locks (lock.nats.bucket):
	// key = cluster name, the holder's claim.
	LocksBucket = "KAFKAMENDER_LOCKS"
	// LockBackendsBucket records, per cluster (the key), where the fleet keeps the
	// cluster's lock: written by the first worker that locks it, and compared by every
	// other, so that two workers configured differently never both hold "the" lock.
	LockBackendsBucket = "KAFKAMENDER_LOCK_BACKENDS"
	// OverloadedBucket remembers which brokers were shed recently, per cluster (key
	// <cluster>.<broker>), for the cool-down of broker-overloaded alerts and for steering
	// leadership away from brokers that are themselves overloaded.
	OverloadedBucket = "KAFKAMENDER_OVERLOADED"
	// GuardrailsBucket is the bucket of guardrails.max_operations_per_hour: key = cluster,
	// value = the JSON list of the operations that began writing to the cluster within the
	// last hour, [{"event":…,"at":…}], oldest first. A key expires an hour after its last
	// write, when everything it lists is older than an hour.
	GuardrailsBucket = "KAFKAMENDER_GUARDRAILS"
	// PausesBucket holds the paused clusters (cluster-pause, package pause): key = cluster,
	// value = the JSON pause {"cluster","reason","by","event","since","until"}; no key: the
	// cluster is not paused.
	PausesBucket = "KAFKAMENDER_PAUSES"
	// CancelsBucket holds the requests to cancel events (operation-cancel, package cancel):
	// key = <cluster>.<event id>, value = the JSON request {"cluster","event","by",
	// "cancel_event","reason","at"}, kept 7 days.
	CancelsBucket = "KAFKAMENDER_CANCELS"
	// PlansBucket holds the plans that wait, or waited, for a person's approval (package
	// approval): key = <cluster>.<plan id>, value = the JSON plan with its fingerprint and
	// its state (awaiting, approved, denied, expired, stale, cancelled), kept 8 days.
	PlansBucket = "KAFKAMENDER_PLANS"
)
