package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The webhook publishes events that change clusters: with rules, it needs a credential
// wherever it can be reached beyond loopback, unless the configuration says otherwise
// explicitly; its TLS settings hang together.
func TestWebhookDoor(t *testing.T) {
	clearEnv(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const rule = "alertmanager:\n  rules:\n    - {alertname: A, type: broker-overloaded, fields: {broker: b}}\n"
	open := "http:\n  listen: 0.0.0.0:8080\n"
	tests := []struct {
		name, yaml string
		want       string // "" valid
	}{
		{"rules, every interface, no credential", base + oneCluster + open + rule,
			`alertmanager: the webhook (http.listen "0.0.0.0:8080") can be reached beyond loopback with no credential`},
		{"rules, empty host, no credential", base + oneCluster + "http:\n  listen: \":8080\"\n" + rule,
			`alertmanager: the webhook (http.listen ":8080") can be reached`},
		{"rules, own listener beyond loopback, no credential", base + oneCluster + rule + "  listen: 10.0.0.5:9443\n",
			`alertmanager: the webhook (alertmanager.listen "10.0.0.5:9443") can be reached`},
		{"rules, loopback", base + oneCluster + rule, ""},
		{"rules, localhost own listener", base + oneCluster + open + rule + "  listen: localhost:9443\n", ""},
		{"rules, ::1", base + oneCluster + "http:\n  listen: \"[::1]:8080\"\n" + rule, ""},
		{"no rules, every interface", base + oneCluster + open, ""},
		{"bearer token file", base + oneCluster + open + rule + "  bearer_token_file: " + token + "\n", ""},
		{"basic authentication", base + oneCluster + open + rule + "  username: am\n  password_file: " + token + "\n", ""},
		{"said explicitly", base + oneCluster + open + rule + "  insecure_allow_unauthenticated: true\n", ""},
		{"password without username", base + oneCluster + rule + "  password_file: " + token + "\n",
			"alertmanager.username: required with a password"},
		{"username without password", base + oneCluster + rule + "  username: am\n",
			"alertmanager.password_file: required with username"},
		{"tls without its own listener", base + oneCluster + rule + "  tls: {cert_file: a.crt, key_file: a.key}\n",
			"alertmanager.tls: needs alertmanager.listen"},
		{"client names without a client ca", base + oneCluster + rule + "  listen: 127.0.0.1:9443\n  tls: {cert_file: a.crt, key_file: a.key, client_names: [am]}\n",
			"alertmanager.tls.client_names: needs client_ca_file"},
		{"client ca without a certificate", base + oneCluster + rule + "  listen: 127.0.0.1:9443\n  tls: {client_ca_file: ca.crt}\n",
			"alertmanager.tls.client_ca_file: needs cert_file and key_file"},
		{"bad own listener", base + oneCluster + rule + "  listen: nowhere\n", `alertmanager.listen: "nowhere": want host:port`},
		{"negative limits", base + oneCluster + rule + "  max_alerts: -1\n", "alertmanager.max_alerts: -1: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Parse succeeded, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
			if tt.name == "bearer token file" && cfg.Alertmanager.BearerToken.Reveal() != "s3cret" {
				t.Errorf("bearer token %q read from its file, want s3cret", cfg.Alertmanager.BearerToken.Reveal())
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:1": true, "[::1]:8080": true, "localhost:80": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
