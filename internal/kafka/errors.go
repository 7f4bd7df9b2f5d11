package kafka

import (
	"errors"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/retry"
)

// Transient errors carry the marker package retry looks for: a method Transient() bool
// that returns true, on the error or on one it wraps. This package marks its own errors
// (ErrReassignmentInProgress, ErrNoController) and, at its boundary, the errors of
// franz-go and go-zookeeper that are worth a retry (classify), so that callers and
// package retry need not know Kafka's or ZooKeeper's error codes.

// classify marks err transient when its cause is worth retrying and it has no marker yet:
// a Kafka error that Kafka calls retriable (kerr.IsRetriable: a leader or controller
// moving, metadata lagging, a request timing out…), NOT_CONTROLLER, REQUEST_TIMED_OUT,
// or a ZooKeeper connection that dropped, expired or is closing. Exported functions pass
// the errors they return through it. Anything else is returned as it is.
func classify(err error) error {
	if err == nil || retry.Marked(err) || !transientCause(err) {
		return err
	}
	return retry.Transient(err)
}

func transientCause(err error) bool {
	return kerr.IsRetriable(err) ||
		errors.Is(err, kerr.NotController) || errors.Is(err, kerr.RequestTimedOut) ||
		errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// classifyEach classifies the per-partition errors of an election.
func classifyEach(m map[TopicPartition]error) map[TopicPartition]error {
	for tp, err := range m {
		m[tp] = classify(err)
	}
	return m
}
