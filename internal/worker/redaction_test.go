package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// No secret shows anywhere the worker writes: its log (every level, the clients' own
// messages included), the errors it returns, /readyz, /metrics, the configuration
// printed or encoded. Every secret has a recognizable value; the servers are there but
// refuse the worker (NATS over TLS with other users, a Kafka broker that refuses SASL, a
// ZooKeeper that records the identities), so that the worker authenticates, fails and
// reports it, for each NATS authentication method in turn.
func TestNoSecretInOutput(t *testing.T) {
	const (
		natsPassword  = "SECRET-nats-password-1f"
		natsToken     = "SECRET-nats-token-2e"
		kafkaPassword = "SECRET-kafka-password-3d"
		lockZKPass    = "SECRET-lock-zookeeper-4c"
		kafkaZKPass   = "SECRET-kafka-zookeeper-5b"
	)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seed, pub := newUserNKey(t)
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	userJWT, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{natsPassword, natsToken, kafkaPassword, lockZKPass, kafkaZKPass, string(seed)}

	natsServer := testenv.InProcessSecureNATS(t, testenv.SecureNATSOptions{Users: map[string]string{"someone-else": "x"}})
	broker := saslRejectingBroker(t)
	lockZK, clusterZK := testenv.StartFakeZooKeeper(t), testenv.StartFakeZooKeeper(t)

	methods := []struct {
		name    string
		nats    string // the nats section's authentication fields
		environ []string
	}{
		{"user and password", `user: worker, password_file: "` + file("nats-password", natsPassword) + `"`, nil},
		{"token", "", []string{"KAFKAMENDER_NATS_TOKEN=" + natsToken}},
		{"nkey", `nkey_seed_file: "` + file("worker.nk", string(seed)) + `"`, nil},
		{"creds", `creds_file: "` + file("worker.creds", string(creds)) + `"`, nil},
		{"password in the URL", "", []string{"KAFKAMENDER_NATS_URL=" + strings.Replace(natsServer.URL, "tls://", "tls://worker:"+natsPassword+"@", 1)}},
		{"token in the URL", "", []string{"KAFKAMENDER_NATS_URL=" + strings.Replace(natsServer.URL, "tls://", "tls://"+natsToken+"@", 1)}},
	}
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			environ := append([]string{
				"KAFKAMENDER_CLUSTERS_LOCAL_SASL_PASSWORD=" + kafkaPassword,
				"KAFKAMENDER_CLUSTERS_LOCAL_ZOOKEEPER_AUTH_PASSWORD=" + kafkaZKPass,
			}, m.environ...)
			auth := m.nats
			if auth != "" {
				auth = ", " + auth
			}
			cfg, err := config.ParseEnv(fmt.Appendf(nil, `
worker: {id: redaction-test}
http: {listen: "127.0.0.1:0"}
nats: {url: %q, tls: {ca_file: %q}%s}
lock:
  zookeeper: %q
  session_timeout: 2s
  zookeeper_auth: {user: kafkamender, password_file: %q}
clusters:
  local:
    bootstrap_servers: [%q]
    zookeeper: "%s/kafka"
    strategy: zk-reassign
    sasl: {mechanism: SCRAM-SHA-512, username: kafkamender}
    zookeeper_auth: {user: kafka}
  kraft:
    bootstrap_servers: [%q]
`, natsServer.URL, natsServer.CAFile, auth, lockZK.Addr, file("zk-password", lockZKPass), broker, clusterZK.Addr, broker), environ)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			fmt.Fprintf(&out, "%v\n%+v\n%#v\n", cfg, cfg, cfg)
			for _, cl := range cfg.Clusters {
				fmt.Fprintf(&out, "%+v\n%#v\n", *cl, *cl)
			}
			if b, err := json.Marshal(cfg); err == nil {
				out.Write(b)
			}
			out.WriteString(runAndCollect(t, cfg))
			for _, secret := range secrets {
				if strings.Contains(out.String(), secret) {
					i := strings.Index(out.String(), secret)
					t.Errorf("%.40s… shows (at %q)", secret, out.String()[max(0, i-200):i])
				}
			}
			// The test saw what it should have: the worker tried and was refused.
			for _, want := range []string{"authentication failed", "sasl authentication failed", `"state": "down"`} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output lacks %q: the worker did not get as far as the test needs", want)
				}
			}
		})
	}

	// The ZooKeeper identities reached the servers: the test would see them if they leaked.
	for _, f := range []*testenv.FakeZooKeeper{lockZK, clusterZK} {
		if !strings.Contains(fmt.Sprint(f.Requests()), "setAuth digest kafkamender:"+lockZKPass) {
			t.Errorf("the lock identity never reached ZooKeeper %s: %q", f.Addr, f.Requests())
		}
	}
	if !strings.Contains(fmt.Sprint(clusterZK.Requests()), "setAuth digest kafka:"+kafkaZKPass) {
		t.Errorf("Kafka's identity never reached the cluster's ZooKeeper: %q", clusterZK.Requests())
	}
}

// runAndCollect runs a worker with cfg until every dependency has been probed, and
// returns everything it wrote: its log at debug level, /readyz, /metrics and Run's error.
func runAndCollect(t *testing.T, cfg *config.Config) string {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	w, err := New(cfg, zap.New(core), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w.probeTimeout = 500 * time.Millisecond
	w.probeInterval = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	var out strings.Builder
	eventually(t, 10*time.Second, "the http listener", func() bool { return w.Addr() != "" })
	base := "http://" + w.Addr()
	// NATS and Kafka refuse the worker; the fake ZooKeepers take its identities.
	var last string
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body := get(t, base+"/readyz")
		last = body
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		probed := len(r.Dependencies) > 0
		for _, d := range r.Dependencies {
			want := "down"
			if d.Kind == kindZooKeeper {
				want = "up"
			}
			probed = probed && d.State == want && (want == "up" || d.LastError != "")
		}
		if probed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dependencies never were as expected:\n%s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a few more probes and reconnection attempts
	_, readyzBody := get(t, base+"/readyz")
	_, metricsBody := get(t, base+"/metrics")
	out.WriteString(readyzBody)
	out.WriteString(metricsBody)
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(&out, "Run: %v\n", err)
	}
	for _, e := range logs.All() {
		fmt.Fprintf(&out, "%s %s %s %v\n", e.Level, e.LoggerName, e.Message, e.ContextMap())
	}
	return out.String()
}
