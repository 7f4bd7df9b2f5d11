package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// A NATS connection that nats.go gives up for good (here: the worker's credentials
// revoked, so every reconnect is refused) leaves a worker that takes no event and
// publishes no result, for ever: Run must end with an error saying so, and /healthz must
// stop answering 200, so that the orchestrator starts the worker again.
func TestClosedNATSConnectionIsFatal(t *testing.T) {
	// The credentials are revoked through an authenticator and the worker's connection
	// kicked, rather than by reloading the server's users: nats-server's own reload reads
	// a live client's counters without atomics while its read loop writes them, a data
	// race inside the server that -race reports against this test.
	auth := &revocable{user: "worker", password: "before"}
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, CustomClientAuthentication: auth}
	s := testenv.StartNATSServer(t, opts, nil)

	cfg := unreachableConfig(t)
	cfg.NATS.URL = config.NATSURLs(s.ClientURL())
	cfg.NATS.User, cfg.NATS.Password = "worker", "before"
	w, err := New(cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	eventually(t, 10*time.Second, "the worker connected to NATS", func() bool { return s.NumClients() > 0 && w.Addr() != "" })
	base := "http://" + w.Addr()
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %q before", code, body)
	}

	// The password is revoked: the worker is disconnected, and refused at every
	// reconnect; nats.go closes the connection after the second refusal.
	auth.revoked.Store(true)
	connz, err := s.Connz(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range connz.Conns {
		if err := s.DisconnectClientByID(c.Cid); err != nil {
			t.Fatalf("kick client %d: %v", c.Cid, err)
		}
	}
	select {
	case err := <-runErr:
		if err == nil || !strings.Contains(err.Error(), "the NATS connection is closed for good") {
			t.Fatalf("Run() = %v, want the closed connection", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the worker still runs a minute after its NATS connection was refused for good")
	}
	// What /healthz answered while the worker stopped.
	rec := httptest.NewRecorder()
	w.health.serveHealthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "closed for good") {
		t.Errorf("/healthz = %d %q after, want 503 saying why", rec.Code, rec.Body)
	}
}

// revocable lets one user in until revoked, as a server whose credentials were rotated.
type revocable struct {
	user, password string
	revoked        atomic.Bool
}

func (a *revocable) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if a.revoked.Load() || o.Username != a.user || o.Password != a.password {
		return false
	}
	c.RegisterUser(&server.User{Username: a.user})
	return true
}
