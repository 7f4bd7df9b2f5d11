package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/certs"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The acceptance of the secured local stack, as an operator would run it: the worker binary
// with deployments/local/worker-secure.yaml (NATS over TLS with a user, Kafka over SASL_SSL
// with SCRAM-SHA-512 under an ACL authorizer, ZooKeeper with a digest identity), driven by
// the emitter binary over the secured NATS server with the emitter's user. It runs the three
// kinds of change end to end, the guardrails refuse what they must with the cluster
// unchanged, wrong credentials, an untrusted certificate and a missing ACL each show on
// /readyz by name, and no secret shows in any log, result, /readyz or /metrics of the run.

const acceptanceSource = "kafkamender-acceptance"

type secureRun struct {
	t       *testing.T
	root    string
	sec     stack.Secrets
	worker  string // binary
	emitter string // binary
	secrets []string
	outputs []string // files and texts to search for secrets at the end
}

// config returns worker-secure.yaml with the HTTP listener on addr and the replacements
// applied (each must match once).
func (r *secureRun) config(addr string, replace ...string) string {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join(r.root, "deployments", "local", "worker-secure.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	text := string(raw)
	replace = append([]string{"listen: 127.0.0.1:8090", "listen: " + addr}, replace...)
	for i := 0; i+1 < len(replace); i += 2 {
		if strings.Count(text, replace[i]) != 1 {
			r.t.Fatalf("worker-secure.yaml holds %q %d times, want once", replace[i], strings.Count(text, replace[i]))
		}
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	path := filepath.Join(r.t.TempDir(), "worker-secure.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// start runs the worker binary from the repository root (the config's relative paths
// assume it) and returns its HTTP address; it is killed when the test ends.
func (r *secureRun) start(name string, replace ...string) string {
	r.t.Helper()
	addr := testenv.FreeAddr(r.t)
	cfg := r.config(addr, replace...)
	logPath := filepath.Join(r.t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(r.worker, "--config", cfg)
	cmd.Dir = r.root
	cmd.Env = testenv.WorkerEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.outputs = append(r.outputs, "file:"+logPath)
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	return addr
}

func (r *secureRun) get(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r.outputs = append(r.outputs, string(body))
	return resp.StatusCode, string(body)
}

// emit runs the emitter over the secured NATS server with the emitter's user and waits for
// the result.
func (r *secureRun) emit(args ...string) *events.Result {
	r.t.Helper()
	args = append(args, "--cluster", "local", "--server", stack.SecureNATSURL, "--tlsca", r.sec.CAFile,
		"--user", r.sec.NATSEmitterUser, "--wait", "--timeout", "3m", "-o", "json")
	cmd := exec.Command(r.emitter, args...)
	cmd.Env = append(testenv.WorkerEnv(), "NATS_PASSWORD="+r.sec.NATSEmitterPassword)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r.outputs = append(r.outputs, stdout.String(), stderr.String())
	var res events.Result
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		r.t.Fatalf("emitter %s: %v (%v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, jerr, stdout.String(), stderr.String())
	}
	return &res
}

func TestSecureStack(t *testing.T) {
	env := testenv.Get(t)
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := env.Stack.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	r := &secureRun{t: t, root: root, sec: sec, worker: buildWorker(t), emitter: buildBinary(t, "../emitter", "emitter"),
		secrets: []string{sec.NATSPassword, sec.NATSEmitterPassword, sec.KafkaPassword, sec.ZooKeeperPassword}}
	cl := env.Kafka(t, "local", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)

	// The guardrails beside worker-secure.yaml's protected topics: a cap on partitions,
	// for replica-change-requested one allowed source, and a cap on operations per hour
	// (high: its bucket, under the permissions docs/security.md gives the worker, is what
	// is tested; the operations below fail closed without them).
	addr := r.start("worker", `protected_topics: ["^protected-"]`,
		`protected_topics: ["^protected-"]
  max_partitions_per_event: 8
  max_operations_per_hour: 1000
  allowed_sources: {replica-change-requested: [`+acceptanceSource+`]}`)
	testenv.Eventually(t, 90*time.Second, func() error {
		if code, body := r.get(addr, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("not ready: %d %s", code, body)
		}
		return nil
	})

	t.Run("operations", func(t *testing.T) {
		pref := testenv.Name(t, "sec-pref")
		testenv.CreateTopic(t, cl, pref, [][]int32{{1, 2, 3}, {2, 3, 4}}, nil)
		res := r.emit("preferred-leader", "--topic", pref, "--partition", "1", "--broker", "3", "--source", acceptanceSource)
		if res.Status != events.StatusSucceeded || res.Strategy != "api" {
			t.Fatalf("preferred leader: %s (strategy %q): %s", res.Status, res.Strategy, res.Error)
		}
		// Eventually: the worker verified on a fresh read, but the broker this client asks
		// may lag the controller a moment (ZooKeeper mode).
		testenv.Eventually(t, 30*time.Second, func() error {
			if p := partition(t, env, cl, pref, 1); p.Replicas[0] != 3 || p.Leader != 3 {
				return fmt.Errorf("partition 1 of %s after the change: replicas %v, leader %d; want broker 3 first and leading", pref, p.Replicas, p.Leader)
			}
			return nil
		})

		hot := testenv.Name(t, "sec-hot")
		testenv.CreateTopic(t, cl, hot, [][]int32{{1, 2}, {1, 3}, {1, 4}, {1, 2}, {1, 3}, {1, 4}}, nil)
		res = r.emit("broker-overloaded", "--broker", "1", "--topics", hot)
		if res.Status != events.StatusSucceeded {
			t.Fatalf("broker-overloaded: %s: %s", res.Status, res.Error)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			led := 0
			for _, p := range env.Partitions(t, "local", cl, hot) {
				if p.Leader == 1 {
					led++
				}
				if p.Leader != p.Replicas[0] {
					return fmt.Errorf("%s-%d: leader %d, not its preferred replica %v", hot, p.Partition, p.Leader, p.Replicas)
				}
			}
			if led >= 6 || len(res.Changes) != 6-led {
				return fmt.Errorf("broker 1 leads %d of 6 partitions after the shed, with %d changes reported", led, len(res.Changes))
			}
			return nil
		})

		rf := testenv.Name(t, "sec-rf")
		testenv.CreateTopic(t, cl, rf, [][]int32{{1, 2}, {2, 3}, {3, 4}}, nil)
		testenv.Produce(t, cl, rf, 3, 40, 16<<10)
		res = r.emit("replication-factor", "--topic", rf, "--rf", "3", "--throttle", "20MB", "--source", acceptanceSource)
		if res.Status != events.StatusSucceeded || len(res.Changes) != 3 {
			t.Fatalf("replication factor 2 -> 3: %s with %d changes: %s", res.Status, len(res.Changes), res.Error)
		}
		testenv.Eventually(t, 30*time.Second, func() error {
			for _, p := range env.Partitions(t, "local", cl, rf) {
				if len(p.Replicas) != 3 || len(p.ISR) != 3 {
					return fmt.Errorf("%s-%d: replicas %v, in sync %v; want 3 of each", rf, p.Partition, p.Replicas, p.ISR)
				}
			}
			return nil
		})
		if th := env.BrokerThrottles(t, "local", cl); len(th) > 0 {
			t.Errorf("throttles left on the brokers: %v", th)
		}
	})

	// The lock znodes the operations took: writable by the worker's ZooKeeper identity
	// alone (anyone may read them), so no other client can create a claim in them.
	t.Run("lock znodes", func(t *testing.T) {
		zc := env.ZooKeeper(t)
		var root string
		for _, p := range []string{stack.KafkaChroot + "/kafkamender/secure/locks", "/kafkamender/secure/locks"} {
			if ok, _, err := zc.Exists(p); err == nil && ok {
				root = p
			}
		}
		if root == "" {
			t.Fatal("no /kafkamender/secure/locks, in the cluster's chroot or at the top")
		}
		acl, _, err := zc.GetACL(root)
		if err != nil {
			t.Fatal(err)
		}
		digest := false
		for _, a := range acl {
			switch {
			case a.Scheme == "digest" && strings.HasPrefix(a.ID, sec.ZooKeeperUser+":") && a.Perms == zk.PermAll:
				digest = true
			case a.Scheme == "world" && a.Perms == zk.PermRead:
			default:
				t.Errorf("%s grants %s:%s permissions %d", root, a.Scheme, a.ID, a.Perms)
			}
		}
		if !digest {
			t.Errorf("%s: ACL %+v, want all permissions for digest %s", root, acl, sec.ZooKeeperUser)
		}
		if _, err := zc.Create(root+"/"+testenv.Name(t, "intruder"), nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("an unauthenticated client creating under %s: %v, want %v", root, err, zk.ErrNoAuth)
		}
	})

	t.Run("guardrails", func(t *testing.T) {
		protected := "protected-" + testenv.Name(t, "sec")
		testenv.CreateTopic(t, cl, protected, [][]int32{{1, 2}, {2, 3}}, nil)
		wide := testenv.Name(t, "sec-wide")
		var assignment [][]int32
		for range 12 {
			assignment = append(assignment, []int32{1, 2})
		}
		testenv.CreateTopic(t, cl, wide, assignment, nil)
		other := testenv.Name(t, "sec-src")
		testenv.CreateTopic(t, cl, other, [][]int32{{1, 2}}, nil)
		for _, tc := range []struct {
			name, topic, want string
			args              []string
		}{
			{"protected topic", protected, "guardrails.protected_topics",
				[]string{"preferred-leader", "--topic", protected, "--broker", "2", "--source", acceptanceSource}},
			{"over the partition cap", wide, "guardrails.max_partitions_per_event",
				[]string{"preferred-leader", "--topic", wide, "--broker", "2", "--source", acceptanceSource}},
			{"source not allowed", other, "guardrails.allowed_sources",
				[]string{"preferred-leader", "--topic", other, "--broker", "2", "--source", "someone-else"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := env.Partitions(t, "local", cl, tc.topic)
				res := r.emit(tc.args...)
				if res.Status != events.StatusRejected || !strings.Contains(res.Error, tc.want) || len(res.Changes) != 0 {
					t.Fatalf("result %s (%d changes): %q; want rejected by %s", res.Status, len(res.Changes), res.Error, tc.want)
				}
				if after := env.Partitions(t, "local", cl, tc.topic); !samePlacement(before, after) {
					t.Fatalf("%s changed: before %v, after %v", tc.topic, before, after)
				}
			})
		}
	})

	// A source with a NATS user of its own (docs/security.md's kafkamender-alerting) may
	// publish what its permissions name, and the server refuses it anything else: source
	// authorization that NATS enforces, not a string the publisher writes.
	t.Run("source permissions", func(t *testing.T) {
		nc, err := nats.Connect(stack.SecureNATSURL, nats.UserInfo(sec.NATSAlertingUser, sec.NATSAlertingPassword), nats.RootCAs(sec.CAFile))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		event := func(typ string, data map[string]any) []byte {
			raw, err := json.Marshal(map[string]any{"specversion": "1.0", "id": testenv.Name(t, "src"), "source": "alerting",
				"type": typ, "datacontenttype": "application/json", "data": data})
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		// Allowed: stored (a dry run: it changes nothing).
		if _, err := js.Publish(t.Context(), events.Subject("local", events.TypeBrokerOverloaded),
			event(events.TypeBrokerOverloaded, map[string]any{"broker": 1, "dry_run": true})); err != nil {
			t.Fatalf("a broker-overloaded event: %v, want it stored", err)
		}
		// Not allowed: the server refuses the publish itself.
		denied := events.Subject("local", events.TypeReplicaChangeRequested)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := js.Publish(ctx, denied, event(events.TypeReplicaChangeRequested, map[string]any{"topic": "orders", "preferred_leader": 1})); err == nil {
			t.Fatalf("a replica-change-requested event was stored for a user allowed broker-overloaded only")
		}
		testenv.Eventually(t, 10*time.Second, func() error {
			if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), `Permissions Violation for Publish to "`+denied+`"`) {
				return fmt.Errorf("last error %v, want the server's permissions violation for %s", err, denied)
			}
			return nil
		})
	})

	t.Run("refusals on readyz", func(t *testing.T) {
		dir := t.TempDir()
		file := func(name, content string) string {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		otherCA, err := certs.NewCA("not the stack's CA")
		if err != nil {
			t.Fatal(err)
		}
		otherCAFile := file("other-ca.pem", string(otherCA.CertPEM))
		wrongKafka, wrongNATS := "wrong-kafka-pw-7f3a", "wrong-nats-pw-91c2"
		r.secrets = append(r.secrets, wrongKafka, wrongNATS)

		// A user of its own, with the documented ACLs less Alter on the cluster.
		limited, limitedPW := testenv.Name(t, "limited"), "limited-pw-5d8e"
		r.secrets = append(r.secrets, limitedPW)
		altered, err := adm.AlterUserSCRAMs(t.Context(), nil, []kadm.UpsertSCRAM{{User: limited, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: limitedPW}})
		if err == nil {
			err = altered.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		acls := []*kadm.ACLBuilder{
			kadm.NewACLs().Clusters().Allow("User:"+limited).AllowHosts("*").Operations(kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs),
			kadm.NewACLs().Topics("*").ResourcePatternType(kadm.ACLPatternLiteral).Allow("User:"+limited).AllowHosts("*").Operations(kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs),
		}
		for _, b := range acls {
			if _, err := adm.CreateACLs(t.Context(), b); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			for _, b := range acls {
				if _, err := adm.DeleteACLs(context.Background(), b); err != nil {
					t.Logf("delete the ACLs of %s: %v", limited, err)
				}
			}
			_, _ = adm.AlterUserSCRAMs(context.Background(), []kadm.DeleteSCRAM{{User: limited, Mechanism: kadm.ScramSha512}}, nil)
		})

		const kafkaCA, kafkaPW = "      ca_file: .state/stack/secure/ca.pem\n    sasl:", "password_file: .state/stack/secure/kafka-password"
		for _, tc := range []struct {
			name    string
			replace []string
			want    []string
		}{
			{"wrong Kafka password", []string{kafkaPW, "password_file: " + file("kafka-pw", wrongKafka)},
				[]string{"cluster local: sasl authentication failed", "clusters.local.sasl"}},
			{"untrusted Kafka certificate", []string{kafkaCA, "      ca_file: " + otherCAFile + "\n    sasl:"},
				[]string{"cluster local: tls: the server's certificate is signed by an authority not trusted", "clusters.local.tls.ca_file"}},
			{"missing Kafka ACL", []string{"username_file: .state/stack/secure/kafka-user", "username_file: " + file("kafka-user", limited),
				kafkaPW, "password_file: " + file("limited-pw", limitedPW)},
				[]string{"cluster local: missing Kafka permission Alter on Cluster"}},
			{"wrong NATS password", []string{"password_file: .state/stack/secure/nats-password", "password_file: " + file("nats-pw", wrongNATS)},
				[]string{"authentication failed", "nats.password"}},
			{"untrusted NATS certificate", []string{"    ca_file: .state/stack/secure/ca.pem\n  user_file", "    ca_file: " + otherCAFile + "\n  user_file"},
				[]string{"nats.tls.ca_file"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				addr := r.start(strings.ReplaceAll(tc.name, " ", "-"), tc.replace...)
				var body string
				// Before the worker's next probe (every 10s): a refusal is reported as it
				// happens, not found later.
				testenv.Eventually(t, 8*time.Second, func() error {
					var code int
					code, body = r.get(addr, "/readyz")
					for _, w := range tc.want {
						if code != http.StatusServiceUnavailable || !strings.Contains(body, w) {
							return fmt.Errorf("/readyz %d does not say %q: %s", code, w, body)
						}
					}
					return nil
				})
				t.Logf("/readyz: %s", body)
			})
		}
	})

	// The main worker's /metrics and /readyz, then every output of the run.
	for _, path := range []string{"/metrics", "/readyz"} {
		r.get(addr, path)
	}
	for _, out := range r.outputs {
		text := out
		if name, ok := strings.CutPrefix(out, "file:"); ok {
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			text = string(raw)
		}
		for _, s := range r.secrets {
			if strings.Contains(text, s) {
				t.Errorf("a secret shows in an output of the run: %.300q", text[max(0, strings.Index(text, s)-120):])
			}
		}
	}
}

func partition(t *testing.T, env *testenv.Env, cl *kgo.Client, topic string, p int32) model.Partition {
	t.Helper()
	for _, q := range env.Partitions(t, "local", cl, topic) {
		if q.Partition == p {
			return q
		}
	}
	t.Fatalf("%s has no partition %d", topic, p)
	return model.Partition{}
}

func samePlacement(a, b []model.Partition) bool {
	return slices.EqualFunc(a, b, func(x, y model.Partition) bool {
		return x.Partition == y.Partition && x.Leader == y.Leader && slices.Equal(x.Replicas, y.Replicas)
	})
}

// buildBinary builds the main package at dir into a temp dir, as name.
func buildBinary(t *testing.T, dir, name string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	args := append(append([]string{"build", "-o", bin}, flags...), dir)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return bin
}
