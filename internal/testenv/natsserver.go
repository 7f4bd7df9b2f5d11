package testenv

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/certs"
)

// StartNATSServer runs a nats-server with the options o inside the test process and
// returns it once it accepts connections; logger, when not nil, receives its log. It is
// shut down, and waited for, when the test ends.
func StartNATSServer(t testing.TB, o *server.Options, logger server.Logger) *server.Server {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	if logger != nil {
		s.SetLogger(logger, false, false)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready after 10s")
	}
	return s
}

// InProcessNATS starts a nats-server with JetStream inside the test process, on a random
// loopback port with its store in a temporary directory, for tests of NATS-only logic that
// need no Kafka (it is not the local stack's server, so such tests run beside any other).
// It returns a connection; both end with the test.
func InProcessNATS(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	s := StartNATSServer(t, &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}, nil)
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// InProcessJetStream is the JetStream of a connection to InProcessNATS.
func InProcessJetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	_, nc := InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
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

// SecureNATSOptions configures InProcessSecureNATS: TLS always, and how clients
// authenticate.
type SecureNATSOptions struct {
	// Users and their passwords.
	Users map[string]string
	// Token, when set, is the token clients authenticate with (no users then).
	Token string
	// NKeys are the public keys (U…) of users that authenticate with an NKEY.
	NKeys []string
	// VerifyClients makes the server require a client certificate signed by its CA.
	VerifyClients bool
	// JetStream enables JetStream, its store in a temporary directory.
	JetStream bool
}

// SecureNATS is an in-process nats-server that speaks TLS only, with a certificate
// authority of its own.
type SecureNATS struct {
	Server *server.Server
	// URL is tls://127.0.0.1:<port>.
	URL string
	// CA signed the server's certificate and ClientCert; CAFile holds its certificate.
	CA     *certs.CA
	CAFile string
	// ClientCertFile and ClientKeyFile are a client certificate the server accepts.
	ClientCertFile, ClientKeyFile string
}

// InProcessSecureNATS starts a nats-server inside the test process on a random loopback
// port, TLS only (its certificate valid for 127.0.0.1 and localhost), with the
// authentication opts asks for. It stops when the test ends.
func InProcessSecureNATS(t testing.TB, opts SecureNATSOptions) *SecureNATS {
	t.Helper()
	ca, err := certs.NewCA("in-process NATS CA")
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := ca.Issue("nats", []string{"127.0.0.1", "localhost"}, false)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("nats-client", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sn := &SecureNATS{CA: ca, CAFile: dir + "/ca.pem", ClientCertFile: dir + "/client.pem", ClientKeyFile: dir + "/client-key.pem"}
	if err := ca.WritePEM(sn.CAFile, ""); err != nil {
		t.Fatal(err)
	}
	if err := client.WritePEM(sn.ClientCertFile, sn.ClientKeyFile); err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{serverCert.TLSCertificate()}, MinVersion: tls.VersionTLS12}
	if opts.VerifyClients {
		tc.ClientCAs, tc.ClientAuth = ca.Pool(), tls.RequireAndVerifyClientCert
	}
	o := &server.Options{
		Host:          "127.0.0.1",
		Port:          server.RANDOM_PORT,
		TLS:           true,
		TLSVerify:     opts.VerifyClients,
		TLSConfig:     tc,
		TLSTimeout:    5,
		Authorization: opts.Token,
		JetStream:     opts.JetStream,
		NoLog:         true,
		NoSigs:        true,
	}
	if opts.JetStream {
		o.StoreDir = t.TempDir()
	}
	for _, user := range slices.Sorted(maps.Keys(opts.Users)) {
		o.Users = append(o.Users, &server.User{Username: user, Password: opts.Users[user]})
	}
	for _, pub := range opts.NKeys {
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub})
	}
	s := StartNATSServer(t, o, nil)
	sn.Server = s
	sn.URL = fmt.Sprintf("tls://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
	return sn
}

// Violations is a nats-server logger (StartNATSServer's) that keeps what the server logs
// about permissions, and drops the rest.
type Violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *Violations) record(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.Contains(line, "Violation") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}

// Lines returns the violations logged so far.
func (v *Violations) Lines() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.lines)
}

// Take returns the violations logged so far, and forgets them.
func (v *Violations) Take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.lines
	v.lines = nil
	return out
}

func (v *Violations) Noticef(format string, args ...any) { v.record(format, args...) }
func (v *Violations) Warnf(format string, args ...any)   { v.record(format, args...) }
func (v *Violations) Fatalf(format string, args ...any)  { v.record(format, args...) }
func (v *Violations) Errorf(format string, args ...any)  { v.record(format, args...) }
func (v *Violations) Debugf(format string, args ...any)  { v.record(format, args...) }
func (v *Violations) Tracef(format string, args ...any)  { v.record(format, args...) }
