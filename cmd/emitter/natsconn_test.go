package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/testenv"
)

// writeContext writes the nats CLI context name under home/.config and returns home.
func writeContext(t *testing.T, home, name, body string) {
	t.Helper()
	dir := filepath.Join(home, ".config", "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolveNATS(t *testing.T) {
	home := t.TempDir()
	writeContext(t, home, "prod", `{"description": "prod", "url": "tls://ctx:4222", "user": "ctx-user", "password": "ctx-pw",
		"ca": "/ctx/ca.pem", "cert": "/ctx/c.pem", "key": "/ctx/k.pem", "jetstream_domain": "", "nsc": ""}`)
	writeContext(t, home, "tok", `{"url": "nats://tok:4222", "token": "ctx-token"}`)
	writeContext(t, home, "broken", `{"url": "nats://x:4222", "password": "ctx-pw",`)
	tests := []struct {
		name     string
		flags    []string
		vars     map[string]string
		wantURL  string
		wantAuth natsAuth
		wantErr  string
	}{
		{name: "nothing: the local stack", wantURL: defaultNATSURL},
		{name: "--server", flags: []string{"--server", "tls://a:4222"}, wantURL: "tls://a:4222"},
		{name: "--nats-url still works", flags: []string{"--nats-url", "nats://b:4222"}, wantURL: "nats://b:4222"},
		{name: "NATS_URL", vars: map[string]string{"NATS_URL": "nats://c:4222"}, wantURL: "nats://c:4222"},
		{name: "KAFKAMENDER_NATS_URL before NATS_URL", vars: map[string]string{"NATS_URL": "nats://c:4222", envNATSURL: "nats://d:4222"}, wantURL: "nats://d:4222"},
		{name: "user and password, TLS files",
			flags:   []string{"--user", "u", "--password", "p", "--tlsca", "/ca.pem", "--tlscert", "/c.pem", "--tlskey", "/k.pem", "--creds", "/u.creds", "--nkey", "/u.nk"},
			wantURL: defaultNATSURL, wantAuth: natsAuth{user: "u", password: "p", ca: "/ca.pem", cert: "/c.pem", key: "/k.pem", creds: "/u.creds", nkey: "/u.nk"}},
		{name: "from the nats CLI's variables",
			vars:    map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p", "NATS_CA": "/ca.pem", "NATS_CREDS": "/u.creds", "NATS_NKEY": "/u.nk", "NATS_CERT": "/c.pem", "NATS_KEY": "/k.pem"},
			wantURL: defaultNATSURL, wantAuth: natsAuth{user: "u", password: "p", ca: "/ca.pem", cert: "/c.pem", key: "/k.pem", creds: "/u.creds", nkey: "/u.nk"}},
		{name: "a user alone is a token", flags: []string{"--user", "s3cret-token"}, wantURL: defaultNATSURL, wantAuth: natsAuth{token: "s3cret-token"}},
		{name: "context", flags: []string{"--context", "prod"}, vars: map[string]string{"HOME": home},
			wantURL: "tls://ctx:4222", wantAuth: natsAuth{context: "prod", user: "ctx-user", password: "ctx-pw", ca: "/ctx/ca.pem", cert: "/ctx/c.pem", key: "/ctx/k.pem"}},
		{name: "flags and variables before the context",
			flags:   []string{"--context", "prod", "--server", "nats://flag:4222", "--tlsca", "/flag/ca.pem"},
			vars:    map[string]string{"HOME": home, "NATS_USER": "env-user", "NATS_PASSWORD": "env-pw"},
			wantURL: "nats://flag:4222", wantAuth: natsAuth{context: "prod", user: "env-user", password: "env-pw", ca: "/flag/ca.pem", cert: "/ctx/c.pem", key: "/ctx/k.pem"}},
		{name: "NATS_CONTEXT, XDG_CONFIG_HOME", vars: map[string]string{"NATS_CONTEXT": "tok", "XDG_CONFIG_HOME": filepath.Join(home, ".config")},
			wantURL: "nats://tok:4222", wantAuth: natsAuth{context: "tok", token: "ctx-token"}},
		{name: "unknown context", flags: []string{"--context", "nope"}, vars: map[string]string{"HOME": home},
			wantErr: "--context nope: open " + filepath.Join(home, ".config", "nats", "context", "nope.json") + ": no such file or directory"},
		{name: "broken context", flags: []string{"--context", "broken"}, vars: map[string]string{"HOME": home},
			wantErr: "--context broken: " + filepath.Join(home, ".config", "nats", "context", "broken.json") + " is not a nats context: invalid JSON at offset 46"},
		{name: "a path is no context name", flags: []string{"--context", "../x"}, wantErr: `--context "../x": not a context name`},
		{name: "password without user", flags: []string{"--password", "p"}, wantErr: "--password: a password needs a --user"},
		{name: "certificate without key", flags: []string{"--tlscert", "/c.pem"}, wantErr: "--tlscert and --tlskey: give both or neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, _ := testEnv(tt.vars)
			o, err := parseResultFlags(append([]string{"--id", "x"}, tt.flags...), e)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if _, ok := err.(usageError); !ok {
					t.Errorf("%T, want a usage error", err)
				}
				for _, secret := range []string{"ctx-pw", "s3cret"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.natsURL != tt.wantURL || o.natsAuth != tt.wantAuth {
				t.Errorf("url %q, auth %+v\nwant %q, %+v", o.natsURL, o.natsAuth, tt.wantURL, tt.wantAuth)
			}
		})
	}
}

// Every command that talks to NATS has the connection flags.
func TestNATSFlagsEverywhere(t *testing.T) {
	for _, cmd := range []string{"publish", "preferred-leader", "broker-overloaded", "replication-factor", "logdir-move",
		"broker-failed", "broker-drain", "broker-added", "partition-offline", "result", "approve", "deny", "plans", "plan"} {
		e, stdout, _ := testEnv(nil)
		run(t.Context(), []string{cmd, "--help"}, e)
		for _, flag := range []string{"--server URLS", "--nats-url", "--context NAME", "--creds FILE", "--nkey FILE", "--user USER", "--password PASSWORD", "--tlsca FILE", "--tlscert FILE", "--tlskey FILE"} {
			if !strings.Contains(stdout.String(), "  "+flag) {
				t.Errorf("emitter %s --help lacks %s", cmd, flag)
			}
		}
	}
}

// The emitter publishes to a server that wants TLS with its own CA and a user, given by
// flags, by the nats CLI's variables or by a context; a wrong password and an untrusted
// CA fail saying what to check.
func TestPublishSecured(t *testing.T) {
	const user, password = "emitter", "emitter-secret-1"
	srv := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{Users: map[string]string{user: password}, JetStream: true})
	other := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{})
	admin, err := nats.Connect(srv.URL, nats.RootCAs(srv.CAFile), nats.UserInfo(user, password))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ensureStreams(t, js)

	home := t.TempDir()
	writeContext(t, home, "secure", fmt.Sprintf(`{"url": %q, "user": %q, "password": %q, "ca": %q}`, srv.URL, user, password, srv.CAFile))
	base := []string{"publish", "--cluster", "local", "--type", "broker-overloaded", "--data", `{"broker":1}`, "--timeout", "5s"}
	tests := []struct {
		name     string
		args     []string
		vars     map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "flags", args: []string{"--server", srv.URL, "--tlsca", srv.CAFile, "--user", user, "--password", password}, wantCode: exitOK},
		{name: "variables", vars: map[string]string{"NATS_URL": srv.URL, "NATS_CA": srv.CAFile, "NATS_USER": user, "NATS_PASSWORD": password}, wantCode: exitOK},
		{name: "context", args: []string{"--context", "secure"}, vars: map[string]string{"HOME": home}, wantCode: exitOK},
		{name: "wrong password", args: []string{"--server", srv.URL, "--tlsca", srv.CAFile, "--user", user, "--password", "not-it"},
			wantCode: exitFailure, wantErr: "Authorization Violation (check --user and --password, --creds, --nkey or --context)"},
		{name: "untrusted CA", args: []string{"--server", srv.URL, "--tlsca", other.CAFile, "--user", user, "--password", password},
			wantCode: exitFailure, wantErr: "x509: certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stdout, stderr := testEnv(tt.vars)
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			code := run(ctx, append(append(append([]string(nil), base...), "--id", strings.ReplaceAll(tt.name, " ", "-")), tt.args...), e)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout, stderr)
			}
			if tt.wantErr != "" && !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tt.wantErr)
			}
			if tt.wantErr == "" && !strings.Contains(stdout.String(), "published to stream "+"KAFKAMENDER_EVENTS") {
				t.Errorf("stdout %q", stdout)
			}
			if strings.Contains(stderr.String(), password) || strings.Contains(stdout.String(), password) {
				t.Errorf("the output shows the password:\n%s%s", stdout, stderr)
			}
		})
	}
}
