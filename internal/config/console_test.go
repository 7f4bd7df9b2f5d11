package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Tokens long enough to be accepted; none of them may show in an error or a print.
const (
	consoleOperatorToken = "operator-0123456789abcdef"
	consoleViewerToken   = "viewer-0123456789abcdef"
)

func TestConsoleValidation(t *testing.T) {
	tests := []struct {
		name    string
		console string   // appended to base and oneCluster
		env     []string // as ParseEnv takes it
		want    []string // each must appear in the error; none: the configuration parses
	}{
		// Valid.
		{
			name:    "off, the default",
			console: "",
		},
		{
			name:    "enabled with both tokens from the environment",
			console: "console: {enabled: true}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=" + consoleOperatorToken, "KAFKAMENDER_CONSOLE_VIEWER_TOKEN=" + consoleViewerToken},
		},
		{
			name:    "enabled behind a proxy",
			console: "console: {enabled: true, listen: '127.0.0.1:8081', proxy: {user_header: X-Forwarded-Email, groups_header: X-Forwarded-Groups, operators: [alice@example.com, 'group:kafka-oncall']}}\n",
		},
		{
			name:    "own listener with mutual TLS and a viewer token",
			console: "console: {enabled: true, listen: '0.0.0.0:9444', tls: {cert_file: c.crt, key_file: c.key, client_ca_file: ca.crt, client_names: [proxy.svc]}}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_VIEWER_TOKEN=" + consoleViewerToken},
		},

		// Authentication.
		{
			name:    "enabled with no way to authenticate",
			console: "console: {enabled: true}\n",
			want:    []string{"console: enabled with no way to authenticate anyone"},
		},
		{
			name:    "a short token is refused even with the console off",
			console: "",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=tok-7x"},
			want:    []string{"console.operator_token (from KAFKAMENDER_CONSOLE_OPERATOR_TOKEN): shorter than 16 characters"},
		},
		{
			name:    "short operator token",
			console: "console: {enabled: true}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=fifteen-chars-x"},
			want:    []string{"console.operator_token (from KAFKAMENDER_CONSOLE_OPERATOR_TOKEN): shorter than 16 characters"},
		},
		{
			name:    "short viewer token",
			console: "console: {enabled: true}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=" + consoleOperatorToken, "KAFKAMENDER_CONSOLE_VIEWER_TOKEN=vw-9q"},
			want:    []string{"console.viewer_token (from KAFKAMENDER_CONSOLE_VIEWER_TOKEN): shorter than 16 characters"},
		},
		{
			name:    "the same token for operator and viewer",
			console: "console: {enabled: true}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=" + consoleOperatorToken, "KAFKAMENDER_CONSOLE_VIEWER_TOKEN=" + consoleOperatorToken},
			want:    []string{"console.viewer_token (from KAFKAMENDER_CONSOLE_VIEWER_TOKEN): the same as operator_token"},
		},
		{
			name:    "a token in the file",
			console: "console: {enabled: true, operator_token: " + consoleOperatorToken + "}\n",
			want:    []string{"console.operator_token: secrets are not read from the configuration file: use console.operator_token_file or KAFKAMENDER_CONSOLE_OPERATOR_TOKEN"},
		},
		{
			name:    "a token from the environment and its file",
			console: "console: {enabled: true, operator_token_file: /nonexistent/operator-token}\n",
			env:     []string{"KAFKAMENDER_CONSOLE_OPERATOR_TOKEN=" + consoleOperatorToken},
			want:    []string{"console.operator_token_file: console.operator_token is set too (from KAFKAMENDER_CONSOLE_OPERATOR_TOKEN): set one"},
		},
		{
			name:    "a token file that cannot be read",
			console: "console: {enabled: true, viewer_token_file: /nonexistent/viewer-token}\n",
			want:    []string{"console.viewer_token_file: open /nonexistent/viewer-token"},
		},

		// Listener and TLS.
		{
			name:    "tls without listen",
			console: "console: {enabled: true, proxy: {user_header: X-Forwarded-User}, tls: {cert_file: c.crt, key_file: c.key}}\n",
			want:    []string{"console.tls: needs console.listen"},
		},
		{
			name:    "cert without key",
			console: "console: {enabled: true, listen: '0.0.0.0:9444', proxy: {user_header: X-Forwarded-User}, tls: {cert_file: c.crt}}\n",
			want:    []string{"console.tls.key_file: required with cert_file"},
		},
		{
			name:    "client CA without a certificate",
			console: "console: {enabled: true, listen: '0.0.0.0:9444', proxy: {user_header: X-Forwarded-User}, tls: {client_ca_file: ca.crt}}\n",
			want:    []string{"console.tls.client_ca_file: needs cert_file and key_file"},
		},
		{
			name:    "client names without a client CA",
			console: "console: {enabled: true, listen: '0.0.0.0:9444', proxy: {user_header: X-Forwarded-User}, tls: {cert_file: c.crt, key_file: c.key, client_names: [a]}}\n",
			want:    []string{"console.tls.client_names: needs client_ca_file"},
		},
		{
			name:    "bad listen",
			console: "console: {enabled: true, listen: 'nowhere', proxy: {user_header: X-Forwarded-User}}\n",
			want:    []string{`console.listen: "nowhere"`},
		},
		{
			name:    "listen of the webhook",
			console: "console: {enabled: true, listen: '0.0.0.0:9443', proxy: {user_header: X-Forwarded-User}}\nalertmanager: {listen: '0.0.0.0:9443'}\n",
			want:    []string{`console.listen: "0.0.0.0:9443": alertmanager.listen binds it already`},
		},

		// The proxy.
		{
			name:    "bad user header name",
			console: "console: {enabled: true, proxy: {user_header: 'X Forwarded User'}}\n",
			want:    []string{`console.proxy.user_header: "X Forwarded User": not a header name`},
		},
		{
			name:    "bad groups header name",
			console: "console: {enabled: true, proxy: {user_header: X-Forwarded-User, groups_header: 'X-Groups:'}}\n",
			want:    []string{`console.proxy.groups_header: "X-Groups:": not a header name`},
		},
		{
			name:    "groups header without user header",
			console: "console: {enabled: true, proxy: {groups_header: X-Forwarded-Groups}}\n",
			want:    []string{"console.proxy.user_header: required with groups_header or operators", "console: enabled with no way to authenticate anyone"},
		},
		{
			name:    "operators without user header",
			console: "console: {enabled: false, proxy: {operators: [alice]}}\n",
			want:    []string{"console.proxy.user_header: required with groups_header or operators"},
		},

		// The session.
		{
			name:    "negative session_ttl",
			console: "console: {enabled: true, proxy: {user_header: X-Forwarded-User}, session_ttl: -1h}\n",
			want:    []string{"console.session_ttl: -1h0m0s: must be positive"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseEnv([]byte(base+oneCluster+tt.console), tt.env)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ParseEnv: %v", err)
				}
				if cfg.Console.SessionTTL != DefaultConsoleSessionTTL {
					t.Errorf("session_ttl = %s, want %s", cfg.Console.SessionTTL, DefaultConsoleSessionTTL)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseEnv: no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseEnv error:\n%v\nwant in it: %s", err, w)
				}
			}
			for _, token := range []string{consoleOperatorToken, consoleViewerToken, "fifteen-chars-x", "tok-7x", "vw-9q"} {
				if strings.Contains(err.Error(), token) {
					t.Errorf("the error shows the token %q: %v", token, err)
				}
			}
		})
	}
}

// Tokens read from their files are the console's; the session lasts 12h by default; no
// print of the configuration shows them.
func TestConsoleTokenFiles(t *testing.T) {
	dir := t.TempDir()
	opFile := filepath.Join(dir, "operator-token")
	viewFile := filepath.Join(dir, "viewer-token")
	writeFile(t, opFile, consoleOperatorToken+"\n")
	writeFile(t, viewFile, consoleViewerToken)
	cfg, err := Parse([]byte(base + oneCluster + fmt.Sprintf(`
console:
  enabled: true
  operator_token_file: %q
  viewer_token_file: %q
`, opFile, viewFile)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	c := cfg.Console
	if c.OperatorToken.Reveal() != consoleOperatorToken || c.ViewerToken.Reveal() != consoleViewerToken {
		t.Errorf("tokens %q, %q; want those of the files", c.OperatorToken.Reveal(), c.ViewerToken.Reveal())
	}
	if c.SessionTTL != DefaultConsoleSessionTTL || DefaultConsoleSessionTTL.String() != "12h0m0s" {
		t.Errorf("session_ttl = %s, want 12h", c.SessionTTL)
	}
	if !c.Authenticated() {
		t.Error("Authenticated() = false with two tokens")
	}
	if got := c.Addr("127.0.0.1:8080"); got != "127.0.0.1:8080" {
		t.Errorf("Addr = %q, want http.listen", got)
	}

	jsonOut, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	yamlOut, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"%+v of the console": fmt.Sprintf("%+v", c), "%s of the token": fmt.Sprintf("%s", c.OperatorToken),
		"json": string(jsonOut), "yaml": string(yamlOut),
	}
	for how, out := range outputs {
		for _, token := range []string{consoleOperatorToken, consoleViewerToken} {
			if strings.Contains(out, token) {
				t.Errorf("%s shows the token %q: %s", how, token, out)
			}
		}
		if !strings.Contains(out, redacted) {
			t.Errorf("%s: want %s in it: %s", how, redacted, out)
		}
	}
}
