package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type serverKind int

const (
	kindZooKeeper serverKind = iota
	kindKafka
	kindNATS
	kindNATSSecure // the secured nats-server (secure.go)
	kindAlertmanager
)

// server is one process of the stack.
type server struct {
	name    string
	kind    serverKind
	cluster Cluster  // kindKafka only
	broker  Broker   // kindKafka only
	node    NATSNode // kindNATS only
}

// servers lists the stack's servers in start order: ZooKeeper first (the ZooKeeper-mode
// brokers need it), then the brokers, then NATS and Alertmanager.
func servers() []server {
	out := []server{{name: "zookeeper", kind: kindZooKeeper}}
	for _, c := range Clusters() {
		for _, b := range c.Brokers {
			out = append(out, server{name: c.ServerName(b.ID), kind: kindKafka, cluster: c, broker: b})
		}
	}
	for _, n := range NATSNodes() {
		out = append(out, server{name: n.Name, kind: kindNATS, node: n})
	}
	return append(out, server{name: "nats-secure", kind: kindNATSSecure},
		server{name: "alertmanager", kind: kindAlertmanager})
}

// NATSGroup names every node of the NATS cluster at once, where the stack takes a server
// name (Stop, Start, Kill, Restart, Pause, Resume; stackctl stop nats): before the stack
// ran a cluster, "nats" was its one nats-server.
const NATSGroup = "nats"

// ServerNames lists the names of the stack's servers, in start order.
func ServerNames() []string {
	var names []string
	for _, s := range servers() {
		names = append(names, s.name)
	}
	return names
}

func lookupServer(name string) (server, error) {
	for _, s := range servers() {
		if s.name == name {
			return s, nil
		}
	}
	return server{}, fmt.Errorf("no server %q in the local stack (have %s, or %s for every NATS node)", name, strings.Join(ServerNames(), ", "), NATSGroup)
}

// lookupServers returns the named server, or every node of the NATS cluster for NATSGroup.
func lookupServers(name string) ([]server, error) {
	if name == NATSGroup {
		var out []server
		for _, s := range servers() {
			if s.kind == kindNATS {
				out = append(out, s)
			}
		}
		return out, nil
	}
	srv, err := lookupServer(name)
	if err != nil {
		return nil, err
	}
	return []server{srv}, nil
}

func (s *Stack) serverDir(srv server) string { return filepath.Join(s.stateDir, srv.name) }

// LogPath is the file that receives the server's stdout and stderr.
func (s *Stack) LogPath(name string) string { return filepath.Join(s.stateDir, name, "server.log") }

// configPath is the server's configuration file; it is also how the process is recognised.
func (s *Stack) configPath(srv server) string {
	switch srv.kind {
	case kindZooKeeper:
		return filepath.Join(s.serverDir(srv), "zookeeper.properties")
	case kindNATS, kindNATSSecure:
		return filepath.Join(s.serverDir(srv), "nats.conf")
	case kindAlertmanager:
		return filepath.Join(s.serverDir(srv), "alertmanager.yml")
	default:
		return filepath.Join(s.serverDir(srv), "server.properties")
	}
}

func (srv server) progs() []string {
	switch srv.kind {
	case kindNATS, kindNATSSecure:
		return []string{"nats-server"}
	case kindAlertmanager:
		return []string{"alertmanager"}
	}
	return []string{"java"}
}

// Classpath is the Java classpath the brokers of cluster run with (the Maven-resolved jars
// in the cache, kafka-tools among them), so that Kafka's own CLIs (ReassignPartitionsCommand,
// LeaderElectionCommand) can run from the same jars, e.g. for side-by-side benchmarks.
func (s *Stack) Classpath(cluster Cluster) string {
	return filepath.Join(s.libs(server{kind: kindKafka, cluster: cluster}), "*")
}

func (s *Stack) libs(srv server) string {
	switch {
	case srv.kind == kindKafka && srv.cluster.Mode == ModeKRaft:
		return s.libsDir("kafka-4")
	case srv.kind == kindKafka && srv.cluster.Version == Kafka23Version:
		return s.libsDir("kafka-2.3")
	}
	return s.libsDir("kafka-3.9")
}

func (srv server) logDirs(dir string) []string {
	n := srv.broker.LogDirs
	if n <= 1 {
		return []string{filepath.Join(dir, "data")}
	}
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, filepath.Join(dir, fmt.Sprintf("data-%c", 'a'+i)))
	}
	return out
}

// LogDirs returns the log directories (disks) of a broker of the local stack.
func (s *Stack) LogDirs(cluster string, id int32) ([]string, error) {
	c, err := ClusterByName(cluster)
	if err != nil {
		return nil, err
	}
	srv, err := lookupServer(c.ServerName(id))
	if err != nil {
		return nil, err
	}
	return srv.logDirs(s.serverDir(srv)), nil
}

// writeConfig writes the server's configuration files into its folder.
func (s *Stack) writeConfig(srv server) error {
	dir := s.serverDir(srv)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var files map[string]string
	switch srv.kind {
	case kindZooKeeper:
		files = map[string]string{
			"zookeeper.properties": props(
				"dataDir", filepath.Join(dir, "data"),
				"clientPort", "2181",
				"clientPortAddress", "127.0.0.1",
				"maxClientCnxns", "0",
				"admin.enableServer", "false",
				// A short tick lets lock tests use session timeouts of a second or two;
				// the explicit bounds keep the brokers' 10s sessions as asked.
				"tickTime", "500",
				"minSessionTimeout", "1000",
				"maxSessionTimeout", "60000",
				"4lw.commands.whitelist", "ruok,srvr,stat,mntr,dump,cons",
			),
			"log4j.properties": log4j1,
		}
	case kindNATS:
		files = map[string]string{"nats.conf": natsNodeConf(srv.node, filepath.Join(dir, "jetstream"))}
	case kindNATSSecure:
		if err := s.ensureSecrets(); err != nil {
			return err
		}
		conf, err := s.natsSecureConf(dir)
		if err != nil {
			return err
		}
		files = map[string]string{"nats.conf": conf}
	case kindAlertmanager:
		// Short waits so that tests and the demo see an alert within seconds; resolved
		// alerts are sent too (the worker ignores them, and tests check it does).
		files = map[string]string{"alertmanager.yml": alertmanagerConfig()}
	case kindKafka:
		kp, err := s.kafkaProps(srv)
		if err != nil {
			return err
		}
		files = map[string]string{"server.properties": kp}
		if srv.cluster.Mode == ModeKRaft {
			files["log4j2.properties"] = log4j2
		} else {
			files["log4j.properties"] = log4j1
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) kafkaProps(srv server) (string, error) {
	dir := s.serverDir(srv)
	b := srv.broker
	common := []string{
		"log.dirs", strings.Join(srv.logDirs(dir), ","),
		"auto.leader.rebalance.enable", "false",
		"auto.create.topics.enable", "false",
		"num.partitions", "1",
		"offsets.topic.replication.factor", "3",
		"offsets.topic.num.partitions", "5",
		"transaction.state.log.replication.factor", "3",
		"transaction.state.log.min.isr", "2",
		"transaction.state.log.num.partitions", "5",
		"group.initial.rebalance.delay.ms", "0",
		"log.cleaner.dedupe.buffer.size", "2097152",
		"log.segment.bytes", "16777216",
		"log.index.size.max.bytes", "1048576",
		"num.network.threads", "2",
		"num.io.threads", "2",
		"num.recovery.threads.per.data.dir", "1",
		"num.replica.fetchers", "1",
		"background.threads", "2",
		"replica.lag.time.max.ms", "10000",
		"unclean.leader.election.enable", "false",
		"delete.topic.enable", "true",
	}
	if b.Rack != "" {
		common = append(common, "broker.rack", b.Rack)
	}
	if srv.cluster.Mode == ModeZooKeeper {
		listeners := "PLAINTEXT://" + b.Addr
		if b.SASLAddr != "" {
			if err := s.ensureSecrets(); err != nil {
				return "", err
			}
			sasl, err := s.saslProps()
			if err != nil {
				return "", err
			}
			listeners += ",SASL_SSL://" + b.SASLAddr
			common = append(common, append([]string{"inter.broker.listener.name", "PLAINTEXT"}, sasl...)...)
		}
		return props(append([]string{
			"broker.id", fmt.Sprint(b.ID),
			"listeners", listeners,
			"advertised.listeners", listeners,
			"zookeeper.connect", srv.cluster.ZooKeeperConnect(),
			"zookeeper.session.timeout.ms", "10000",
			"zookeeper.connection.timeout.ms", "30000",
			"controlled.shutdown.max.retries", "1",
			"controlled.shutdown.retry.backoff.ms", "500",
		}, common...)...), nil
	}
	var voters []string
	for _, o := range srv.cluster.Brokers {
		voters = append(voters, fmt.Sprintf("%d@%s", o.ID, o.ControllerAddr))
	}
	return props(append([]string{
		"process.roles", "broker,controller",
		"node.id", fmt.Sprint(b.ID),
		"controller.quorum.voters", strings.Join(voters, ","),
		"listeners", "PLAINTEXT://" + b.Addr + ",CONTROLLER://" + b.ControllerAddr,
		"advertised.listeners", "PLAINTEXT://" + b.Addr,
		"controller.listener.names", "CONTROLLER",
		"inter.broker.listener.name", "PLAINTEXT",
		"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	}, common...)...), nil
}

// argv is the command line that runs the server.
func (s *Stack) argv(srv server) []string {
	dir := s.serverDir(srv)
	switch srv.kind {
	case kindNATS, kindNATSSecure:
		return []string{s.natsBinary(), "-c", s.configPath(srv)}
	case kindAlertmanager:
		return []string{s.AlertmanagerBinary(), "--config.file=" + s.configPath(srv),
			"--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + strings.TrimPrefix(AlertmanagerURL, "http://"),
			"--cluster.listen-address=", // no HA gossip: one instance
			"--log.level=warn"}
	}
	heap := "-Xmx256m"
	main := "kafka.Kafka"
	logging := "-Dlog4j.configuration=file:" + filepath.Join(dir, "log4j.properties")
	switch {
	case srv.kind == kindZooKeeper:
		heap = "-Xmx128m"
		main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	case srv.cluster.Mode == ModeKRaft:
		heap = "-Xmx320m"
		logging = "-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.properties")
	}
	return []string{
		s.java, "-Xms32m", heap,
		// Small and quick to start on a two-core machine: serial GC, C1 only, no perf data.
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Djava.awt.headless=true", logging,
		"-Dkafka.logs.dir=" + filepath.Join(dir, "logs"),
		"-cp", filepath.Join(s.libs(srv), "*"),
		main, s.configPath(srv),
	}
}

// props renders key/value pairs as a Java properties file, in the given order.
func props(kv ...string) string {
	var b strings.Builder
	b.WriteString("# written by kafkamender's local stack (internal/stack); do not edit\n")
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s=%s\n", kv[i], kv[i+1])
	}
	return b.String()
}

const log4j1 = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.state.change.logger=INFO
log4j.logger.kafka.controller=INFO
`

const log4j2 = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
`

// alertmanagerConfig is the local stack's Alertmanager configuration: every alert to the
// worker's webhook.
func alertmanagerConfig() string {
	return fmt.Sprintf(`# kafkamender local stack
route:
  receiver: kafkamender
  group_by: [alertname, cluster, broker_id]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 5s
receivers:
  - name: kafkamender
    webhook_configs:
      - url: %s
        send_resolved: true
`, WorkerWebhookURL)
}

// natsNodeConf is the configuration of one node of the stack's NATS cluster: JetStream on,
// routes to every node (its own route is ignored by nats-server), small limits that suit a
// laptop. Leader elections of JetStream's Raft groups take a few seconds after a node is
// lost, as in production.
func natsNodeConf(n NATSNode, storeDir string) string {
	var routes []string
	for _, o := range NATSNodes() {
		routes = append(routes, "    nats-route://"+o.RouteAddr)
	}
	return fmt.Sprintf(`# kafkamender local stack: node %s of the NATS cluster %s
server_name: %s
listen: %s
http: %s
# A node that hangs (frozen, cut off) keeps its connections open: pings every 5 s, two
# unanswered, drop its routes and clients within about 15 s instead of nats-server's
# 2 minutes × 2. Until then it stays in the queue groups that answer direct gets, and the
# reads it is given go unanswered.
ping_interval: "5s"
ping_max: 2
cluster {
  name: %s
  listen: %s
  routes: [
%s
  ]
}
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 4GB
}
`, n.Name, NATSClusterName, n.Name, strings.TrimPrefix(n.URL, "nats://"), strings.TrimPrefix(n.MonitorURL, "http://"),
		NATSClusterName, n.RouteAddr, strings.Join(routes, "\n"), storeDir)
}
