package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
)

func isMarked(err error) bool {
	var m interface{ Transient() bool }
	return errors.As(err, &m) && m.Transient()
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kerr.NotController, true},
		{fmt.Errorf("elect: %w", kerr.RequestTimedOut), true},
		{fmt.Errorf("metadata: %w", kerr.LeaderNotAvailable), true}, // retriable per Kafka
		{kerr.UnknownTopicOrPartition, true},
		{fmt.Errorf("read /controller: %w", zk.ErrConnectionClosed), true},
		{zk.ErrNoServer, true},
		{zk.ErrSessionExpired, true},
		{zk.ErrClosing, true},
		{errors.Join(errors.New("a"), fmt.Errorf("b: %w", kerr.NotLeaderForPartition)), true},
		{kerr.InvalidReplicaAssignment, false},
		{kerr.PolicyViolation, false},
		{zk.ErrBadVersion, false},
		{zk.ErrNoNode, false},
		{ErrKRaftController, false},
		{context.Canceled, false}, // retry's own rule, not ours
		{errors.New("x"), false},
	} {
		got := classify(tc.err)
		if isMarked(got) != tc.want {
			t.Errorf("classify(%v) marked %v, want %v", tc.err, isMarked(got), tc.want)
		}
		if !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
			t.Errorf("classify(%v) = %v: lost the cause or changed the message", tc.err, got)
		}
		if !tc.want && got != tc.err {
			t.Errorf("classify(%v) wrapped a permanent error", tc.err)
		}
		if again := classify(got); again != got {
			t.Errorf("classify marked %v twice", got)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
	var ke *kerr.Error
	if !errors.As(classify(fmt.Errorf("x: %w", kerr.NotController)), &ke) || ke != kerr.NotController {
		t.Error("errors.As does not find the kerr.Error through the marker")
	}
	for _, err := range []error{ErrReassignmentInProgress, ErrNoController, fmt.Errorf("reorder: %w: t-0", ErrReassignmentInProgress)} {
		if !isMarked(err) {
			t.Errorf("%v is not marked transient", err)
		}
		if classify(err) != err {
			t.Errorf("classify wrapped %v, marked already", err)
		}
	}
	for _, err := range []error{ErrEmptyElection, ErrKRaftController, ErrNotReorder, ErrPreferredNotAvailable, ErrUnsupported} {
		if isMarked(err) {
			t.Errorf("%v is marked transient", err)
		}
	}
}

func TestClassifyEach(t *testing.T) {
	a, b := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	m := classifyEach(map[TopicPartition]error{a: fmt.Errorf("elect t-0: %w", kerr.NotLeaderForPartition), b: nil})
	if !isMarked(m[a]) || m[b] != nil {
		t.Errorf("classifyEach = %v", m)
	}
}
