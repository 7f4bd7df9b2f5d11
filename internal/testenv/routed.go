package testenv

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kafkamender/kafkamender/internal/stack"
)

// On the stack's NATS cluster, a subscription is known at once to the node its connection
// is on, and to the other nodes a moment later, over the routes: a message published on
// another node meanwhile (a worker's result, stored at once) does not reach it. Tests
// that subscribe and then publish wait until every node knows the subscription
// (AwaitRouted).

// probeSubjectPrefix is where AwaitRouted's probes go: no stream stores it.
const probeSubjectPrefix = "_KAFKAMENDER_TEST_PROBE."

var (
	probersMu sync.Mutex
	probers   = map[string]*nats.Conn{} // by node URL, for the test process's life
)

// prober is a connection to the node at url alone; nil when it cannot be made now.
func prober(url string) *nats.Conn {
	probersMu.Lock()
	defer probersMu.Unlock()
	if c := probers[url]; c != nil && !c.IsClosed() {
		return c
	}
	c, err := nats.Connect(url, nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(2*time.Second), nats.Name("kafkamender-test-prober"))
	if err != nil {
		return nil
	}
	probers[url] = c
	return c
}

// AwaitRouted returns once every node of the stack's NATS cluster that is up knows the
// subscriptions nc made before the call: it subscribes nc to a probe subject of its
// own (after them, on the same connection: the routes carry the interest in order) and
// publishes on it from each node until each probe is heard. Best effort: after 10
// seconds it returns anyway (a node that stops meanwhile hears nothing either). A
// connection to another server (the secured NATS, an in-process one) returns at once.
func AwaitRouted(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if !slices.Contains(stack.NATSURLs(), nc.ConnectedUrl()) {
		return
	}
	subject := probeSubjectPrefix + nats.NewInbox()[len(nats.InboxPrefix):]
	heard := make(chan string, 16)
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		select {
		case heard <- string(m.Data):
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	want := map[string]*nats.Conn{}
	for _, url := range stack.NATSURLs() {
		if c := prober(url); c != nil && c.IsConnected() {
			want[url] = c
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		for url, c := range want {
			_ = c.Publish(subject, []byte(url))
			_ = c.FlushTimeout(time.Second)
		}
		wait := time.After(100 * time.Millisecond)
	drain:
		for {
			select {
			case url := <-heard:
				delete(want, url)
				if len(want) == 0 {
					break drain
				}
			case <-wait:
				break drain
			}
		}
	}
}
