package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// InProcessNATS starts a nats-server with JetStream inside the test process, on a random
// loopback port with its store in a temporary directory, for tests of NATS-only logic that
// need no Kafka (it is not the local stack's server, so such tests run beside any other).
// It returns a connection; both end with the test.
func InProcessNATS(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready after 10s")
	}
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// StreamMsgs is the number of messages stream holds.
func StreamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
