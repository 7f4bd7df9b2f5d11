package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/guardrails"
)

// Config is the worker configuration.
type Config struct {
	Worker   Worker              `yaml:"worker"`
	Log      Log                 `yaml:"log"`
	HTTP     HTTP                `yaml:"http"`
	NATS     NATS                `yaml:"nats"`
	Lock     Lock                `yaml:"lock"`
	Clusters map[string]*Cluster `yaml:"clusters"`
	// BrokerOverloaded tunes the broker-overloaded handler.
	BrokerOverloaded BrokerOverloaded `yaml:"broker_overloaded"`
	// ReplicationFactor tunes replication-factor changes.
	ReplicationFactor ReplicationFactor `yaml:"replication_factor"`
	// LogDir tunes log-dir moves (logdir-move-requested).
	LogDir LogDir `yaml:"logdir"`
	// PartitionOffline tunes the elections of partition-offline.
	PartitionOffline PartitionOffline `yaml:"partition_offline"`
	// Alertmanager maps Alertmanager webhook notifications (POST /v1/alertmanager on the
	// HTTP listener) to events.
	Alertmanager Alertmanager `yaml:"alertmanager"`
	// Guardrails are limits every event must stay within, whatever it asks.
	Guardrails guardrails.Limits `yaml:"guardrails"`
	// Approval says which plans wait for a person's approval, and who may give it.
	Approval approval.Policy `yaml:"approval"`
	// Console is the web console under /ui/ (console.go).
	Console Console `yaml:"console"`

	// EnvOverrides names the environment variables that set fields of this configuration
	// (see [ParseEnv]), sorted; nil when none did, and always from [Parse]. Names only:
	// the values may be secrets.
	EnvOverrides []string `yaml:"-"`
}

// Alertmanager maps firing Alertmanager alerts to events.
type Alertmanager struct {
	// MaxBytes bounds a webhook payload; a bigger one gets HTTP 413. Default 1 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// Source is the CloudEvents source of the events published. Default "alertmanager".
	Source string `yaml:"source"`
	// Rules are tried in order; the first that matches a firing alert makes its event.
	Rules []AlertRule `yaml:"rules"`
	// Webhook guards the door: where it listens, who may post, how much (webhook.go).
	Webhook `yaml:",inline"`
}

// AlertRule turns a firing alert into an event.
type AlertRule struct {
	// Alertname is the alertname label the rule matches (required).
	Alertname string `yaml:"alertname"`
	// Labels are further labels the alert must have, with these values.
	Labels map[string]string `yaml:"labels"`
	// Type is the event type made (required).
	Type string `yaml:"type"`
	// ClusterLabel is the label that names the cluster. Default "cluster".
	ClusterLabel string `yaml:"cluster_label"`
	// Fields maps event data fields to the labels their values come from, e.g.
	// broker: broker_id. A list field takes a comma-separated label value.
	Fields map[string]string `yaml:"fields"`
}

// Worker identifies this worker process.
type Worker struct {
	// ID names the worker in results, logs and its NATS connection.
	// Default: <hostname>-<pid>.
	ID string `yaml:"id"`
}

// Log configures the process logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info (default), warn or error
	Format string `yaml:"format"` // json (default) or console
}

// HTTP configures the health and metrics server.
type HTTP struct {
	// Listen is the host:port the server binds; it serves /healthz, /readyz
	// and /metrics. Default 127.0.0.1:8080. Port 0 picks a free port.
	Listen string `yaml:"listen"`
}

// NATS configures the connection that carries events and results.
type NATS struct {
	// URL is a NATS server URL, or several separated by commas. Required. It prints
	// without the credentials it may carry.
	URL NATSURLs `yaml:"url"`
	// Consumer is the durable JetStream consumer shared by the workers of one fleet.
	// Default kafkamender-workers.
	Consumer string `yaml:"consumer"`
	// Subjects are the event subjects this fleet consumes. Default
	// [kafkamender.events.>], every event: one for a cluster no worker of the fleet knows
	// then gets a "rejected" result. A fleet that serves some clusters only lists
	// kafkamender.events.<cluster>.> for each; fleets on one stream must not overlap.
	Subjects []string `yaml:"subjects"`
	// AckWait is how long JetStream waits for a worker's sign of life on an event before
	// giving it to another worker: the delay before a crashed worker's event is taken
	// over. Workers in progress renew it every third of it. Default 30s.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxAttempts bounds the deliveries of an event that keeps failing transiently (or
	// whose worker keeps dying): after it the event gets a failed result and a copy on
	// kafkamender.dead.<cluster>. Default 10.
	MaxAttempts int `yaml:"max_attempts"`
	// EventsMaxBytes bounds the events stream KAFKAMENDER_EVENTS: when it is full, a
	// publish is refused with an error and nothing stored is dropped. Default 256 MiB.
	EventsMaxBytes int64 `yaml:"events_max_bytes"`
	// ResultsMaxBytes bounds the results stream KAFKAMENDER_RESULTS: when it is full, the
	// oldest results go first. Default 1 GiB.
	ResultsMaxBytes int64 `yaml:"results_max_bytes"`
	// Replicas is how many copies JetStream keeps of every stream and key-value bucket the
	// worker creates (events, results, dead letters, journal, locks, …), 1 to 5. Unset
	// (0): 3 when the server the worker connects to reports a cluster, 1 otherwise (see
	// natsjs.Replicas). An asset that exists already keeps its replicas: one with fewer is
	// reported on /readyz and in the log, never changed by a worker.
	Replicas int `yaml:"replicas"`

	// TLS of the connection: a custom certificate authority, a client certificate. A
	// tls:// URL turns TLS on too.
	TLS TLS `yaml:"tls"`
	// Authentication: one of user and password, token, nkey, credentials file (or
	// credentials in URL).
	//
	// User, or UserFile, a file holding it, with Password (from KAFKAMENDER_NATS_PASSWORD)
	// or PasswordFile.
	User         string `yaml:"user"`
	UserFile     string `yaml:"user_file"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// Token (from KAFKAMENDER_NATS_TOKEN), or TokenFile.
	Token     Secret `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// NKeySeedFile is a file holding an NKEY seed (SU…), the user's private key.
	NKeySeedFile string `yaml:"nkey_seed_file"`
	// CredsFile is a .creds file: a user JWT and its NKEY seed (decentralized auth).
	CredsFile string `yaml:"creds_file"`
}

// LockBackend is where a cluster's lock lives.
type LockBackend string

// Lock backends.
const (
	// LockZooKeeper: a ZooKeeper lock recipe (the default). A cluster with a zookeeper of
	// its own keeps its lock there; the others in lock.zookeeper.
	LockZooKeeper LockBackend = "zookeeper"
	// LockNATS: an entry of a NATS JetStream key-value bucket (lock.nats), renewed while
	// held: no ZooKeeper needed (KRaft clusters).
	LockNATS LockBackend = "nats"
)

// Lock configures where kafkamender's per-cluster locks live.
type Lock struct {
	// Backend is the lock backend of the clusters that do not set their own
	// (clusters.<name>.lock.backend): zookeeper (default) or nats.
	Backend LockBackend `yaml:"backend"`
	// ZooKeeper is a connect string, host:port[,host:port...][/chroot]; see
	// [ParseZKConnect]. Required when a cluster with lock backend zookeeper has no
	// zookeeper of its own (KRaft): it holds their locks. A cluster with one keeps its
	// lock there, under Root (outside Kafka's chroot), so that the lock fences the
	// worker's writes to that cluster's znodes in one ZooKeeper transaction.
	ZooKeeper string `yaml:"zookeeper"`
	// NATS configures the NATS key-value lock.
	NATS NATSLock `yaml:"nats"`
	// Root is the znode under which the locks live. Default /kafkamender/locks.
	Root string `yaml:"root"`
	// SessionTimeout is the ZooKeeper session timeout: how long after losing
	// its connection a worker still holds its locks. Default 10s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// AcquireTimeout bounds the wait for a cluster's lock. Default 5m.
	AcquireTimeout time.Duration `yaml:"acquire_timeout"`
	// ZooKeeperAuth is the digest identity of the worker in every ZooKeeper it keeps locks
	// in: the lock znodes it creates can then be changed and deleted by that identity
	// alone (every worker of a fleet uses the same). None: open ACLs.
	ZooKeeperAuth ZooKeeperAuth `yaml:"zookeeper_auth"`
}

// NATSLock configures the NATS JetStream key-value lock.
type NATSLock struct {
	// Bucket is the key-value bucket of the locks (key: cluster). Default KAFKAMENDER_LOCKS.
	Bucket string `yaml:"bucket"`
	// TTL is how long a lock entry lives without renewal: how soon the lock of a worker
	// that died is free (holders renew every TTL/3). Default 10s.
	TTL time.Duration `yaml:"ttl"`
}

// ClusterLock is a cluster's own lock setting.
type ClusterLock struct {
	// Backend overrides lock.backend for this cluster.
	Backend LockBackend `yaml:"backend"`
}

// Strategy selects how changes are applied to a cluster.
type Strategy string

// Strategies: how a cluster is changed (docs/contract.md, replica-change-requested).
const (
	// StrategyAuto uses the admin API when the brokers support
	// AlterPartitionReassignments, else zk-reassign.
	StrategyAuto Strategy = "auto"
	// StrategyAPI uses the Kafka admin API (Kafka >= 2.4, ZooKeeper or KRaft).
	StrategyAPI Strategy = "api"
	// StrategyZKReassign writes /admin/reassign_partitions in the cluster's
	// ZooKeeper (legacy clusters).
	StrategyZKReassign Strategy = "zk-reassign"
	// StrategyZKNudge edits the topic znode and moves the controller; opt-in.
	StrategyZKNudge Strategy = "zk-nudge"
)

// Strategies returns every valid strategy, auto first.
func Strategies() []Strategy {
	return []Strategy{StrategyAuto, StrategyAPI, StrategyZKReassign, StrategyZKNudge}
}

// NeedsZooKeeper reports whether the strategy cannot work without the
// cluster's ZooKeeper.
func (s Strategy) NeedsZooKeeper() bool {
	return s == StrategyZKReassign || s == StrategyZKNudge
}

// Cluster is one Kafka cluster the worker may change.
type Cluster struct {
	// Name is the key of the cluster in Config.Clusters, set by Parse.
	Name string `yaml:"-"`
	// BootstrapServers lists host:port of one or more brokers. Required.
	BootstrapServers []string `yaml:"bootstrap_servers"`
	// ZooKeeper is the connect string of the cluster's own ZooKeeper,
	// chroot included (host:port/kafka). Optional; the zk-* strategies
	// need it.
	ZooKeeper string `yaml:"zookeeper"`
	// Strategy is how changes are applied. Default auto.
	Strategy Strategy `yaml:"strategy"`
	// Lock says where the cluster's lock lives (default: lock.backend).
	Lock ClusterLock `yaml:"lock"`
	// TLS of the connections to the brokers.
	TLS TLS `yaml:"tls"`
	// SASL authenticates the worker to the brokers.
	SASL SASL `yaml:"sasl"`
	// ZooKeeperAuth is the digest identity Kafka's znodes were created with (Kafka's
	// zookeeper.set.acl), which the zk-reassign and zk-nudge strategies need to edit them.
	ZooKeeperAuth ZooKeeperAuth `yaml:"zookeeper_auth"`
	// CapacityBytes is the capacity of each listed broker in bytes, for plans that copy
	// data onto brokers (broker-failed, broker-drain, broker-added, replication-factor
	// raises). A broker it lists holds the sum of its replicas' sizes against it; a broker
	// it does not list is bounded by its log directories' volumes as it reports them
	// (Kafka 3.3+), else not at all. For brokers that share a disk, whose volumes say
	// nothing about their own share.
	CapacityBytes map[int32]int64 `yaml:"capacity_bytes"`
	// CapacityThreshold is the share of a broker's capacity no plan may put it above.
	// Default 0.8; in (0, 1].
	CapacityThreshold *float64 `yaml:"capacity_threshold"`
}

// DefaultCapacityThreshold is the default of clusters.<name>.capacity_threshold.
const DefaultCapacityThreshold = 0.8

// Defaults.
const (
	DefaultLogLevel           = "info"
	DefaultLogFormat          = "json"
	DefaultHTTPListen         = "127.0.0.1:8080"
	DefaultLockRoot           = "/kafkamender/locks"
	DefaultLockBucket         = events.LocksBucket
	DefaultLockTTL            = 10 * time.Second
	DefaultNATSConsumer       = "kafkamender-workers"
	DefaultNATSSubjects       = "kafkamender.events.>"
	DefaultNATSAckWait        = 30 * time.Second
	DefaultNATSMaxAttempts    = 10
	DefaultLockSessionTimeout = 10 * time.Second
	DefaultLockAcquireTimeout = 5 * time.Minute
)

// Load reads the configuration file at path and parses it with the process's
// environment variables: see [ParseEnv].
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseEnv(data, os.Environ())
	if err != nil {
		if n := countJoined(err); n > 1 {
			return nil, fmt.Errorf("config %s: %d problems:\n  %w", path, n, indented{err})
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes a YAML configuration, reads the files its _file fields name (secrets,
// and the user names that go with them) and checks its TLS files, applies the defaults
// and validates it. It reads no environment variables. Relative paths are relative to
// the working directory, not to the configuration file.
func Parse(data []byte) (*Config, error) {
	return ParseEnv(data, nil)
}

// ParseEnv is [Parse] with environment variables, given as "name=value" entries the way
// [os.Environ] returns them, applied after decoding and before the defaults.
//
// A variable KAFKAMENDER_A_B_C sets the field at YAML path a.b.c (upper case, '.'
// turned into '_'): a string, an integer, a boolean, a number, a duration (10s, 5m) or
// a list of strings (comma-separated). The fields of a cluster in the file are set by
// KAFKAMENDER_CLUSTERS_<NAME>_<FIELD>, <NAME> the cluster's name upper-cased with every
// character other than A-Z and 0-9 turned into '_'. Mappings and lists of mappings
// (clusters themselves, alertmanager.rules) cannot be set. Surrounding white space is
// trimmed, and a variable set to nothing is left out. A KAFKAMENDER_ variable that
// names no field it can set is an error, except the fault-test hooks
// KAFKAMENDER_PAUSE_AT and KAFKAMENDER_LOGDIR_KILL_AT; so is one that names a field of
// two clusters (prod-eu and prod_eu). Errors name the variable and never show its
// value; validation problems of a field a variable set name the variable too, and hide
// its value.
//
// The variables applied are listed in [Config.EnvOverrides]. The _file fields are read
// after the variables are applied (a variable may name the file): see [Secret].
func ParseEnv(data []byte, environ []string) (*Config, error) {
	return parse(data, environ, true)
}

// parse is ParseEnv; files false leaves the _file fields unread and the TLS files
// unchecked, for examples that name files of another host.
func parse(data []byte, environ []string, files bool) (*Config, error) {
	var cfg Config
	if err := decodeStrict(data, &cfg); err != nil {
		return nil, err
	}
	applied, err := applyEnv(&cfg, environ)
	if err != nil {
		return nil, err
	}
	for _, set := range applied {
		cfg.EnvOverrides = append(cfg.EnvOverrides, set.name)
	}
	var p problems
	if files {
		cfg.readFiles(&p)
	}
	cfg.setDefaults()
	if p = append(p, cfg.problems()...); len(p) > 0 {
		markEnv(p, applied)
		return nil, p.err()
	}
	return &cfg, nil
}

// ClusterNames returns the names of the configured clusters, sorted.
func (c *Config) ClusterNames() []string {
	names := make([]string, 0, len(c.Clusters))
	for name := range c.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// LockBackend is where the cluster's lock lives: its own setting, else lock.backend.
func (c *Config) LockBackend(cluster string) LockBackend {
	if cl := c.Clusters[cluster]; cl != nil && cl.Lock.Backend != "" {
		return cl.Lock.Backend
	}
	if c.Lock.Backend == "" {
		return LockZooKeeper
	}
	return c.Lock.Backend
}

// NeedsLockZooKeeper reports whether a cluster keeps its lock in lock.zookeeper (lock
// backend zookeeper and no zookeeper of its own).
func (c *Config) NeedsLockZooKeeper() bool {
	for name, cl := range c.Clusters {
		if cl != nil && cl.ZooKeeper == "" && c.LockBackend(name) == LockZooKeeper {
			return true
		}
	}
	return false
}

func validLockBackend(b LockBackend) bool { return b == LockZooKeeper || b == LockNATS }

func (c *Config) setDefaults() {
	if c.Alertmanager.MaxBytes == 0 {
		c.Alertmanager.MaxBytes = 1 << 20
	}
	if c.Guardrails.MaxTimeout == 0 {
		c.Guardrails.MaxTimeout = guardrails.DefaultMaxTimeout
	}
	if c.Alertmanager.Source == "" {
		c.Alertmanager.Source = "alertmanager"
	}
	c.Alertmanager.Webhook.setDefaults()
	c.Console.setDefaults()
	for i := range c.Alertmanager.Rules {
		if c.Alertmanager.Rules[i].ClusterLabel == "" {
			c.Alertmanager.Rules[i].ClusterLabel = "cluster"
		}
	}
	if c.Worker.ID == "" {
		c.Worker.ID = defaultWorkerID()
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = DefaultHTTPListen
	}
	c.BrokerOverloaded.SetDefaults()
	c.ReplicationFactor.SetDefaults()
	c.LogDir.SetDefaults()
	if c.NATS.Consumer == "" {
		c.NATS.Consumer = DefaultNATSConsumer
	}
	if len(c.NATS.Subjects) == 0 {
		c.NATS.Subjects = []string{DefaultNATSSubjects}
	}
	if c.NATS.AckWait == 0 {
		c.NATS.AckWait = DefaultNATSAckWait
	}
	if c.NATS.EventsMaxBytes == 0 {
		c.NATS.EventsMaxBytes = 256 << 20
	}
	if c.NATS.ResultsMaxBytes == 0 {
		c.NATS.ResultsMaxBytes = 1 << 30
	}
	if c.NATS.MaxAttempts == 0 {
		c.NATS.MaxAttempts = DefaultNATSMaxAttempts
	}
	if c.Lock.Root == "" {
		c.Lock.Root = DefaultLockRoot
	}
	if c.Lock.Backend == "" {
		c.Lock.Backend = LockZooKeeper
	}
	if c.Lock.NATS.Bucket == "" {
		c.Lock.NATS.Bucket = DefaultLockBucket
	}
	if c.Lock.NATS.TTL == 0 {
		c.Lock.NATS.TTL = DefaultLockTTL
	}
	if c.Lock.SessionTimeout == 0 {
		c.Lock.SessionTimeout = DefaultLockSessionTimeout
	}
	if c.Lock.AcquireTimeout == 0 {
		c.Lock.AcquireTimeout = DefaultLockAcquireTimeout
	}
	for name, cl := range c.Clusters {
		if cl == nil { // "local:" with nothing under it
			cl = &Cluster{}
			c.Clusters[name] = cl
		}
		cl.Name = name
		if cl.Strategy == "" {
			cl.Strategy = StrategyAuto
		}
		if cl.CapacityThreshold == nil {
			t := DefaultCapacityThreshold
			cl.CapacityThreshold = &t
		}
	}
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "kafkamender"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Validate checks a complete configuration (defaults applied) and returns
// every problem found, joined, each prefixed with the path of its field.
func (c *Config) Validate() error {
	return c.problems().err()
}

func (c *Config) problems() problems {
	var p problems

	if c.Worker.ID == "" {
		p.add("worker.id", errors.New("required"))
	}

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", fmt.Errorf("unknown level %q (want debug, info, warn or error)", c.Log.Level))
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		p.add("log.format", fmt.Errorf("unknown format %q (want json or console)", c.Log.Format))
	}

	if err := checkHostPort(c.HTTP.Listen, true); err != nil {
		p.add("http.listen", fmt.Errorf("%q: %w", c.HTTP.Listen, err))
	}

	if c.NATS.URL == "" {
		p.add("nats.url", errors.New("required"))
	} else if err := checkNATSURLs(c.NATS.URL.Reveal()); err != nil {
		p.add("nats.url", err)
	}
	c.NATS.validateSecurity(&p)

	c.ReplicationFactor.validate(&p)
	c.LogDir.validate(&p)
	c.Alertmanager.validate(&p)
	c.Alertmanager.Webhook.validate(c.HTTP.Listen, len(c.Alertmanager.Rules) > 0, &p)
	c.Console.validate(c.Alertmanager.Listen, &p)
	for _, g := range c.Guardrails.Problems() {
		p.add(g.Field, g.Err)
	}
	for _, a := range c.Approval.Problems(c.ClusterNames()) {
		p.add(a.Field, a.Err)
	}
	c.BrokerOverloaded.validate(&p)
	if !validConsumerName(c.NATS.Consumer) {
		p.add("nats.consumer", fmt.Errorf("%q: want letters, digits, '-' or '_'", c.NATS.Consumer))
	}
	if c.NATS.AckWait < time.Second {
		p.add("nats.ack_wait", fmt.Errorf("%s: must be at least 1s", c.NATS.AckWait))
	}
	if c.NATS.MaxAttempts < 1 {
		p.add("nats.max_attempts", fmt.Errorf("%d: must be at least 1", c.NATS.MaxAttempts))
	}
	if c.NATS.Replicas < 0 || c.NATS.Replicas > 5 {
		p.add("nats.replicas", fmt.Errorf("%d: must be 1 to 5 (JetStream's limit), or unset for 3 on a NATS cluster and 1 on a single server", c.NATS.Replicas))
	}
	// At least room for a few events (or results) of the largest size.
	for path, v := range map[string]int64{"nats.events_max_bytes": c.NATS.EventsMaxBytes, "nats.results_max_bytes": c.NATS.ResultsMaxBytes} {
		if v < 16<<20 {
			p.add(path, fmt.Errorf("%d: must be at least 16777216 (16 MiB)", v))
		}
	}
	for i, subj := range c.NATS.Subjects {
		if !strings.HasPrefix(subj, "kafkamender.events.") || strings.ContainsAny(subj, " \t") {
			p.add(fmt.Sprintf("nats.subjects[%d]", i), fmt.Errorf("%q: must start with kafkamender.events.", subj))
		}
	}

	if !validLockBackend(c.Lock.Backend) {
		p.add("lock.backend", fmt.Errorf("%q: unknown backend (want zookeeper or nats)", c.Lock.Backend))
	}
	switch {
	case c.Lock.ZooKeeper != "":
		if _, _, err := ParseZKConnect(c.Lock.ZooKeeper); err != nil {
			p.add("lock.zookeeper", err)
		}
	case c.NeedsLockZooKeeper():
		p.add("lock.zookeeper", errors.New("required: a cluster without a zookeeper of its own keeps its lock in ZooKeeper (lock backend zookeeper)"))
	}
	if c.Lock.NATS.TTL < time.Second {
		p.add("lock.nats.ttl", fmt.Errorf("%s: must be at least 1s", c.Lock.NATS.TTL))
	}
	if !events.ValidToken(c.Lock.NATS.Bucket) {
		p.add("lock.nats.bucket", fmt.Errorf("%q: must be a valid bucket name (letters, digits, '-' or '_')", c.Lock.NATS.Bucket))
	}
	if err := checkZNodePath(c.Lock.Root); err != nil {
		p.add("lock.root", fmt.Errorf("%q: %w", c.Lock.Root, err))
	}
	if c.Lock.SessionTimeout <= 0 {
		p.add("lock.session_timeout", fmt.Errorf("must be positive, got %s", c.Lock.SessionTimeout))
	}
	if c.Lock.AcquireTimeout <= 0 {
		p.add("lock.acquire_timeout", fmt.Errorf("must be positive, got %s", c.Lock.AcquireTimeout))
	}
	c.Lock.ZooKeeperAuth.validate("lock.zookeeper_auth", &p)

	if len(c.Clusters) == 0 {
		p.add("clusters", errors.New("must define at least one cluster"))
	}
	for _, name := range c.ClusterNames() {
		if err := events.CheckClusterName(name); err != nil {
			p.add("clusters", fmt.Errorf("bad cluster name %q: %w (it is a token of the event subjects)", name, err))
			continue
		}
		c.Clusters[name].validate(pathJoin("clusters", name), &p)
	}
	return p
}

func (cl *Cluster) validate(path string, p *problems) {
	if cl == nil {
		p.add(path+".bootstrap_servers", errors.New("must list at least one broker"))
		return
	}
	if len(cl.BootstrapServers) == 0 {
		p.add(path+".bootstrap_servers", errors.New("must list at least one broker"))
	}
	seen := make(map[string]int, len(cl.BootstrapServers))
	for i, addr := range cl.BootstrapServers {
		item := fmt.Sprintf("%s.bootstrap_servers[%d]", path, i)
		if err := checkHostPort(addr, false); err != nil {
			p.add(item, fmt.Errorf("%q: %w", addr, err))
			continue
		}
		if j, dup := seen[addr]; dup {
			p.add(item, fmt.Errorf("%q: listed twice (also [%d])", addr, j))
			continue
		}
		seen[addr] = i
	}

	if cl.ZooKeeper != "" {
		if _, _, err := ParseZKConnect(cl.ZooKeeper); err != nil {
			p.add(path+".zookeeper", err)
		}
	}
	switch {
	case cl.Lock.Backend != "" && !validLockBackend(cl.Lock.Backend):
		p.add(path+".lock.backend", fmt.Errorf("%q: unknown backend (want zookeeper or nats)", cl.Lock.Backend))
	case cl.Lock.Backend == LockNATS && cl.ZooKeeper != "":
		p.add(path+".lock.backend", errors.New("nats: a cluster with a zookeeper of its own keeps its lock there, which fences the worker's znode writes in the same transaction; use zookeeper"))
	}

	for _, id := range slices.Sorted(maps.Keys(cl.CapacityBytes)) {
		if id < 0 {
			p.add(path+".capacity_bytes", fmt.Errorf("broker %d: a broker id is not negative", id))
		}
		if b := cl.CapacityBytes[id]; b <= 0 {
			p.add(fmt.Sprintf("%s.capacity_bytes.%d", path, id), fmt.Errorf("%d: must be above 0", b))
		}
	}
	if t := cl.CapacityThreshold; t != nil && (*t <= 0 || *t > 1) {
		p.add(path+".capacity_threshold", fmt.Errorf("%g: must be above 0 and at most 1", *t))
	}

	validateTLSFields(path+".tls", cl.TLS, p)
	cl.SASL.validate(path+".sasl", p)
	cl.ZooKeeperAuth.validate(path+".zookeeper_auth", p)
	if cl.ZooKeeperAuth.Set() && cl.ZooKeeper == "" {
		p.add(path+".zookeeper_auth", errors.New("set, but the cluster has no zookeeper"))
	}

	if !slices.Contains(Strategies(), cl.Strategy) {
		p.add(path+".strategy", fmt.Errorf("unknown strategy %q (want auto, api, zk-reassign or zk-nudge)", cl.Strategy))
	} else if cl.Strategy.NeedsZooKeeper() && cl.ZooKeeper == "" {
		p.add(path+".zookeeper", fmt.Errorf("required by strategy %s", cl.Strategy))
	}
}

// checkHostPort checks a host:port address. An empty host is allowed only
// for listen addresses (all interfaces), and so is port 0 (any free port).
func checkHostPort(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" && !listen {
		return errors.New("missing host")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	if n == 0 && !listen {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// checkNATSURLs checks a comma-separated list of NATS server URLs the way the
// NATS client will read them, so that a typo fails at startup rather than in
// an endless reconnect loop.
func checkNATSURLs(s string) error {
	var errs []error
	schemes := map[bool]bool{} // websocket or not
	for raw := range strings.SplitSeq(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			errs = append(errs, fmt.Errorf("%q: empty URL in list", RedactNATSURLs(s)))
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: cannot parse", redactNATSURL(raw)))
			continue
		}
		shown := redactNATSURL(raw)
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		case "":
			errs = append(errs, fmt.Errorf("%q: missing scheme (want nats://host:port)", shown))
			continue
		default:
			errs = append(errs, fmt.Errorf("%q: unsupported scheme %q (want nats, tls, ws or wss)", shown, u.Scheme))
			continue
		}
		schemes[u.Scheme == "ws" || u.Scheme == "wss"] = true
		if u.Hostname() == "" {
			errs = append(errs, fmt.Errorf("%q: missing host", shown))
			continue
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
				errs = append(errs, fmt.Errorf("%q: bad port %q", shown, p))
			}
		}
	}
	if len(schemes) > 1 {
		errs = append(errs, errors.New("cannot mix websocket (ws, wss) and other URLs"))
	}
	return errors.Join(errs...)
}

// redactNATSURL shows a NATS URL without its credentials, for error messages: a password
// becomes xxxxx (user:xxxxx@, as [url.URL.Redacted] shows it), and so does a user without
// a password, which is how NATS URLs carry a token (nats://token@host). A URL that does not
// parse loses whatever precedes its last '@' after the scheme.
func redactNATSURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		at := strings.LastIndexByte(raw, '@')
		if at < 0 {
			return raw
		}
		if i := strings.Index(raw, "://"); i >= 0 && i < at {
			return raw[:i+3] + "xxxxx" + raw[at:]
		}
		return "xxxxx" + raw[at:]
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// redactNATSURLs redacts each URL of a comma-separated list.
func RedactNATSURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactNATSURL(p)
	}
	return strings.Join(parts, ",")
}

// problems collects validation errors, each tagged with its field path.
type problems []error

func (p *problems) add(path string, err error) {
	*p = append(*p, &fieldError{path: path, err: err})
}

func (p problems) err() error { return errors.Join(p...) }

// fieldError is a problem with one field of the configuration.
type fieldError struct {
	path string // "" for the document itself
	err  error
	env  string   // the environment variable that set the field, if one did
	hide []string // texts not to show, quoted as %q quotes them: the variable's value
}

func (e *fieldError) Error() string {
	msg := e.err.Error()
	for _, h := range e.hide {
		msg = strings.ReplaceAll(msg, strconv.Quote(h), hiddenValue)
	}
	switch {
	case e.path == "":
		return msg
	case e.env != "":
		return e.path + " (from " + e.env + "): " + msg
	}
	return e.path + ": " + msg
}

func (e *fieldError) Unwrap() error { return e.err }

// pathJoin appends a mapping key to a field path, quoting keys that would
// make the path ambiguous.
func pathJoin(path, key string) string {
	if !events.ValidToken(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func countJoined(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// indented shows a multi-line error with its continuation lines indented,
// to sit under a heading; errors.Is and errors.As see through it.
type indented struct{ err error }

func (e indented) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "\n  ") }
func (e indented) Unwrap() error { return e.err }

func validConsumerName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (a *Alertmanager) validate(p *problems) {
	if a.MaxBytes < 0 {
		p.add("alertmanager.max_bytes", fmt.Errorf("%d: must not be negative", a.MaxBytes))
	}
	for i, r := range a.Rules {
		path := fmt.Sprintf("alertmanager.rules[%d]", i)
		if r.Alertname == "" {
			p.add(path+".alertname", errors.New("required"))
		}
		if !slices.Contains(eventTypeNames(), r.Type) {
			p.add(path+".type", fmt.Errorf("%q: want one of %s", r.Type, strings.Join(eventTypeNames(), ", ")))
			continue
		}
		for _, field := range slices.Sorted(maps.Keys(r.Fields)) {
			if field == "cluster" {
				p.add(path+".fields.cluster", fmt.Errorf("the cluster comes from cluster_label (%q)", r.ClusterLabel))
				continue
			}
			if _, ok := events.DataField(r.Type, field); !ok {
				p.add(path+".fields."+field, fmt.Errorf("%s events have no data field %q", r.Type, field))
			}
			if r.Fields[field] == "" {
				p.add(path+".fields."+field, errors.New("names no label"))
			}
		}
	}
}

// eventTypeNames are the types an alert rule may make: those that change a cluster, not
// the control events (a pause is for people; a firing alert would pause, and its
// resolution not resume) nor the answers to plans (an approval is a person's).
func eventTypeNames() []string { return approval.ApprovableTypes() }
