package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
)

func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("topic does not exist"), false},
		{Transient(errors.New("x")), true},
		{fmt.Errorf("reorder: %w", kafka.ErrReassignmentInProgress), true},
		{fmt.Errorf("elect: %w", kerr.NotController), true},
		{kerr.RequestTimedOut, true},
		{kerr.UnknownTopicOrPartition, true}, // retriable per Kafka: metadata may lag
		{kerr.InvalidReplicaAssignment, false},
		{fmt.Errorf("acquire: %w", locks.ErrBusy), true},
		{zk.ErrSessionExpired, true},
		{zk.ErrBadVersion, false},
		{context.DeadlineExceeded, true},
		{kafka.ErrEmptyElection, false},
		{kafka.ErrKRaftController, false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestDoStopsOnPermanent(t *testing.T) {
	n := 0
	err := Do(context.Background(), time.Minute, func() error {
		n++
		if n < 3 {
			return Transient(errors.New("later"))
		}
		return errors.New("never")
	}, nil)
	if err == nil || err.Error() != "never" || n != 3 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}

func TestDelay(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 20: 2 * time.Minute} {
		if got := Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
}
