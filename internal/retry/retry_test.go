package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/locks"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// marker is an error of some package that says whether it is transient.
type testMarker struct {
	msg       string
	transient bool
}

func (m *testMarker) Error() string   { return m.msg }
func (m *testMarker) Transient() bool { return m.transient }

// wrapper marks a cause, as a package's boundary helper does.
type wrapper struct{ err error }

func (w wrapper) Error() string   { return w.err.Error() }
func (w wrapper) Unwrap() error   { return w.err }
func (w wrapper) Transient() bool { return true }

type netErr struct{ timeout bool }

func (e netErr) Error() string   { return fmt.Sprintf("net (timeout %v)", e.timeout) }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return false }

func TestIsTransient(t *testing.T) {
	yes := &testMarker{"controller moving", true}
	no := &testMarker{"says no", false}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("topic does not exist"), false},

		// Marked errors, however deep.
		{"Transient()", retry.Transient(errors.New("x")), true},
		{"wrapped Transient()", fmt.Errorf("a: %w", fmt.Errorf("b: %w", retry.Transient(errors.New("x")))), true},
		{"marker", yes, true},
		{"wrapped marker", fmt.Errorf("reorder: %w", yes), true},
		{"marking wrapper", fmt.Errorf("x: %w", wrapper{errors.New("cause")}), true},
		{"marker saying false", fmt.Errorf("x: %w", no), false},
		{"joined, one marked", errors.Join(errors.New("permanent"), fmt.Errorf("b: %w", yes)), true},
		{"joined, none marked", errors.Join(errors.New("a"), errors.New("b")), false},
		{"false does not veto", errors.Join(no, yes), true},
		{"false above a marked one", fmt.Errorf("%w: %w", no, fmt.Errorf("deeper: %w", yes)), true},
		{"joined inside wrapped", fmt.Errorf("x: %w", errors.Join(errors.New("a"), errors.Join(errors.New("b"), yes))), true},

		// Whatever the source.
		{"canceled", context.Canceled, true},
		{"wrapped canceled", fmt.Errorf("stop: %w", context.Canceled), true},
		{"deadline", context.DeadlineExceeded, true},
		{"joined deadline", errors.Join(errors.New("a"), fmt.Errorf("wait: %w", context.DeadlineExceeded)), true},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), true},
		{"net timeout", &net.OpError{Op: "dial", Net: "tcp", Err: netErr{timeout: true}}, true},
		{"wrapped net timeout", fmt.Errorf("metadata: %w", netErr{timeout: true}), true},
		{"net error, no timeout", &net.OpError{Op: "dial", Net: "tcp", Err: netErr{timeout: false}}, false},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},

		// retry knows no one's error codes: unmarked Kafka and ZooKeeper errors are not
		// transient here; the packages that return them mark them.
		{"unmarked kerr", kerr.NotController, false},
		{"unmarked zk", zk.ErrSessionExpired, false},
	} {
		if got := retry.IsTransient(tc.err); got != tc.want {
			t.Errorf("%s: retry.IsTransient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// Marked sees only markers: what IsTransient recognises by itself is not marked.
func TestMarked(t *testing.T) {
	yes := &testMarker{"controller moving", true}
	no := &testMarker{"says no", false}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"Transient()", fmt.Errorf("a: %w", retry.Transient(errors.New("x"))), true},
		{"false does not veto", errors.Join(no, yes), true},
		{"marker saying false", no, false},
		{"canceled", context.Canceled, false},
		{"net timeout", netErr{timeout: true}, false},
	} {
		if got := retry.Marked(tc.err); got != tc.want {
			t.Errorf("%s: Marked(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestTransientKeepsTheCause(t *testing.T) {
	cause := fmt.Errorf("x: %w", kerr.NotController)
	err := retry.Transient(cause)
	var ke *kerr.Error
	if !errors.Is(err, kerr.NotController) || !errors.As(err, &ke) || err.Error() != cause.Error() {
		t.Errorf("retry.Transient(%v) = %v hides its cause", cause, err)
	}
	if retry.Transient(nil) != nil {
		t.Error("retry.Transient(nil) != nil")
	}
}

// Errors of internal/kafka and internal/locks that were transient when retry classified
// them itself are still: each package marks them.
func TestIsTransientOfKafkaAndLocks(t *testing.T) {
	znode, err := kafka.DecodeTopicZnode([]byte(`{"version":2,"partitions":{"0":[1,2]}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, missingPartition := znode.Replicas(7)

	// A ZooKeeper connection that is closed: go-zookeeper answers every request with
	// an error of its own.
	conn, _, err := zk.Connect([]string{"127.0.0.1:1"}, time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	_, closedZK := kafka.ReadController(conn, "/kafka")

	// No ZooKeeper answers: Wait gives up without a session.
	sess, err := locks.Connect(locks.SessionConfig{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, noSession := sess.Wait(ctx)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"kafka reassignment in progress", fmt.Errorf("reorder: %w: t-0", kafka.ErrReassignmentInProgress), true},
		{"kafka no controller", kafka.ErrNoController, true},
		{"kafka missing partition (retriable)", missingPartition, true},
		{"kafka closed zookeeper", closedZK, true},
		{"kafka empty election", kafka.ErrEmptyElection, false},
		{"kafka kraft controller", kafka.ErrKRaftController, false},
		{"kafka not a reorder", kafka.ErrNotReorder, false},
		{"locks busy", fmt.Errorf("acquire: %w", locks.ErrBusy), true},
		{"locks busy error", &locks.BusyError{Holder: locks.Holder{Worker: "w"}}, true},
		{"locks lost", fmt.Errorf("x: %w: %w", locks.ErrLost, locks.ErrClosed), true},
		{"locks no session", locks.ErrNoSession, true},
		{"locks disconnected", locks.ErrDisconnected, true},
		{"locks wait without a session", noSession, true},
		{"locks released", locks.ErrReleased, false},
		{"locks closed", locks.ErrClosed, false},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if got := retry.IsTransient(tc.err); got != tc.want {
			t.Errorf("%s: retry.IsTransient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		// What locks calls transient, retry does too.
		if locks.IsTransient(tc.err) && !retry.IsTransient(tc.err) {
			t.Errorf("%s: locks.IsTransient(%v) but not retry.IsTransient", tc.name, tc.err)
		}
	}
	if !errors.Is(closedZK, zk.ErrClosing) && !errors.Is(closedZK, zk.ErrConnectionClosed) {
		t.Errorf("ReadController on a closed connection = %v, want a zk connection error", closedZK)
	}
	if !errors.Is(noSession, locks.ErrNoSession) {
		t.Errorf("Wait = %v, want ErrNoSession", noSession)
	}
}

// Kafka's own retriable errors come back marked from the kafka package (integration).
func TestIsTransientOfKafkaErrors(t *testing.T) {
	env := testenv.Get(t)
	cl := env.Kafka(t, "local")
	topic := testenv.Name(t, "missing")
	err := kafka.SubmitReassignment(t.Context(), cl, map[model.TopicPartition][]int32{{Topic: topic, Partition: 0}: {1, 2}})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("reassign a missing topic = %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if !retry.IsTransient(err) {
		t.Errorf("retry.IsTransient(%v) = false", err)
	}
	// A permanent one stays permanent.
	existing := testenv.Name(t, "rf")
	testenv.CreateTopic(t, cl, existing, [][]int32{{1, 2}}, nil)
	err = kafka.SubmitReassignment(t.Context(), cl, map[model.TopicPartition][]int32{{Topic: existing, Partition: 0}: {1, 1}})
	if err == nil {
		t.Fatal("a reassignment to a duplicate replica was accepted")
	}
	if retry.IsTransient(err) {
		t.Errorf("retry.IsTransient(%v) = true", err)
	}
	// ZooKeeper read of a topic that does not exist: retriable per Kafka (metadata lags).
	_, err = kafka.ReadTopicZnode(env.ZooKeeper(t), stack.KafkaChroot, topic)
	if !retry.IsTransient(err) {
		t.Errorf("retry.IsTransient(%v) = false", err)
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func TestDoStopsOnPermanent(t *testing.T) {
	n := 0
	err := retry.Do(context.Background(), time.Minute, func() error {
		n++
		if n < 3 {
			return retry.Transient(errors.New("later"))
		}
		return errors.New("never")
	}, nil)
	if err == nil || err.Error() != "never" || n != 3 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}

func TestDoRetriesMarkedErrors(t *testing.T) {
	n := 0
	err := retry.Do(context.Background(), time.Minute, func() error {
		n++
		if n < 3 {
			return fmt.Errorf("reorder: %w", kafka.ErrReassignmentInProgress)
		}
		return nil
	}, nil)
	if err != nil || n != 3 {
		t.Fatalf("err %v after %d calls", err, n)
	}
}

func TestDelay(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 20: 2 * time.Minute} {
		if got := retry.Delay(attempt); got != want {
			t.Errorf("retry.Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
}

// An operation left in flight is transient, and stays in flight however it is wrapped.
func TestInFlight(t *testing.T) {
	base := errors.New("lock lost")
	err := retry.InFlight(base)
	wrapped := fmt.Errorf("resume: %w", errors.Join(errors.New("other"), err))
	for _, e := range []error{err, wrapped} {
		if !retry.IsInFlight(e) || !retry.IsTransient(e) || !errors.Is(e, base) {
			t.Errorf("%v: in flight %v, transient %v, is base %v", e, retry.IsInFlight(e), retry.IsTransient(e), errors.Is(e, base))
		}
	}
	if retry.IsInFlight(retry.Transient(base)) || retry.IsInFlight(nil) || retry.InFlight(nil) != nil {
		t.Error("a plain transient error (or nil) is in flight")
	}
}
