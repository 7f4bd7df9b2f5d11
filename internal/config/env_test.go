package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/guardrails"
)

// envBase is a valid configuration with two clusters; the cases below add variables.
const envBase = `
nats:
  url: nats://file:4222
lock:
  zookeeper: 127.0.0.1:2181
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    zookeeper: 127.0.0.1:2181/kafka
  prod-eu:
    bootstrap_servers: [127.0.0.1:29092]
`

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name string
		yaml string // envBase when empty
		env  []string
		// applied lists Config.EnvOverrides; got returns what check compares with want.
		applied []string
		got     func(*Config) any
		want    any
	}{
		{
			name:    "string",
			env:     []string{"KAFKAMENDER_NATS_URL=nats://me:pw@nats.example:4222"},
			applied: []string{"KAFKAMENDER_NATS_URL"},
			got:     func(c *Config) any { return c.NATS.URL.Reveal() },
			want:    "nats://me:pw@nats.example:4222",
		},
		{
			name:    "strings of several sections",
			env:     []string{"KAFKAMENDER_LOG_LEVEL=debug", "KAFKAMENDER_HTTP_LISTEN=:9090", "KAFKAMENDER_LOCK_ZOOKEEPER=zk:2181/locks", "KAFKAMENDER_WORKER_ID=w-7"},
			applied: []string{"KAFKAMENDER_HTTP_LISTEN", "KAFKAMENDER_LOCK_ZOOKEEPER", "KAFKAMENDER_LOG_LEVEL", "KAFKAMENDER_WORKER_ID"},
			got: func(c *Config) any {
				return []string{c.Log.Level, c.HTTP.Listen, c.Lock.ZooKeeper, c.Worker.ID}
			},
			want: []string{"debug", ":9090", "zk:2181/locks", "w-7"},
		},
		{
			name:    "string types: strategy and lock backend",
			env:     []string{"KAFKAMENDER_CLUSTERS_LOCAL_STRATEGY=zk-reassign", "KAFKAMENDER_LOCK_BACKEND=nats", "KAFKAMENDER_CLUSTERS_PROD_EU_LOCK_BACKEND=zookeeper"},
			applied: []string{"KAFKAMENDER_CLUSTERS_LOCAL_STRATEGY", "KAFKAMENDER_CLUSTERS_PROD_EU_LOCK_BACKEND", "KAFKAMENDER_LOCK_BACKEND"},
			got: func(c *Config) any {
				return []any{c.Clusters["local"].Strategy, c.Lock.Backend, c.Clusters["prod-eu"].Lock.Backend}
			},
			want: []any{StrategyZKReassign, LockNATS, LockZooKeeper},
		},
		{
			name:    "int and int64",
			env:     []string{"KAFKAMENDER_NATS_MAX_ATTEMPTS=3", "KAFKAMENDER_ALERTMANAGER_MAX_BYTES=2048", "KAFKAMENDER_REPLICATION_FACTOR_MAX_MOVES_PER_BROKER=-0"},
			applied: []string{"KAFKAMENDER_ALERTMANAGER_MAX_BYTES", "KAFKAMENDER_NATS_MAX_ATTEMPTS", "KAFKAMENDER_REPLICATION_FACTOR_MAX_MOVES_PER_BROKER"},
			got: func(c *Config) any {
				return []int64{int64(c.NATS.MaxAttempts), c.Alertmanager.MaxBytes, int64(c.ReplicationFactor.MaxMovesPerBroker)}
			},
			want: []int64{3, 2048, 5}, // -0 is 0: the default
		},
		{
			name: "booleans",
			env: []string{"KAFKAMENDER_BROKER_OVERLOADED_WAIT_FOR_REASSIGNMENT=true", "KAFKAMENDER_REPLICATION_FACTOR_ALLOW_INTERNAL_TOPICS=1",
				"KAFKAMENDER_PARTITION_OFFLINE_ALLOW_UNCLEAN=true"},
			applied: []string{"KAFKAMENDER_BROKER_OVERLOADED_WAIT_FOR_REASSIGNMENT", "KAFKAMENDER_PARTITION_OFFLINE_ALLOW_UNCLEAN",
				"KAFKAMENDER_REPLICATION_FACTOR_ALLOW_INTERNAL_TOPICS"},
			got: func(c *Config) any {
				return []bool{c.BrokerOverloaded.WaitForReassignment, c.ReplicationFactor.AllowInternal, c.PartitionOffline.AllowUnclean}
			},
			want: []bool{true, true, true},
		},
		{
			name:    "false overrides true from the file",
			yaml:    envBase + "broker_overloaded:\n  wait_for_reassignment: true\n",
			env:     []string{"KAFKAMENDER_BROKER_OVERLOADED_WAIT_FOR_REASSIGNMENT=false"},
			applied: []string{"KAFKAMENDER_BROKER_OVERLOADED_WAIT_FOR_REASSIGNMENT"},
			got:     func(c *Config) any { return c.BrokerOverloaded.WaitForReassignment },
			want:    false,
		},
		{
			name:    "unclean elections allowed by the file, refused by the environment",
			yaml:    envBase + "partition_offline:\n  allow_unclean: true\n",
			env:     []string{"KAFKAMENDER_PARTITION_OFFLINE_ALLOW_UNCLEAN=false"},
			applied: []string{"KAFKAMENDER_PARTITION_OFFLINE_ALLOW_UNCLEAN"},
			got:     func(c *Config) any { return c.PartitionOffline.AllowUnclean },
			want:    false,
		},
		{
			name:    "durations",
			env:     []string{"KAFKAMENDER_NATS_ACK_WAIT=1m30s", "KAFKAMENDER_LOCK_NATS_TTL=15s", "KAFKAMENDER_REPLICATION_FACTOR_TIMEOUT=2h"},
			applied: []string{"KAFKAMENDER_LOCK_NATS_TTL", "KAFKAMENDER_NATS_ACK_WAIT", "KAFKAMENDER_REPLICATION_FACTOR_TIMEOUT"},
			got: func(c *Config) any {
				return []time.Duration{c.NATS.AckWait, c.Lock.NATS.TTL, c.ReplicationFactor.Timeout}
			},
			want: []time.Duration{90 * time.Second, 15 * time.Second, 2 * time.Hour},
		},
		{
			name:    "number behind a pointer",
			env:     []string{"KAFKAMENDER_LOGDIR_TOLERANCE=0.25"},
			applied: []string{"KAFKAMENDER_LOGDIR_TOLERANCE"},
			got:     func(c *Config) any { return *c.LogDir.Tolerance },
			want:    0.25,
		},
		{
			name:    "zero number is set, not left out",
			yaml:    envBase + "logdir:\n  tolerance: 0.5\n",
			env:     []string{"KAFKAMENDER_LOGDIR_TOLERANCE=0"},
			applied: []string{"KAFKAMENDER_LOGDIR_TOLERANCE"},
			got:     func(c *Config) any { return *c.LogDir.Tolerance },
			want:    0.0,
		},
		{
			name:    "list of strings, comma-separated, spaces trimmed",
			env:     []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS=k1:9092, k2:9092 ,k3:9092", "KAFKAMENDER_NATS_SUBJECTS=kafkamender.events.local.>"},
			applied: []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS", "KAFKAMENDER_NATS_SUBJECTS"},
			got:     func(c *Config) any { return [][]string{c.Clusters["local"].BootstrapServers, c.NATS.Subjects} },
			want:    [][]string{{"k1:9092", "k2:9092", "k3:9092"}, {"kafkamender.events.local.>"}},
		},
		{
			name: "guardrails: scalars and the protected topics as a comma list",
			yaml: envBase + "guardrails:\n  protected_topics: [^file-]\n  allowed_sources: {broker-overloaded: [alertmanager]}\n",
			env: []string{"KAFKAMENDER_GUARDRAILS_PROTECTED_TOPICS=^protected-, ^__consumer_offsets$", "KAFKAMENDER_GUARDRAILS_MAX_PARTITIONS_PER_EVENT=10",
				"KAFKAMENDER_GUARDRAILS_MAX_OPERATIONS_PER_HOUR=5"},
			applied: []string{"KAFKAMENDER_GUARDRAILS_MAX_OPERATIONS_PER_HOUR", "KAFKAMENDER_GUARDRAILS_MAX_PARTITIONS_PER_EVENT", "KAFKAMENDER_GUARDRAILS_PROTECTED_TOPICS"},
			got:     func(c *Config) any { return c.Guardrails },
			want: guardrails.Limits{ProtectedTopics: []string{"^protected-", "^__consumer_offsets$"}, MaxPartitionsPerEvent: 10, MaxOperationsPerHour: 5,
				AllowedSources: map[string][]string{"broker-overloaded": {"alertmanager"}}, MaxTimeout: guardrails.DefaultMaxTimeout},
		},
		{
			name:    "cluster names: upper case, '-' to '_'",
			yaml:    envBase + "  Kraft2:\n    bootstrap_servers: [127.0.0.1:39092]\n",
			env:     []string{"KAFKAMENDER_CLUSTERS_PROD_EU_ZOOKEEPER=zk:2181/eu", "KAFKAMENDER_CLUSTERS_KRAFT2_STRATEGY=api"},
			applied: []string{"KAFKAMENDER_CLUSTERS_KRAFT2_STRATEGY", "KAFKAMENDER_CLUSTERS_PROD_EU_ZOOKEEPER"},
			got:     func(c *Config) any { return []any{c.Clusters["prod-eu"].ZooKeeper, c.Clusters["Kraft2"].Strategy} },
			want:    []any{"zk:2181/eu", StrategyAPI},
		},
		{
			name:    "a cluster with nothing under it in the file",
			yaml:    "nats:\n  url: nats://file:4222\nlock:\n  backend: nats\nclusters:\n  local:\n",
			env:     []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS=k1:9092"},
			applied: []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS"},
			got:     func(c *Config) any { return []any{c.Clusters["local"].BootstrapServers, c.Clusters["local"].Name} },
			want:    []any{[]string{"k1:9092"}, "local"},
		},
		{
			name:    "white space around the value (a Secret file's newline) is trimmed",
			env:     []string{"KAFKAMENDER_NATS_URL= nats://a:4222\n"},
			applied: []string{"KAFKAMENDER_NATS_URL"},
			got:     func(c *Config) any { return c.NATS.URL.Reveal() },
			want:    "nats://a:4222",
		},
		{
			name: "a variable set to nothing is left out",
			env:  []string{"KAFKAMENDER_NATS_URL=", "KAFKAMENDER_NATS_ACK_WAIT= "},
			got:  func(c *Config) any { return []any{c.NATS.URL.Reveal(), c.NATS.AckWait} },
			want: []any{"nats://file:4222", DefaultNATSAckWait},
		},
		{
			name: "other variables, lower case and the fault-test hooks are ignored",
			env:  []string{"HOME=/root", "kafkamender_nats_url=nats://lower:4222", "KAFKAMENDER=x", "KAFKAMENDER_PAUSE_AT=read", "KAFKAMENDER_LOGDIR_KILL_AT=copied"},
			got:  func(c *Config) any { return c.NATS.URL.Reveal() },
			want: "nats://file:4222",
		},
		{
			name:    "of a name given twice, the last counts",
			env:     []string{"KAFKAMENDER_LOG_LEVEL=debug", "KAFKAMENDER_LOG_LEVEL=warn"},
			applied: []string{"KAFKAMENDER_LOG_LEVEL"},
			got:     func(c *Config) any { return c.Log.Level },
			want:    "warn",
		},
		{
			name:    "defaults apply after the environment",
			env:     []string{"KAFKAMENDER_LOCK_BACKEND=nats"},
			applied: []string{"KAFKAMENDER_LOCK_BACKEND"},
			got:     func(c *Config) any { return []any{c.Lock.NATS.Bucket, c.Lock.NATS.TTL, c.Clusters["prod-eu"].Strategy} },
			want:    []any{DefaultLockBucket, DefaultLockTTL, StrategyAuto},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := tt.yaml
			if yaml == "" {
				yaml = envBase
			}
			cfg, err := ParseEnv([]byte(yaml), tt.env)
			if err != nil {
				t.Fatalf("ParseEnv: %v", err)
			}
			if got := tt.got(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if !reflect.DeepEqual(cfg.EnvOverrides, tt.applied) {
				t.Errorf("EnvOverrides = %q, want %q", cfg.EnvOverrides, tt.applied)
			}
		})
	}
}

func TestParseEnvErrors(t *testing.T) {
	const secret = "s3cr3t"
	tests := []struct {
		name string
		yaml string // envBase when empty
		env  []string
		want []string // each must appear in the error, one per line
	}{
		{
			name: "unknown variable",
			env:  []string{"KAFKAMENDER_NATS_URLL=nats://" + secret + "@a:4222"},
			want: []string{"KAFKAMENDER_NATS_URLL: names no setting that can be set from the environment"},
		},
		{
			name: "a variable set to nothing still needs a known name",
			env:  []string{"KAFKAMENDER_LOG_LEVL="},
			want: []string{"KAFKAMENDER_LOG_LEVL: names no setting"},
		},
		{
			name: "a section",
			env:  []string{"KAFKAMENDER_NATS=" + secret},
			want: []string{"KAFKAMENDER_NATS: names no setting"},
		},
		{
			name: "a cluster not in the file",
			env:  []string{"KAFKAMENDER_CLUSTERS_KRAFT_BOOTSTRAP_SERVERS=k1:9092"},
			want: []string{"KAFKAMENDER_CLUSTERS_KRAFT_BOOTSTRAP_SERVERS: names no setting of a cluster in the configuration file (the environment can set the fields of a cluster, not add one)"},
		},
		{
			name: "the cluster name as written",
			env:  []string{"KAFKAMENDER_CLUSTERS_PROD-EU_STRATEGY=api"},
			want: []string{"KAFKAMENDER_CLUSTERS_PROD-EU_STRATEGY: names no setting of a cluster"},
		},
		{
			name: "mappings and lists of mappings",
			yaml: envBase + "alertmanager:\n  rules:\n    - {alertname: A, type: broker-overloaded, labels: {a: b}}\n",
			env:  []string{"KAFKAMENDER_CLUSTERS=x", "KAFKAMENDER_ALERTMANAGER_RULES=x", "KAFKAMENDER_ALERTMANAGER_RULES_0_TYPE=x"},
			want: []string{
				"KAFKAMENDER_ALERTMANAGER_RULES: alertmanager.rules is a list of mappings, which cannot be set from the environment",
				"KAFKAMENDER_ALERTMANAGER_RULES_0_TYPE: names no setting",
				"KAFKAMENDER_CLUSTERS: clusters is a mapping, which cannot be set from the environment",
			},
		},
		{
			name: "guardrails.allowed_sources is a mapping",
			env:  []string{"KAFKAMENDER_GUARDRAILS_ALLOWED_SOURCES=" + secret, "KAFKAMENDER_GUARDRAILS_ALLOWED_SOURCES_BROKER_OVERLOADED=" + secret},
			want: []string{
				"KAFKAMENDER_GUARDRAILS_ALLOWED_SOURCES: guardrails.allowed_sources is a mapping of lists of strings, which cannot be set from the environment",
				"KAFKAMENDER_GUARDRAILS_ALLOWED_SOURCES_BROKER_OVERLOADED: names no setting",
			},
		},
		{
			name: "bad integer",
			env:  []string{"KAFKAMENDER_NATS_MAX_ATTEMPTS=" + secret},
			want: []string{"KAFKAMENDER_NATS_MAX_ATTEMPTS (nats.max_attempts): want an integer: invalid syntax"},
		},
		{
			name: "integer out of range",
			env:  []string{"KAFKAMENDER_ALERTMANAGER_MAX_BYTES=99999999999999999999"},
			want: []string{"KAFKAMENDER_ALERTMANAGER_MAX_BYTES (alertmanager.max_bytes): want an integer: value out of range"},
		},
		{
			name: "bad duration",
			env:  []string{"KAFKAMENDER_LOCK_ACQUIRE_TIMEOUT=300" + secret},
			want: []string{"KAFKAMENDER_LOCK_ACQUIRE_TIMEOUT (lock.acquire_timeout): want a duration such as 10s or 5m"},
		},
		{
			name: "duration without a unit",
			env:  []string{"KAFKAMENDER_NATS_ACK_WAIT=30"},
			want: []string{"KAFKAMENDER_NATS_ACK_WAIT (nats.ack_wait): want a duration such as 10s or 5m"},
		},
		{
			name: "bad boolean",
			env:  []string{"KAFKAMENDER_REPLICATION_FACTOR_ALLOW_INTERNAL_TOPICS=" + secret},
			want: []string{"KAFKAMENDER_REPLICATION_FACTOR_ALLOW_INTERNAL_TOPICS (replication_factor.allow_internal_topics): want true or false"},
		},
		{
			name: "bad number",
			env:  []string{"KAFKAMENDER_LOGDIR_TOLERANCE=" + secret},
			want: []string{"KAFKAMENDER_LOGDIR_TOLERANCE (logdir.tolerance): want a number: invalid syntax"},
		},
		{
			name: "not a finite number",
			env:  []string{"KAFKAMENDER_LOGDIR_TOLERANCE=NaN"},
			want: []string{"KAFKAMENDER_LOGDIR_TOLERANCE (logdir.tolerance): want a finite number"},
		},
		{
			name: "empty item in a list",
			env:  []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS=" + secret + ":1,,b:2"},
			want: []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS (clusters.local.bootstrap_servers): want a comma-separated list, item 1 is empty"},
		},
		{
			name: "two clusters map to one name",
			yaml: envBase + "  prod_eu:\n    bootstrap_servers: [127.0.0.1:39092]\n",
			env:  []string{"KAFKAMENDER_CLUSTERS_PROD_EU_STRATEGY=api"},
			want: []string{"KAFKAMENDER_CLUSTERS_PROD_EU_STRATEGY: ambiguous: names clusters.prod-eu.strategy and clusters.prod_eu.strategy (rename one, or set these in the file)"},
		},
		{
			name: "every problem at once, decoding the environment stops there",
			env:  []string{"KAFKAMENDER_NATS_ACK_WAIT=x", "KAFKAMENDER_TYPO=x", "KAFKAMENDER_LOG_LEVEL=loud"},
			want: []string{
				"KAFKAMENDER_NATS_ACK_WAIT (nats.ack_wait): want a duration",
				"KAFKAMENDER_TYPO: names no setting",
			},
		},
		{
			name: "the file's errors come first",
			yaml: envBase + "log:\n  levle: x\n",
			env:  []string{"KAFKAMENDER_TYPO=x"},
			want: []string{`log: unknown field "levle"`},
		},

		// Validation of what the environment set names the variable and hides the value.
		{
			name: "validation of a string",
			env:  []string{"KAFKAMENDER_HTTP_LISTEN=" + secret, "KAFKAMENDER_LOG_LEVEL=" + secret},
			want: []string{
				"log.level (from KAFKAMENDER_LOG_LEVEL): unknown level <hidden> (want debug, info, warn or error)",
				"http.listen (from KAFKAMENDER_HTTP_LISTEN): <hidden>: want host:port",
			},
		},
		{
			name: "validation of a list item",
			env:  []string{"KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS=127.0.0.1:1, " + secret},
			want: []string{"clusters.local.bootstrap_servers[1] (from KAFKAMENDER_CLUSTERS_LOCAL_BOOTSTRAP_SERVERS): <hidden>: want host:port"},
		},
		{
			name: "validation of a protected topic pattern",
			env:  []string{"KAFKAMENDER_GUARDRAILS_PROTECTED_TOPICS=^ok-, " + secret + "("},
			want: []string{"guardrails.protected_topics[1] (from KAFKAMENDER_GUARDRAILS_PROTECTED_TOPICS): <hidden>: error parsing regexp: missing closing )"},
		},
		{
			name: "validation of a nats url with a token",
			env:  []string{"KAFKAMENDER_NATS_URL=nats://" + secret + "@nats:99999"},
			want: []string{`nats.url (from KAFKAMENDER_NATS_URL): "nats://xxxxx@nats:99999": bad port "99999"`},
		},
		{
			name: "validation of a number",
			env:  []string{"KAFKAMENDER_NATS_MAX_ATTEMPTS=-2"},
			want: []string{"nats.max_attempts (from KAFKAMENDER_NATS_MAX_ATTEMPTS): -2: must be at least 1"},
		},
		{
			name: "validation of a field the file set is as without the environment",
			yaml: envBase + "log:\n  format: text\n",
			env:  []string{"KAFKAMENDER_LOG_LEVEL=debug"},
			want: []string{`log.format: unknown format "text"`},
		},
		{
			name: "validation of a field the environment made required",
			env:  []string{"KAFKAMENDER_CLUSTERS_PROD_EU_STRATEGY=zk-nudge"},
			want: []string{"clusters.prod-eu.zookeeper: required by strategy zk-nudge"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := tt.yaml
			if yaml == "" {
				yaml = envBase
			}
			cfg, err := ParseEnv([]byte(yaml), tt.env)
			if err == nil {
				t.Fatalf("ParseEnv succeeded (%+v), want an error containing %q", cfg, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
			if got, want := strings.Count(err.Error(), "\n")+1, len(tt.want); got != want {
				t.Errorf("error has %d lines, want %d:\n%v", got, want, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the value:\n%v", err)
			}
		})
	}
}

// Two clusters that map to one name are fine while no variable names them.
func TestParseEnvAmbiguousUnused(t *testing.T) {
	yaml := envBase + "  prod_eu:\n    bootstrap_servers: [127.0.0.1:39092]\n"
	cfg, err := ParseEnv([]byte(yaml), []string{"KAFKAMENDER_CLUSTERS_LOCAL_STRATEGY=api"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters["local"].Strategy != StrategyAPI {
		t.Errorf("strategy = %q", cfg.Clusters["local"].Strategy)
	}
}

// clearEnv unsets every KAFKAMENDER_ variable for the rest of the test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix) {
			t.Setenv(name, "") // restores the value after the test
			os.Unsetenv(name)
		}
	}
}

func TestParseIgnoresEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv("KAFKAMENDER_NATS_URL", "nats://env:4222")
	t.Setenv("KAFKAMENDER_NO_SUCH_SETTING", "x")
	cfg, err := Parse([]byte(envBase))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.URL != "nats://file:4222" || cfg.EnvOverrides != nil {
		t.Errorf("nats.url %q, EnvOverrides %q; want the file's, none", cfg.NATS.URL, cfg.EnvOverrides)
	}
}

func TestLoadAppliesEnvironment(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "worker.yaml")
	writeFile(t, path, envBase)

	t.Setenv("KAFKAMENDER_NATS_URL", "nats://env:4222")
	t.Setenv("KAFKAMENDER_PAUSE_AT", "read")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.URL != "nats://env:4222" || !slices.Equal(cfg.EnvOverrides, []string{"KAFKAMENDER_NATS_URL"}) {
		t.Errorf("nats.url %q, EnvOverrides %q", cfg.NATS.URL, cfg.EnvOverrides)
	}

	t.Setenv("KAFKAMENDER_NATS_AKC_WAIT", "1m")
	t.Setenv("KAFKAMENDER_LOG_LEVEL", "loud")
	_, err = Load(path)
	want := "config " + path + ": KAFKAMENDER_NATS_AKC_WAIT: names no setting that can be set from the environment"
	if err == nil || err.Error() != want {
		t.Errorf("Load =\n%v\nwant\n%s", err, want)
	}
}

// Every field the schema calls settable can be set from text, and the names of the
// variables are unique and follow the rule.
func TestEnvSchema(t *testing.T) {
	samples := map[string]string{
		"string": "x", "secret": "s3cret", "integer": "7", "boolean": "true", "duration": "3s", "number": "0.5", "list of strings": "a,b",
	}
	seen := map[string]string{}
	for _, s := range schemaSettings() {
		if !s.settable {
			if strings.Contains(s.path, "[]") != (s.env == "") {
				t.Errorf("%s: env %q: want a name exactly outside lists", s.path, s.env)
			}
			continue
		}
		sample, ok := samples[s.kind]
		if !ok {
			t.Errorf("%s: settable kind %q has no sample", s.path, s.kind)
			continue
		}
		if err := setFromEnv(s.v, sample); err != nil {
			t.Errorf("%s: set %q: %v", s.path, sample, err)
		}
		// The rule, with the placeholder <name> for the cluster's name.
		if want := strings.Replace(envName(s.path), "__NAME__", "_<NAME>_", 1); s.env != want {
			t.Errorf("%s: env %s, want %s", s.path, s.env, want)
		}
		if other, dup := seen[s.env]; dup {
			t.Errorf("%s and %s are both set by %s", other, s.path, s.env)
		}
		seen[s.env] = s.path
		if nonConfigEnv(s.env) {
			t.Errorf("%s: %s is on the list of variables that are not configuration", s.path, s.env)
		}
	}
	for _, want := range []string{"KAFKAMENDER_NATS_URL", "KAFKAMENDER_HTTP_LISTEN", "KAFKAMENDER_LOCK_ZOOKEEPER", "KAFKAMENDER_LOG_LEVEL", "KAFKAMENDER_CLUSTERS_<NAME>_BOOTSTRAP_SERVERS"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no setting is set by %s", want)
		}
	}
}

func TestWithoutOverrides(t *testing.T) {
	got := WithoutOverrides([]string{"PATH=/bin", "KAFKAMENDER_NATS_URL=nats://x", "KAFKAMENDER_PAUSE_AT=copying", "NATS_URL=nats://y", "KAFKAMENDER_NOPE="})
	want := []string{"PATH=/bin", "KAFKAMENDER_PAUSE_AT=copying", "NATS_URL=nats://y"}
	if !slices.Equal(got, want) {
		t.Errorf("WithoutOverrides = %q, want %q", got, want)
	}
}

// The variables Kubernetes gives a pod for a Service named kafkamender (or
// kafkamender-<x>) are no configuration: a worker must start in such a namespace. And no
// configuration variable looks like one.
func TestServiceLinksAreNotConfiguration(t *testing.T) {
	data := []byte("nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\nclusters:\n  local:\n    bootstrap_servers: [127.0.0.1:19092]\n")
	links := []string{
		"KAFKAMENDER_SERVICE_HOST=10.0.0.1", "KAFKAMENDER_SERVICE_PORT=8080", "KAFKAMENDER_SERVICE_PORT_HTTP=8080",
		"KAFKAMENDER_PORT=tcp://10.0.0.1:8080", "KAFKAMENDER_PORT_8080_TCP=tcp://10.0.0.1:8080",
		"KAFKAMENDER_PORT_8080_TCP_PROTO=tcp", "KAFKAMENDER_PORT_8080_TCP_PORT=8080", "KAFKAMENDER_PORT_8080_TCP_ADDR=10.0.0.1",
		"KAFKAMENDER_WORKERS_SERVICE_HOST=10.0.0.2", "KAFKAMENDER_WORKERS_PORT_8080_TCP=tcp://10.0.0.2:8080",
	}
	cfg, err := ParseEnv(data, links)
	if err != nil {
		t.Fatalf("service-link variables: %v", err)
	}
	if len(cfg.EnvOverrides) != 0 {
		t.Errorf("applied %v", cfg.EnvOverrides)
	}
	for _, s := range schemaSettings() {
		if s.env != "" && nonConfigEnv(s.env) {
			t.Errorf("%s (%s) would be taken for a service link", s.env, s.path)
		}
	}
}
