package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/guardrails"
)

func TestLoadValidExample(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(filepath.Join("testdata", "valid.yaml"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Worker: Worker{ID: "worker-1"},
		Log:    Log{Level: "debug", Format: "console"},
		HTTP:   HTTP{Listen: "127.0.0.1:8080"},
		NATS: NATS{URL: "nats://127.0.0.1:4222", Consumer: "kafkamender-workers", Subjects: []string{"kafkamender.events.>"}, AckWait: 30 * time.Second, MaxAttempts: 10,
			EventsMaxBytes: 256 << 20, ResultsMaxBytes: 1 << 30},
		BrokerOverloaded: BrokerOverloaded{CoolDown: 10 * time.Minute},
		ReplicationFactor: ReplicationFactor{Timeout: time.Hour, MaxMovesPerBroker: 5, ForeignWait: time.Minute,
			ThrottleSettle: 2 * time.Second},
		LogDir:     LogDir{Timeout: time.Hour, Tolerance: new(0.1)},
		Guardrails: guardrails.Limits{MaxTimeout: guardrails.DefaultMaxTimeout},
		Alertmanager: Alertmanager{MaxBytes: 1 << 20, Source: "alertmanager", Webhook: Webhook{MaxAlerts: 1000,
			EventsPerSecond: 100, MaxConcurrentRequests: 4, ReadTimeout: 10 * time.Second}},
		Console: Console{SessionTTL: DefaultConsoleSessionTTL},
		Lock: Lock{
			Backend:        LockZooKeeper,
			ZooKeeper:      "127.0.0.1:2181",
			NATS:           NATSLock{Bucket: "KAFKAMENDER_LOCKS", TTL: 10 * time.Second},
			Root:           "/kafkamender/locks",
			SessionTimeout: 10 * time.Second,
			AcquireTimeout: 5 * time.Minute,
		},
		Clusters: map[string]*Cluster{
			"local": {
				Name:              "local",
				BootstrapServers:  []string{"127.0.0.1:19092", "127.0.0.1:29092"},
				ZooKeeper:         "127.0.0.1:2181/kafka",
				Strategy:          StrategyAuto,
				CapacityThreshold: new(DefaultCapacityThreshold),
			},
			"kraft": {
				Name:              "kraft",
				BootstrapServers:  []string{"127.0.0.1:19192"},
				Strategy:          StrategyAuto,
				CapacityThreshold: new(DefaultCapacityThreshold),
			},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", cfg, want)
		for name, cl := range cfg.Clusters {
			t.Logf("cluster %s: %+v", name, *cl)
		}
	}
	if got := cfg.ClusterNames(); !reflect.DeepEqual(got, []string{"kraft", "local"}) {
		t.Errorf("ClusterNames() = %v", got)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`
nats:
  url: nats://127.0.0.1:4222
lock:
  zookeeper: 127.0.0.1:2181
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	host, _ := os.Hostname()
	if want := host + "-"; !strings.HasPrefix(cfg.Worker.ID, want) {
		t.Errorf("worker.id = %q, want prefix %q", cfg.Worker.ID, want)
	}
	if cfg.Log.Level != "info" || cfg.Log.Format != "json" {
		t.Errorf("log = %+v", cfg.Log)
	}
	if cfg.HTTP.Listen != "127.0.0.1:8080" {
		t.Errorf("http.listen = %q", cfg.HTTP.Listen)
	}
	if cfg.Lock.Root != "/kafkamender/locks" || cfg.Lock.SessionTimeout != 10*time.Second || cfg.Lock.AcquireTimeout != 5*time.Minute {
		t.Errorf("lock = %+v", cfg.Lock)
	}
	if cl := cfg.Clusters["local"]; cl.Strategy != StrategyAuto || cl.Name != "local" {
		t.Errorf("cluster = %+v", cl)
	}
}

// base is a valid configuration; the cases below replace or add lines.
const base = `
nats:
  url: nats://127.0.0.1:4222
lock:
  zookeeper: 127.0.0.1:2181
`

const oneCluster = `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		// Decoding.
		{
			name: "empty",
			yaml: "",
			want: []string{"config is empty"},
		},
		{
			name: "syntax",
			yaml: "nats: [",
			want: []string{"parse yaml: yaml: line 1"},
		},
		{
			name: "top level not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"want a mapping at the top level, got a list"},
		},
		{
			name: "two documents",
			yaml: base + oneCluster + "---\nnats: {}\n",
			want: []string{"more than one YAML document"},
		},
		{
			name: "unknown top-level field",
			yaml: base + oneCluster + "metrics: {}\n",
			want: []string{`unknown field "metrics" (line 10)`},
		},
		{
			name: "unknown cluster field",
			yaml: base + `
clusters:
  local:
    bootstrap_server: [127.0.0.1:19092]
`,
			want: []string{`clusters.local: unknown field "bootstrap_server" (line 9)`},
		},
		{
			name: "unknown field in flow mapping",
			yaml: base + `
clusters:
  local: {bootstrap_servers: [127.0.0.1:19092], strategi: api}
`,
			want: []string{`clusters.local: unknown field "strategi" (line 8)`},
		},
		{
			name: "duplicate top-level key",
			yaml: base + oneCluster + "lock:\n  zookeeper: 127.0.0.1:2181\n",
			want: []string{`duplicate key "lock" (lines 4 and 10)`},
		},
		{
			name: "unknown nested field",
			yaml: `
nats:
  url: nats://127.0.0.1:4222
  username: me
lock:
  zookeeper: 127.0.0.1:2181
` + oneCluster,
			want: []string{`nats: unknown field "username" (line 4)`},
		},
		{
			name: "misspelt lock field",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`lock: unknown field "zookeper" (line 4)`},
		},
		{
			name: "duplicate key",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    strategy: api
    strategy: zk-reassign
`,
			want: []string{`clusters.local: duplicate key "strategy" (lines 10 and 11)`},
		},
		{
			name: "bad durations",
			yaml: `
nats:
  url: nats://127.0.0.1:4222
lock:
  zookeeper: 127.0.0.1:2181
  session_timeout: 10x
  acquire_timeout: 300
` + oneCluster,
			want: []string{
				`lock.session_timeout: bad duration "10x" (want a number with a unit, such as 10s or 5m) (line 6)`,
				`lock.acquire_timeout: bad duration "300"`,
			},
		},
		{
			name: "duration given a list",
			yaml: `
nats:
  url: nats://127.0.0.1:4222
lock:
  zookeeper: 127.0.0.1:2181
  session_timeout: [10s]
` + oneCluster,
			want: []string{`lock.session_timeout: want a duration such as 10s or 5m, got a list (line 6)`},
		},
		{
			name: "brokers not a list",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: 127.0.0.1:19092
`,
			want: []string{`clusters.local.bootstrap_servers: want a list, got a string (line 9)`},
		},
		{
			name: "cluster not a mapping",
			yaml: base + `
clusters:
  local: [127.0.0.1:19092]
`,
			want: []string{`clusters.local: want a mapping, got a list (line 8)`},
		},
		{
			name: "lock backend not a string",
			yaml: `
nats:
  url: nats://127.0.0.1:4222
lock:
  backend: [nats]
`,
			want: []string{`lock.backend: want a string, got a list (line 5)`},
		},
		{
			name: "clusters not a mapping",
			yaml: base + `
clusters: [local]
`,
			want: []string{`clusters: want a mapping, got a list (line 7)`},
		},
		{
			name: "several decoding errors at once",
			yaml: base + `
clusters:
  local:
    bootstrap_server: [127.0.0.1:19092]
    strategi: api
`,
			want: []string{`clusters.local: unknown field "bootstrap_server"`, `clusters.local: unknown field "strategi"`},
		},

		// Validation.
		{
			name: "nats url required",
			yaml: "lock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{"nats.url: required"},
		},
		{
			name: "nats url no scheme",
			yaml: "nats:\n  url: 127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "127.0.0.1:4222": cannot parse`},
		},
		{
			name: "nats url host only",
			yaml: "nats:\n  url: localhost\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "localhost": missing scheme`},
		},
		{
			name: "nats url bad scheme",
			yaml: "nats:\n  url: http://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "http://127.0.0.1:4222": unsupported scheme "http" (want nats, tls, ws or wss)`},
		},
		{
			name: "nats url bad port, password redacted",
			yaml: "nats:\n  url: nats://me:secret@127.0.0.1:99999\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://me:xxxxx@127.0.0.1:99999": bad port "99999"`},
		},
		{
			name: "nats url bad port, token redacted",
			yaml: "nats:\n  url: nats://s3cr3t@127.0.0.1:99999\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://xxxxx@127.0.0.1:99999": bad port "99999"`},
		},
		{
			name: "nats url that does not parse, password redacted",
			yaml: "nats:\n  url: \"nats://me:s3cr3t@127.0.0.1:4222/%zz\"\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://xxxxx@127.0.0.1:4222/%zz": cannot parse`},
		},
		{
			name: "nats url list with an empty entry, credentials redacted",
			yaml: "nats:\n  url: nats://me:s3cr3t@a:4222,,nats://t0ken@b:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://me:xxxxx@a:4222,,nats://xxxxx@b:4222": empty URL in list`},
		},
		{
			name: "nats url list with a bad entry",
			yaml: "nats:\n  url: nats://a:4222,,nats://b:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://a:4222,,nats://b:4222": empty URL in list`},
		},
		{
			name: "nats url mixing websocket",
			yaml: "nats:\n  url: nats://a:4222,ws://b:8080\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{"nats.url: cannot mix websocket"},
		},
		{
			name: "nats url missing host",
			yaml: "nats:\n  url: nats://:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{`nats.url: "nats://:4222": missing host`},
		},
		{
			name: "log level and format",
			yaml: base + oneCluster + "log:\n  level: verbose\n  format: text\n",
			want: []string{
				`log.level: unknown level "verbose" (want debug, info, warn or error)`,
				`log.format: unknown format "text" (want json or console)`,
			},
		},
		{
			name: "http listen",
			yaml: base + oneCluster + "http:\n  listen: localhost\n",
			want: []string{`http.listen: "localhost": want host:port`},
		},
		{
			name: "http listen port",
			yaml: base + oneCluster + "http:\n  listen: :http\n",
			want: []string{`http.listen: ":http": bad port "http"`},
		},
		{
			name: "lock zookeeper required",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\n" + oneCluster,
			want: []string{"lock.zookeeper: required"},
		},
		{
			name: "nats lock for one cluster still needs zookeeper for another",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nclusters:\n  a:\n    bootstrap_servers: [127.0.0.1:1]\n    lock: {backend: nats}\n  b:\n    bootstrap_servers: [127.0.0.1:2]\n",
			want: []string{"lock.zookeeper: required: a cluster without a zookeeper of its own keeps its lock in ZooKeeper"},
		},
		{
			name: "unknown lock backends",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  backend: etcd\n  zookeeper: 127.0.0.1:2181\nclusters:\n  a:\n    bootstrap_servers: [127.0.0.1:1]\n    lock: {backend: consul}\n",
			want: []string{`lock.backend: "etcd": unknown backend (want zookeeper or nats)`, `clusters.a.lock.backend: "consul": unknown backend`},
		},
		{
			name: "nats lock for a cluster with its own zookeeper",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\nclusters:\n  a:\n    bootstrap_servers: [127.0.0.1:1]\n    zookeeper: 127.0.0.1:2181/kafka\n    lock: {backend: nats}\n",
			want: []string{"clusters.a.lock.backend: nats: a cluster with a zookeeper of its own keeps its lock there"},
		},
		{
			name: "nats lock ttl and bucket",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  backend: nats\n  nats: {ttl: 500ms, bucket: \"a b\"}\n" + oneCluster,
			want: []string{"lock.nats.ttl: 500ms: must be at least 1s", `lock.nats.bucket: "a b"`},
		},
		{
			name: "lock zookeeper bad",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181/\n" + oneCluster,
			want: []string{`lock.zookeeper: "127.0.0.1:2181/": chroot "/": must name a znode below '/'`},
		},
		{
			name: "lock root",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n  root: kafkamender/locks/\n" + oneCluster,
			want: []string{`lock.root: "kafkamender/locks/": must start with '/'`},
		},
		{
			name: "negative timeouts",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\n  session_timeout: -1s\n  acquire_timeout: -5m\n" + oneCluster,
			want: []string{"lock.session_timeout: must be positive, got -1s", "lock.acquire_timeout: must be positive, got -5m0s"},
		},
		{
			name: "delivery bounds",
			yaml: "nats:\n  url: nats://127.0.0.1:4222\n  ack_wait: 100ms\n  max_attempts: -1\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster,
			want: []string{"nats.ack_wait: 100ms: must be at least 1s", "nats.max_attempts: -1: must be at least 1"},
		},
		{
			name: "no clusters",
			yaml: base,
			want: []string{"clusters: must define at least one cluster"},
		},
		{
			name: "empty clusters",
			yaml: base + "clusters: {}\n",
			want: []string{"clusters: must define at least one cluster"},
		},
		{
			name: "cluster name not a subject token",
			yaml: base + `
clusters:
  prod.eu:
    bootstrap_servers: [127.0.0.1:19092]
  "a b":
    bootstrap_servers: [127.0.0.1:19092]
  ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc:
    bootstrap_servers: [127.0.0.1:19092]
  dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd:
    bootstrap_servers: [127.0.0.1:19092]
`,
			want: []string{
				`clusters: bad cluster name "a b": not a valid subject token (want letters, digits, '-' or '_') (it is a token of the event subjects)`,
				`clusters: bad cluster name "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc": 65 characters, over the limit of 64`,
				`clusters: bad cluster name "prod.eu"`,
			},
		},
		{
			name: "cluster with nothing",
			yaml: base + "clusters:\n  local:\n",
			want: []string{"clusters.local.bootstrap_servers: must list at least one broker"},
		},
		{
			name: "no brokers",
			yaml: base + "clusters:\n  local:\n    bootstrap_servers: []\n",
			want: []string{"clusters.local.bootstrap_servers: must list at least one broker"},
		},
		{
			name: "bad brokers",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1, "127.0.0.1:abc", ":9092", "127.0.0.1:0", "127.0.0.1:70000", "[::1]:9092", 127.0.0.1:19092, 127.0.0.1:19092]
`,
			want: []string{
				`clusters.local.bootstrap_servers[0]: "127.0.0.1": want host:port`,
				`clusters.local.bootstrap_servers[1]: "127.0.0.1:abc": bad port "abc"`,
				`clusters.local.bootstrap_servers[2]: ":9092": missing host`,
				`clusters.local.bootstrap_servers[3]: "127.0.0.1:0": bad port "0"`,
				`clusters.local.bootstrap_servers[4]: "127.0.0.1:70000": bad port "70000"`,
				`clusters.local.bootstrap_servers[7]: "127.0.0.1:19092": listed twice (also [6])`,
			},
		},
		{
			name: "cluster zookeeper bad port",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    zookeeper: 127.0.0.1:abc/kafka
`,
			want: []string{`clusters.local.zookeeper: "127.0.0.1:abc/kafka": bad port "abc"`},
		},
		{
			name: "unknown strategy",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    strategy: foo
`,
			want: []string{`clusters.local.strategy: unknown strategy "foo" (want auto, api, zk-reassign or zk-nudge)`},
		},
		{
			name: "zk strategy without zookeeper",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    strategy: zk-nudge
`,
			want: []string{"clusters.local.zookeeper: required by strategy zk-nudge"},
		},
		{
			name: "capacity out of range",
			yaml: base + `
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    capacity_bytes: {1: 0, 2: -5, -3: 100, 4: 1000}
    capacity_threshold: 1.2
`,
			want: []string{
				"clusters.local.capacity_bytes: broker -3: a broker id is not negative",
				"clusters.local.capacity_bytes.1: 0: must be above 0",
				"clusters.local.capacity_bytes.2: -5: must be above 0",
				"clusters.local.capacity_threshold: 1.2: must be above 0 and at most 1",
			},
		},
		{
			name: "operation tuning out of range",
			yaml: base + oneCluster + `replication_factor: {throttle_bytes_per_sec: -5, timeout: -1s, max_moves_per_broker: -2, foreign_wait: -3m, throttle_settle: -1ms}
logdir: {throttle_bytes_per_sec: -1, timeout: -2h, tolerance: 1.5}
broker_overloaded: {cool_down: -1s, election_batch_size: -1}
`,
			want: []string{
				"replication_factor.throttle_bytes_per_sec: -5: must not be negative",
				"replication_factor.timeout: -1s: must not be negative",
				"replication_factor.max_moves_per_broker: -2: must not be negative",
				"replication_factor.foreign_wait: -3m0s: must not be negative",
				"replication_factor.throttle_settle: -1ms: must not be negative",
				"logdir.throttle_bytes_per_sec: -1: must not be negative",
				"logdir.timeout: -2h0m0s: must not be negative",
				"logdir.tolerance: 1.5: must be at least 0 and less than 1",
				"broker_overloaded.cool_down: -1s: must not be negative",
				"broker_overloaded.election_batch_size: -1: must be 0 (one request) or more",
			},
		},
		{
			name: "alertmanager rules",
			yaml: base + oneCluster + `alertmanager:
  max_bytes: -1
  rules:
    - type: broker-overloaded
      fields: {broker: broker_id, cluster: c, brokr: b, topics: ""}
    - alertname: X
      type: nope
    - alertname: Maintenance
      type: cluster-pause
    - alertname: Stop
      type: operation-cancel
`,
			want: []string{
				"alertmanager.max_bytes: -1: must not be negative",
				"alertmanager.rules[0].alertname: required",
				`alertmanager.rules[0].fields.brokr: broker-overloaded events have no data field "brokr"`,
				`alertmanager.rules[0].fields.cluster: the cluster comes from cluster_label ("cluster")`,
				"alertmanager.rules[0].fields.topics: names no label",
				`alertmanager.rules[1].type: "nope": want one of broker-overloaded, replica-change-requested, logdir-move-requested`,
				`alertmanager.rules[2].type: "cluster-pause": want one of broker-overloaded, replica-change-requested, logdir-move-requested, broker-failed, broker-drain, broker-added, partition-offline`,
				`alertmanager.rules[3].type: "operation-cancel": want one of broker-overloaded, replica-change-requested, logdir-move-requested, broker-failed, broker-drain, broker-added, partition-offline`,
			},
		},
		{
			name: "guardrails",
			yaml: base + oneCluster + `guardrails:
  protected_topics: ["^protected-", "a(b", "^__consumer_offsets$", "x**"]
  max_partitions_per_event: -1
  max_operations_per_hour: -5
  allowed_sources:
    broker-overloaded: [alertmanager, ""]
    replica-change-requested: []
    broker-overload: [alertmanager]
`,
			want: []string{
				`guardrails.protected_topics[1]: "a(b": error parsing regexp: missing closing )`,
				`guardrails.protected_topics[3]: "x**": error parsing regexp: invalid nested repetition operator`,
				"guardrails.max_partitions_per_event: -1: must be 0 (no cap) or more",
				"guardrails.max_operations_per_hour: -5: must be 0 (no cap) or more",
				"guardrails.allowed_sources.broker-overload: unknown event type (want one of broker-overloaded, replica-change-requested, logdir-move-requested, broker-failed, broker-drain, broker-added, cluster-pause, cluster-resume, operation-cancel, plan-approved, plan-denied, partition-offline)",
				"guardrails.allowed_sources.broker-overloaded[1]: empty source",
				"guardrails.allowed_sources.replica-change-requested: lists no source (leave the type out to allow any source)",
			},
		},
		{
			name: "guardrails of the wrong shape",
			yaml: base + oneCluster + "guardrails:\n  allowed_sources:\n    broker-overloaded: alertmanager\n",
			want: []string{"guardrails.allowed_sources.broker-overloaded: want a list, got a string (line 12)"},
		},
		{
			name: "every problem at once",
			yaml: "clusters:\n  local:\n    strategy: foo\nlog:\n  level: loud\n",
			want: []string{
				"nats.url: required",
				"lock.zookeeper: required",
				"log.level: unknown level",
				"clusters.local.bootstrap_servers: must list at least one broker",
				"clusters.local.strategy: unknown strategy",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want an error containing %q", cfg, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, w)
				}
			}
			if got, want := strings.Count(err.Error(), "\n")+1, len(tt.want); got != want {
				t.Errorf("error has %d lines, want %d:\n%v", got, want, err)
			}
		})
	}
}

func TestParseValidVariants(t *testing.T) {
	tests := []struct{ name, yaml string }{
		{"ipv6 broker and listen on all interfaces", base + "http:\n  listen: \":0\"\n" + `
clusters:
  local:
    bootstrap_servers: ["[::1]:9092"]
`},
		{"zk strategy with zookeeper", base + `
clusters:
  legacy:
    bootstrap_servers: [kafka-1.example.com:9092]
    zookeeper: zk1:2181,zk2:2181,zk3:2181/kafka/legacy
    strategy: zk-reassign
`},
		{"guardrails", base + oneCluster + `guardrails:
  protected_topics: ["^protected-", "^__consumer_offsets$", "(?i)^audit\\."]
  max_partitions_per_event: 10
  max_operations_per_hour: 5
  allowed_sources:
    broker-overloaded: [alertmanager]
    replica-change-requested: [ops-pipeline, kafkamender-emitter]
    logdir-move-requested: [ops-pipeline]
`},
		{"guardrails with no limit", base + oneCluster + "guardrails: {protected_topics: [], allowed_sources: {}}\n"},
		{"several nats urls", "nats:\n  url: nats://a:4222, tls://b:4443,nats://c\nlock:\n  zookeeper: 127.0.0.1:2181\n" + oneCluster},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.yaml)); err != nil {
				t.Errorf("Parse: %v", err)
			}
		})
	}
}

func TestValidateAfterChange(t *testing.T) {
	clearEnv(t)
	cfg, err := Load(filepath.Join("testdata", "valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters["local"].Strategy = "zk-magic"
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `clusters.local.strategy: unknown strategy "zk-magic"`) {
		t.Errorf("Validate() = %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()

	_, err := Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}

	one := filepath.Join(dir, "one.yaml")
	writeFile(t, one, base)
	_, err = Load(one)
	if err == nil || err.Error() != "config "+one+": clusters: must define at least one cluster" {
		t.Errorf("Load(one problem) = %v", err)
	}

	two := filepath.Join(dir, "two.yaml")
	writeFile(t, two, "lock:\n  zookeeper: 127.0.0.1:2181\n")
	_, err = Load(two)
	want := "config " + two + ": 2 problems:\n  nats.url: required\n  clusters: must define at least one cluster"
	if err == nil || err.Error() != want {
		t.Errorf("Load(two problems) =\n%v\nwant\n%s", err, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseZKConnect(t *testing.T) {
	tests := []struct {
		in      string
		servers []string
		chroot  string
		err     string
	}{
		{in: "127.0.0.1:2181", servers: []string{"127.0.0.1:2181"}},
		{in: "127.0.0.1:2181/kafka", servers: []string{"127.0.0.1:2181"}, chroot: "/kafka"},
		{in: "zk1:2181,zk2:2182,zk3:2183/a/b-c", servers: []string{"zk1:2181", "zk2:2182", "zk3:2183"}, chroot: "/a/b-c"},
		{in: "[::1]:2181/kafka", servers: []string{"[::1]:2181"}, chroot: "/kafka"},
		{in: "", err: "empty connect string"},
		{in: "/kafka", err: `"/kafka": no servers`},
		{in: "zk1", err: `"zk1": server "zk1": want host:port`},
		{in: "zk1/kafka", err: `"zk1/kafka": server "zk1": want host:port`},
		{in: "127.0.0.1:abc/kafka", err: `"127.0.0.1:abc/kafka": bad port "abc"`},
		{in: "zk1:0", err: `"zk1:0": bad port "0"`},
		{in: ":2181", err: `":2181": server ":2181": missing host`},
		{in: "zk1:2181,,zk2:2181", err: `"zk1:2181,,zk2:2181": empty server in list`},
		{in: "zk1:2181,", err: `empty server in list`},
		{in: "zk1:2181/", err: `"zk1:2181/": chroot "/": must name a znode below '/'`},
		{in: "zk1:2181/kafka/", err: `chroot "/kafka/": must not end with '/'`},
		{in: "zk1:2181/a//b", err: `chroot "/a//b": empty path segment`},
		{in: "zk1:2181/a/../b", err: `chroot "/a/../b": relative path segment ".."`},
		{in: "zk1:2181/a/./b", err: `relative path segment "."`},
	}
	for _, tt := range tests {
		servers, chroot, err := ParseZKConnect(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseZKConnect(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseZKConnect(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(servers, tt.servers) || chroot != tt.chroot {
			t.Errorf("ParseZKConnect(%q) = %q, %q; want %q, %q", tt.in, servers, chroot, tt.servers, tt.chroot)
		}
	}
}

// A configuration with no ZooKeeper at all is valid when every cluster keeps its lock in
// NATS; a cluster's own setting overrides lock.backend.
func TestParseNATSLockWithoutZooKeeper(t *testing.T) {
	cfg, err := Parse([]byte("nats:\n  url: nats://127.0.0.1:4222\nlock:\n  backend: nats\n" + oneCluster))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NeedsLockZooKeeper() || cfg.LockBackend("local") != LockNATS {
		t.Errorf("needs lock zookeeper %v, backend %q; want false, nats", cfg.NeedsLockZooKeeper(), cfg.LockBackend("local"))
	}
	cfg, err = Parse([]byte("nats:\n  url: nats://127.0.0.1:4222\nlock:\n  zookeeper: 127.0.0.1:2181\nclusters:\n  a:\n    bootstrap_servers: [127.0.0.1:1]\n    lock: {backend: nats}\n  b:\n    bootstrap_servers: [127.0.0.1:2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LockBackend("a") != LockNATS || cfg.LockBackend("b") != LockZooKeeper || !cfg.NeedsLockZooKeeper() {
		t.Errorf("backends a=%q b=%q, needs lock zookeeper %v", cfg.LockBackend("a"), cfg.LockBackend("b"), cfg.NeedsLockZooKeeper())
	}
}

func TestRedactNATSURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:secret@a:4222,nats://b:4222": "nats://u:xxxxx@a:4222,nats://b:4222",
		"nats://s3cr3t-token@a:4222":           "nats://xxxxx@a:4222",
		"nats://a:4222":                        "nats://a:4222",
	} {
		got := RedactNATSURLs(in)
		if got != want {
			t.Errorf("RedactNATSURLs(%q) = %q, want %q", in, got, want)
		}
	}
}

// capacity_bytes is keyed by broker id; capacity_threshold keeps an explicit value.
func TestCapacity(t *testing.T) {
	clearEnv(t)
	cfg, err := Parse([]byte(`
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181"}
clusters:
  local:
    bootstrap_servers: [127.0.0.1:19092]
    capacity_bytes: {1: 1073741824, 4: 2147483648}
    capacity_threshold: 0.75
  other:
    bootstrap_servers: [127.0.0.1:19093]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Clusters["local"].CapacityBytes, map[int32]int64{1: 1 << 30, 4: 2 << 30}; !reflect.DeepEqual(got, want) {
		t.Errorf("capacity_bytes = %v, want %v", got, want)
	}
	if got := *cfg.Clusters["local"].CapacityThreshold; got != 0.75 {
		t.Errorf("capacity_threshold = %g, want 0.75", got)
	}
	if o := cfg.Clusters["other"]; o.CapacityBytes != nil || *o.CapacityThreshold != DefaultCapacityThreshold {
		t.Errorf("defaults: capacity_bytes %v, capacity_threshold %g", o.CapacityBytes, *o.CapacityThreshold)
	}
}
