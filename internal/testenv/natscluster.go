package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/natsjs"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// StreamLeader waits until the stream (a key-value bucket's is KV_<bucket>) has a leader
// on the stack's NATS cluster whose replicas are all current, and returns the leader's
// server name ("nats-2"): the node to kill to make the stream elect another.
func StreamLeader(t testing.TB, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	Eventually(t, time.Minute, func() error {
		l, err := streamLeader(t.Context(), js, stream)
		leader = l
		return err
	})
	return leader
}

func streamLeader(ctx context.Context, js jetstream.JetStream, stream string) (string, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	c := info.Cluster
	if c == nil || c.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader", stream)
	}
	if len(c.Replicas) != info.Config.Replicas-1 {
		return "", fmt.Errorf("stream %s: %d replicas besides its leader %s, want %d", stream, len(c.Replicas), c.Leader, info.Config.Replicas-1)
	}
	for _, r := range c.Replicas {
		if !r.Current || r.Offline {
			return "", fmt.Errorf("stream %s: replica %s is not current (offline %t, lag %d)", stream, r.Name, r.Offline, r.Lag)
		}
	}
	if _, ok := stack.NATSNodeByName(c.Leader); !ok {
		return "", fmt.Errorf("stream %s is led by %q, not a node of the stack", stream, c.Leader)
	}
	return c.Leader, nil
}

// WaitStreamLeaderNot waits until the stream has a leader other than gone (the node just
// killed) and returns it.
func WaitStreamLeaderNot(t testing.TB, js jetstream.JetStream, stream, gone string) string {
	t.Helper()
	var leader string
	Eventually(t, time.Minute, func() error {
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			return err
		}
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == gone {
			return fmt.Errorf("stream %s still has no leader but %q", stream, gone)
		}
		leader = info.Cluster.Leader
		return nil
	})
	return leader
}

// KillNATSNode kills one node of the NATS cluster with SIGKILL (a crash) and waits until it
// has exited.
func (e *Env) KillNATSNode(t testing.TB, node string) {
	t.Helper()
	e.mustBeExclusive(t)
	if _, ok := stack.NATSNodeByName(node); !ok {
		t.Fatalf("no NATS node %q in the stack", node)
	}
	CountFault()
	if err := e.Stack.Kill(t.Context(), node); err != nil {
		t.Fatalf("kill %s: %v", node, err)
	}
}

// StartNATSNode starts a node of the NATS cluster and waits until it reports healthy
// (JetStream current with the cluster).
func (e *Env) StartNATSNode(t testing.TB, node string) {
	t.Helper()
	if err := e.Stack.Start(t.Context(), node); err != nil {
		t.Fatalf("start %s: %v", node, err)
	}
}

// RestartNATSNode stops one node of the NATS cluster gracefully, starts it again and waits
// until it reports healthy: one step of a rolling restart.
func (e *Env) RestartNATSNode(t testing.TB, node string) {
	t.Helper()
	e.mustBeExclusive(t)
	if _, ok := stack.NATSNodeByName(node); !ok {
		t.Fatalf("no NATS node %q in the stack", node)
	}
	CountFault()
	if err := e.Stack.Restart(t.Context(), node); err != nil {
		t.Fatalf("restart %s: %v", node, err)
	}
}

// PauseNATSNode freezes one node with SIGSTOP: its sockets stay open but it answers
// nothing, so the other two elect new leaders without it; ResumeNATSNode thaws it.
func (e *Env) PauseNATSNode(t testing.TB, node string) {
	t.Helper()
	e.mustBeExclusive(t)
	CountFault()
	if err := e.Stack.Pause(node); err != nil {
		t.Fatalf("pause %s: %v", node, err)
	}
}

// ResumeNATSNode thaws a node PauseNATSNode froze.
func (e *Env) ResumeNATSNode(t testing.TB, node string) {
	t.Helper()
	if err := e.Stack.Resume(node); err != nil {
		t.Fatalf("resume %s: %v", node, err)
	}
}

// JetStream is the JetStream of nc as a worker has it (natsjs, nats.replicas unset): on the
// stack's NATS cluster what it creates gets three replicas. Tests that may create a stream
// or bucket before any worker does (a journal read, a results lookup) use it, so that the
// asset is what the workers would have made.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := natsjs.New(nc, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
