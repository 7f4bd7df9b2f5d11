package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// natsConfig is a configuration whose nats section is the YAML given (a flow mapping's
// content), with the environment given.
func natsConfig(t *testing.T, nats string, environ ...string) *config.Config {
	t.Helper()
	return natsConfigWith(t, fmt.Sprintf(`
nats: {%s}
lock: {backend: nats}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}}
`, nats), environ...)
}

// natsConfigWith parses a whole configuration with the environment given.
func natsConfigWith(t *testing.T, yaml string, environ ...string) *config.Config {
	t.Helper()
	cfg, err := config.ParseEnv([]byte(yaml), environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// connectAndProbe connects as the worker does and returns what the NATS dependency says
// once it has been set (connected, or an error), within 10s.
func connectAndProbe(t *testing.T, cfg *config.Config) (string, error) {
	t.Helper()
	h, _, logs := newTestHealth(t)
	dep := h.add(kindNATS, "nats", true, nil)
	nc, err := connectNATS(cfg, h.logger, h, dep)
	if err != nil {
		return "", err
	}
	defer nc.conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		checked, up, detail, lastErr := dep.checked, dep.up, dep.detail, dep.lastErr
		h.mu.Unlock()
		switch {
		case checked && up:
			return detail, nil
		case checked:
			// set logs after it has stored the state: wait for the line.
			for i := 0; i < 100 && logs.FilterMessage("dependency down").Len() == 0; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if logs.FilterMessage("dependency down").Len() != 1 {
				t.Errorf("dependency down logged %d times, want once", logs.FilterMessage("dependency down").Len())
			}
			return "", fmt.Errorf("%s", lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, perr := nc.probe(ctx)
	t.Fatalf("the NATS dependency was never set; the probe says %v", perr)
	return "", nil
}

func TestNATSSecurity(t *testing.T) {
	const user, password = "worker", "nats-secret-1"
	users := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{Users: map[string]string{user: password}})
	mutual := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{Users: map[string]string{user: password}, VerifyClients: true})
	token := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{Token: "nats-token-1"})
	seed, pub := newUserNKey(t)
	nkeyServer := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{NKeys: []string{pub}})
	seedFile := filepath.Join(t.TempDir(), "worker.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	otherCA := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{}) // its CA signs nothing the others have
	pwEnv := "KAFKAMENDER_NATS_PASSWORD=" + password

	tests := []struct {
		name    string
		nats    string
		environ []string
		wantErr string
	}{
		{name: "user, password and the CA",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q}", users.URL, user, users.CAFile), environ: []string{pwEnv}},
		{name: "nats:// URL, TLS from the tls fields",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q}", strings.Replace(users.URL, "tls://", "nats://", 1), user, users.CAFile), environ: []string{pwEnv}},
		{name: "client certificate",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q, cert_file: %q, key_file: %q}", mutual.URL, user, mutual.CAFile, mutual.ClientCertFile, mutual.ClientKeyFile), environ: []string{pwEnv}},
		{name: "token",
			nats: fmt.Sprintf("url: %q, tls: {ca_file: %q}", token.URL, token.CAFile), environ: []string{"KAFKAMENDER_NATS_TOKEN=nats-token-1"}},
		{name: "nkey",
			nats: fmt.Sprintf("url: %q, nkey_seed_file: %q, tls: {ca_file: %q}", nkeyServer.URL, seedFile, nkeyServer.CAFile)},
		{name: "wrong password",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q}", users.URL, user, users.CAFile), environ: []string{"KAFKAMENDER_NATS_PASSWORD=not-it"},
			wantErr: "authentication failed: the server refused user worker (nats.user, nats.password): nats: Authorization Violation"},
		{name: "no credentials",
			nats:    fmt.Sprintf("url: %q, tls: {ca_file: %q}", users.URL, users.CAFile),
			wantErr: "authentication failed: the server refused no credentials (set nats.user, nats.token, nats.nkey_seed_file or nats.creds_file)"},
		{name: "wrong token",
			nats: fmt.Sprintf("url: %q, tls: {ca_file: %q}", token.URL, token.CAFile), environ: []string{"KAFKAMENDER_NATS_TOKEN=nats-token-2"},
			wantErr: "authentication failed: the server refused a token (nats.token)"},
		{name: "untrusted CA",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q}", users.URL, user, otherCA.CAFile), environ: []string{pwEnv},
			wantErr: "tls: the server's certificate is signed by an authority not trusted (nats.tls.ca_file)"},
		{name: "system CAs",
			nats: fmt.Sprintf("url: %q, user: %s", users.URL, user), environ: []string{pwEnv},
			wantErr: "tls: the server's certificate is signed by an authority not trusted (nats.tls.ca_file)"},
		{name: "certificate for another name",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q, server_name: nats.example.com}", users.URL, user, users.CAFile), environ: []string{pwEnv},
			wantErr: "tls: the server's certificate is not valid for nats.example.com (nats.tls.server_name)"},
		{name: "missing client certificate",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q}", mutual.URL, user, mutual.CAFile), environ: []string{pwEnv},
			// Or, when the server hangs up before its alert arrives, "tls: the server closed
			// the connection after the handshake: it refused the client certificate, or
			// requires one (nats.tls.cert_file, nats.tls.key_file)".
			wantErr: "client certificate"},
		{name: "client certificate of another CA",
			nats: fmt.Sprintf("url: %q, user: %s, tls: {ca_file: %q, cert_file: %q, key_file: %q}", mutual.URL, user, mutual.CAFile, otherCA.ClientCertFile, otherCA.ClientKeyFile), environ: []string{pwEnv},
			wantErr: "client certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			detail, err := connectAndProbe(t, natsConfig(t, tt.nats, tt.environ...))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				if !strings.HasPrefix(detail, "connected to tls://127.0.0.1:") && !strings.HasPrefix(detail, "connected to nats://127.0.0.1:") {
					t.Errorf("detail %q", detail)
				}
				return
			}
			if err == nil {
				t.Fatalf("connected (%s), want %q", detail, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error:\n%v\nwant it to contain\n%s", err, tt.wantErr)
			}
			if tt.wantErr == "client certificate" && !strings.Contains(err.Error(), "(nats.tls.cert_file") {
				t.Errorf("error:\n%v\nwant it to name nats.tls.cert_file", err)
			}
			for _, secret := range []string{password, "nats-token-1", "nats-token-2", "not-it", string(seed)} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s to say so", d)
			}
		})
	}
}

func TestNATSSecurityOptionErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("no key here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		nats config.NATS
		want string
	}{
		{"nkey seed file missing", config.NATS{NKeySeedFile: filepath.Join(dir, "none.nk")}, "nats.nkey_seed_file " + filepath.Join(dir, "none.nk") + ": "},
		{"nkey seed file without a seed", config.NATS{NKeySeedFile: bad}, "nats.nkey_seed_file " + bad + ": "},
		{"creds file without a JWT", config.NATS{CredsFile: bad}, "nats.creds_file " + bad + ": no user JWT in it"},
		{"ca file missing", config.NATS{TLS: config.TLS{CAFile: filepath.Join(dir, "ca.pem")}}, "nats.tls: ca_file: open " + filepath.Join(dir, "ca.pem")},
	} {
		if _, err := natsSecurityOptions(tt.nats); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to start with %q", tt.name, err, tt.want)
		}
	}

	// A .creds file as nsc writes it: a user JWT signed by its account, and the user's seed.
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, pub := newUserNKey(t)
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(dir, "worker.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if opts, err := natsSecurityOptions(config.NATS{CredsFile: credsFile}); err != nil || len(opts) != 1 {
		t.Errorf("a valid .creds file: %d options, %v", len(opts), err)
	}
	if err := os.WriteFile(bad, []byte(token), 0o600); err != nil { // a JWT without the seed
		t.Fatal(err)
	}
	if _, err := natsSecurityOptions(config.NATS{CredsFile: bad}); err == nil || err.Error() != "nats.creds_file "+bad+": no NKEY seed in it" {
		t.Errorf("a JWT alone: %v", err)
	}
}

func newUserNKey(t *testing.T) (seed []byte, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err = kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	public, err = kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return seed, public
}
