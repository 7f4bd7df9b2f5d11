package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"go.yaml.in/yaml/v3"

	"github.com/kafkamender/kafkamender/internal/certs"
)

// secBase is a valid configuration to which the tests add security settings.
const secBase = `
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181"}
clusters:
  local:
    bootstrap_servers: ["127.0.0.1:9092"]
    zookeeper: "127.0.0.1:2181/kafka"
`

func TestSecretNeverPrints(t *testing.T) {
	const value = "hunter2-value"
	s := Secret(value)
	type holder struct {
		Password Secret `json:"password" yaml:"password"`
	}
	jsonOut, err := json.Marshal(holder{s})
	if err != nil {
		t.Fatal(err)
	}
	yamlOut, err := yaml.Marshal(holder{s})
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	zap.New(core).Info("x", zap.Any("secret", s), zap.Stringer("stringer", s), zap.Any("holder", holder{s}))
	var logged strings.Builder
	for _, e := range logs.All() {
		fmt.Fprint(&logged, e.ContextMap())
	}
	outputs := map[string]string{
		"%s": fmt.Sprintf("%s", s), "%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s),
		"%#v": fmt.Sprintf("%#v", s), "%q": fmt.Sprintf("%q", s), "%x": fmt.Sprintf("%x", s),
		"%10s": fmt.Sprintf("%10s", s), "%#v of a struct": fmt.Sprintf("%#v", holder{s}),
		"%+v of a struct": fmt.Sprintf("%+v", holder{s}), "String": s.String(), "GoString": s.GoString(),
		"json": string(jsonOut), "yaml": string(yamlOut), "text": string(text), "zap": logged.String(),
	}
	for how, out := range outputs {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("%s shows the secret: %s", how, out)
		}
		if how != "%x" && !strings.Contains(out, "[redacted]") {
			t.Errorf("%s = %q, want [redacted] in it", how, out)
		}
	}
	if s.Reveal() != value || !s.IsSet() {
		t.Errorf("Reveal() = %q, IsSet %v", s.Reveal(), s.IsSet())
	}
	var empty Secret
	if empty.String() != "" || fmt.Sprint(empty) != "" || empty.IsSet() {
		t.Errorf("empty secret prints %q", empty.String())
	}
}

func TestSecretRefusedInFile(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"nats password", `
nats: {url: "nats://127.0.0.1:4222", user: me, password: "hunter2-value"}
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}}
`, "nats.password: secrets are not read from the configuration file: use nats.password_file or KAFKAMENDER_NATS_PASSWORD (line 2)"},
		{"nats token, block style", `
nats:
  url: "nats://127.0.0.1:4222"
  token: hunter2-value
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}}
`, "nats.token: secrets are not read from the configuration file: use nats.token_file or KAFKAMENDER_NATS_TOKEN (line 4)"},
		{"cluster sasl password", `
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181"}
clusters:
  prod-eu:
    bootstrap_servers: ["127.0.0.1:9092"]
    sasl: {mechanism: PLAIN, username: u, password: 'hunter2-value'}
`, "clusters.prod-eu.sasl.password: secrets are not read from the configuration file: use clusters.prod-eu.sasl.password_file or KAFKAMENDER_CLUSTERS_PROD_EU_SASL_PASSWORD (line 7)"},
		{"zookeeper password, a number", `
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181", zookeeper_auth: {user: u, password: 1234567}}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}}
`, "lock.zookeeper_auth.password: secrets are not read from the configuration file: use lock.zookeeper_auth.password_file or KAFKAMENDER_LOCK_ZOOKEEPER_AUTH_PASSWORD (line 3)"},
		{"a mapping", `
nats: {url: "nats://127.0.0.1:4222", token: {a: b}}
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"]}}
`, "nats.token: want a string, got a mapping (line 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Parse =\n%v\nwant\n%s", err, tt.want)
			}
			for _, leak := range []string{"hunter2", "1234567"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error shows the secret: %v", err)
				}
			}
		})
	}

	// Empty: the key may be listed, with a comment saying where the secret comes from.
	if _, err := Parse([]byte(strings.Replace(secBase, `url: "nats://127.0.0.1:4222"`, `url: "nats://127.0.0.1:4222", password: "", token: ~`, 1))); err != nil {
		t.Errorf("empty secrets in the file: %v", err)
	}
}

// writeSecret writes a file of the test's temporary directory and returns its path.
func writeSecret(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretFromEnvironment(t *testing.T) {
	cfg, err := ParseEnv([]byte(strings.Replace(secBase, `url: "nats://127.0.0.1:4222"`, `url: "nats://127.0.0.1:4222", user: worker`, 1)+`
    sasl: {mechanism: SCRAM-SHA-512, username: kafkamender}
`), []string{"KAFKAMENDER_NATS_PASSWORD=  from-env-1\n", "KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD=from-env-2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.Password.Reveal() != "from-env-1" || cfg.Clusters["local"].SASL.Password.Reveal() != "from-env-2" {
		t.Errorf("passwords %q, %q", cfg.NATS.Password.Reveal(), cfg.Clusters["local"].SASL.Password.Reveal())
	}
	// A secret from the environment in a validation error stays hidden.
	_, err = ParseEnv([]byte(secBase), []string{"KAFKAMENDER_NATS_PASSWORD=from-env-1"})
	if err == nil || !strings.Contains(err.Error(), "nats.user (from") && !strings.Contains(err.Error(), "nats.user: required with nats.password") {
		t.Errorf("password without user: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "from-env-1") {
		t.Errorf("the error shows the secret: %v", err)
	}
}

func TestSecretFiles(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
		wantErr string
	}{
		{"plain", "pass-1", "pass-1", ""},
		{"one trailing newline dropped", "pass-2\n", "pass-2", ""},
		{"a CRLF dropped", "pass-3\r\n", "pass-3", ""},
		{"only one newline dropped", "pass-4\n\n", "pass-4\n", ""},
		{"inner white space kept", " pass 5 \n", " pass 5 ", ""},
		{"empty", "\n", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeSecret(t, "password", tt.content)
			cfg, err := Parse([]byte(strings.Replace(secBase, `url: "nats://127.0.0.1:4222"`,
				fmt.Sprintf(`url: "nats://127.0.0.1:4222", user: worker, password_file: %q`, p), 1)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "nats.password_file: "+p+": "+tt.wantErr) {
					t.Fatalf("Parse = %v, want an error naming nats.password_file and %s", err, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.NATS.Password.Reveal(); got != tt.want {
				t.Errorf("password %q, want %q", got, tt.want)
			}
			if cfg.NATS.PasswordFile != p {
				t.Errorf("password_file %q", cfg.NATS.PasswordFile)
			}
		})
	}

	// The user and user name files, the token, the ZooKeeper identities.
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := Parse(fmt.Appendf(nil, `
nats: {url: "nats://127.0.0.1:4222", token_file: %q}
lock: {zookeeper: "127.0.0.1:2181", zookeeper_auth: {user_file: %q, password_file: %q}}
clusters:
  local:
    bootstrap_servers: ["127.0.0.1:9092"]
    zookeeper: "127.0.0.1:2181/kafka"
    sasl: {mechanism: PLAIN, username_file: %q, password_file: %q}
    zookeeper_auth: {user: kafka, password_file: %q}
`, file("token", "tok\n"), file("zk-user", "kafkamender\n"), file("zk-password", "zkpass\n"),
		file("kafka-user", "kuser\n"), file("kafka-password", "kpass"), file("zk-kafka", "kafkazk\n")))
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Clusters["local"]
	got := []string{cfg.NATS.Token.Reveal(), cfg.Lock.ZooKeeperAuth.User, cfg.Lock.ZooKeeperAuth.Password.Reveal(),
		cl.SASL.Username, cl.SASL.Password.Reveal(), cl.ZooKeeperAuth.User, cl.ZooKeeperAuth.Password.Reveal()}
	want := []string{"tok", "kafkamender", "zkpass", "kuser", "kpass", "kafka", "kafkazk"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %q, want %q", got, want)
	}
}

func TestSecretFileErrors(t *testing.T) {
	secretFile := writeSecret(t, "password", "the-secret-content\n")
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name    string
		yaml    string
		environ []string
		want    []string
	}{
		{"missing file", `nats: {url: "nats://127.0.0.1:4222", user: u, password_file: "` + missing + `"}`, nil,
			[]string{"nats.password_file: open " + missing + ": no such file or directory"}},
		{"the secret and its file", `nats: {url: "nats://127.0.0.1:4222", user: u, password_file: "` + secretFile + `"}`,
			[]string{"KAFKAMENDER_NATS_PASSWORD=from-env"},
			[]string{"nats.password_file: nats.password is set too (from KAFKAMENDER_NATS_PASSWORD): set one"}},
		{"user and user_file", `nats: {url: "nats://127.0.0.1:4222", user: u, user_file: "` + secretFile + `", password_file: "` + secretFile + `"}`, nil,
			[]string{"nats.user_file: nats.user is set too (from the file): set one"}},
		{"file from the environment", `nats: {url: "nats://127.0.0.1:4222", user: u}`,
			[]string{"KAFKAMENDER_NATS_PASSWORD_FILE=" + missing},
			[]string{"nats.password_file (from KAFKAMENDER_NATS_PASSWORD_FILE): open " + missing + ": no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yml := tt.yaml + "\nlock: {zookeeper: \"127.0.0.1:2181\"}\nclusters: {local: {bootstrap_servers: [\"127.0.0.1:9092\"]}}\n"
			_, err := ParseEnv([]byte(yml), tt.environ)
			if err == nil {
				t.Fatalf("ParseEnv succeeded, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain\n%s", err, w)
				}
			}
			if strings.Contains(err.Error(), "the-secret-content") || strings.Contains(err.Error(), "from-env") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

func TestSecurityValidation(t *testing.T) {
	pw := writeSecret(t, "pw", "x")
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"two nats methods", `nats: {url: "nats://127.0.0.1:4222", user: u, password_file: "` + pw + `", token_file: "` + pw + `", creds_file: /x.creds}`,
			[]string{"nats: set one authentication method, not 3: nats.user, nats.token, nats.creds_file"}},
		{"url credentials and nkey", `nats: {url: "nats://u:p@127.0.0.1:4222", nkey_seed_file: /x.nk}`,
			[]string{"nats: set one authentication method, not 2: nats.url (credentials in the URL), nats.nkey_seed_file"}},
		{"nats user without password", `nats: {url: "nats://127.0.0.1:4222", user: u}`,
			[]string{"nats.password: required with nats.user: set nats.password_file or KAFKAMENDER_NATS_PASSWORD"}},
		{"nats password without user", `nats: {url: "nats://127.0.0.1:4222", password_file: "` + pw + `"}`,
			[]string{"nats.user: required with nats.password"}},
		{"nats cert without key", `nats: {url: "nats://127.0.0.1:4222", tls: {cert_file: /c.pem}}`,
			[]string{"nats.tls.key_file: required with cert_file"}},
		{"sasl without mechanism", `nats: {url: "nats://127.0.0.1:4222"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], sasl: {username: u}}}`,
			[]string{"clusters.local.sasl.mechanism: required with a username or password (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"}},
		{"unknown sasl mechanism, nothing else", `nats: {url: "nats://127.0.0.1:4222"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], sasl: {mechanism: GSSAPI}}}`,
			[]string{`clusters.local.sasl.mechanism: "GSSAPI": unknown mechanism`,
				"clusters.local.sasl.username: required with mechanism GSSAPI",
				"clusters.local.sasl.password: required with mechanism GSSAPI: set clusters.local.sasl.password_file or KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD"}},
		{"zookeeper_auth without zookeeper, and without password", `nats: {url: "nats://127.0.0.1:4222"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], zookeeper_auth: {user: "a:b"}}}`,
			[]string{"clusters.local.zookeeper_auth.password: required with clusters.local.zookeeper_auth.user",
				"clusters.local.zookeeper_auth.user: must not contain ':'",
				"clusters.local.zookeeper_auth: set, but the cluster has no zookeeper"}},
		{"lock zookeeper password without user", `nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181", zookeeper_auth: {password_file: "` + pw + `"}}`,
			[]string{"lock.zookeeper_auth.user: required with lock.zookeeper_auth.password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yml := tt.yaml
			if !strings.Contains(yml, "\nlock:") {
				yml += "\nlock: {zookeeper: \"127.0.0.1:2181\"}"
			}
			if !strings.Contains(yml, "\nclusters:") {
				yml += "\nclusters: {local: {bootstrap_servers: [\"127.0.0.1:9092\"]}}"
			}
			_, err := Parse([]byte(yml + "\n"))
			if err == nil {
				t.Fatalf("Parse succeeded, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain\n%s", err, w)
				}
			}
			if got, want := countJoined(err), len(tt.want); got != want {
				t.Errorf("%d problems, want %d:\n%v", got, want, err)
			}
		})
	}
}

func TestTLSFiles(t *testing.T) {
	ca, err := certs.NewCA("config test CA")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("worker", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "worker.pem"), filepath.Join(dir, "worker-key.pem")
	if err := ca.WritePEM(caFile, ""); err != nil {
		t.Fatal(err)
	}
	if err := client.WritePEM(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	notPEM := writeSecret(t, "garbage.pem", "not a certificate")

	cfg, err := Parse(fmt.Appendf(nil, `
nats: {url: "nats://127.0.0.1:4222", tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: nats.example}}
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], tls: {enabled: true}}}
`, caFile, certFile, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := cfg.NATS.TLS.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "nats.example" {
		t.Errorf("nats tls config: roots %v, %d certificates, server name %q", tc.RootCAs != nil, len(tc.Certificates), tc.ServerName)
	}
	if tc, err := cfg.Clusters["local"].TLS.ClientConfig(); err != nil || tc == nil || tc.RootCAs != nil {
		t.Errorf("enabled only: %+v, %v; want TLS with the system's roots", tc, err)
	}
	if tc, err := (TLS{}).ClientConfig(); tc != nil || err != nil {
		t.Errorf("no TLS: %v, %v", tc, err)
	}

	_, err = Parse(fmt.Appendf(nil, `
nats: {url: "nats://127.0.0.1:4222", tls: {ca_file: %q}}
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {local: {bootstrap_servers: ["127.0.0.1:9092"], tls: {cert_file: %q, key_file: %q}}}
`, notPEM, caFile, keyFile))
	for _, want := range []string{
		"clusters.local.tls: cert_file " + caFile + ", key_file " + keyFile + ": tls: private key does not match public key",
		"nats.tls: ca_file " + notPEM + ": no PEM certificate in it",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse = %v, want it to contain %q", err, want)
		}
	}
}

func TestNATSURLsNeverPrintCredentials(t *testing.T) {
	u := NATSURLs("nats://worker:SECRET-pw@a:4222,nats://SECRET-token@b:4222")
	jsonOut, _ := json.Marshal(struct{ URL NATSURLs }{u})
	yamlOut, _ := yaml.Marshal(struct{ URL NATSURLs }{u})
	text, _ := u.MarshalText()
	for how, out := range map[string]string{
		"%s": fmt.Sprintf("%s", u), "%v": fmt.Sprintf("%v", u), "%#v": fmt.Sprintf("%#v", u), "%q": fmt.Sprintf("%q", u),
		"json": string(jsonOut), "yaml": string(yamlOut), "text": string(text),
	} {
		if strings.Contains(out, "SECRET") || !strings.Contains(out, "nats://worker:xxxxx@a:4222,nats://xxxxx@b:4222") {
			t.Errorf("%s: %s", how, out)
		}
	}
	if u.Reveal() != "nats://worker:SECRET-pw@a:4222,nats://SECRET-token@b:4222" {
		t.Errorf("Reveal() = %q", u.Reveal())
	}
	if _, err := Parse([]byte("nats: {url: [a]}\nlock: {zookeeper: \"127.0.0.1:2181\"}\nclusters: {c: {bootstrap_servers: [\"x:1\"]}}\n")); err == nil ||
		!strings.Contains(err.Error(), "nats.url: want a string, got a list") {
		t.Errorf("nats.url a list: %v", err)
	}
}
