// Package stack runs kafkamender's local stack of real servers on loopback: ZooKeeper, a
// Kafka 3.9 cluster in ZooKeeper mode ("local"), a Kafka 2.3 cluster in ZooKeeper mode
// ("legacy", older than the reassignment API), a Kafka 4.x cluster in KRaft mode ("kraft"),
// a three-node NATS cluster with JetStream, a secured single nats-server, and Alertmanager. The tests, the demo and newcomers all use it.
//
// Kafka and ZooKeeper run from jars that Maven resolves from Maven Central into the
// git-ignored .cache folder (once; later runs reuse them); nats-server is built from the Go
// module pinned in go.mod. Every server runs as its own process, detached from the process
// that started it, with its configuration, data and log under one git-ignored state folder
// (.state/stack/<server>/). A server is recognised as ours by its command line naming its
// configuration file inside that folder, so the stack needs no pid files, finds servers
// started by an earlier process, and never touches a process it did not start.
//
// Up is idempotent: servers already running are left alone, the others are started, and it
// returns only when every server answers (ZooKeeper says imok, each Kafka cluster's metadata
// lists all its brokers, NATS /healthz is ok). Down stops everything Up started and removes
// the state folder. Stop, Kill, Pause and Start act on one server, for fault tests.
package stack

import (
	"fmt"
	"strings"
)

// Fixed addresses of the local stack. They are part of kafkamender's public interface
// (README, "The local stack"): operators' scripts and the nats CLI use them as written.
const (
	ZooKeeperAddr = "127.0.0.1:2181"
	KafkaChroot   = "/kafka"
	// NATSURL is the first node of the stack's three-node NATS cluster (NATSNodes); a
	// client that connects to it learns the others from the server and reconnects to them.
	// Workers are given every node: NATSClusterURL.
	NATSURL        = "nats://127.0.0.1:4222"
	NATSMonitorURL = "http://127.0.0.1:8222"
	// NATSClusterURL lists every node's client URL, as nats.url takes them.
	NATSClusterURL = "nats://127.0.0.1:4222,nats://127.0.0.1:4232,nats://127.0.0.1:4242"
	// NATSClusterName is the name of the NATS cluster (its routes' cluster block).
	NATSClusterName = "kafkamender-local"
	// AlertmanagerURL is the local Alertmanager's API (POST /api/v2/alerts); its one
	// route sends every alert to WorkerWebhookURL, the webhook of the worker that
	// deployments/local/worker.yaml configures.
	AlertmanagerURL  = "http://127.0.0.1:9093"
	WorkerWebhookURL = "http://127.0.0.1:8080/v1/alertmanager"

	// KRaftClusterID is the cluster id the KRaft nodes are formatted with (base64 of
	// "kafkamenderkraft", 16 bytes, as Kafka requires).
	KRaftClusterID = "a2Fma2FtZW5kZXJrcmFmdA"

	Kafka39Version = "3.9.1"
	Kafka4Version  = "4.1.1"
	// Kafka23Version runs the legacy cluster: before 2.4 (KIP-455), so no
	// AlterPartitionReassignments; ElectLeaders exists (2.2+), IncrementalAlterConfigs (2.3+).
	Kafka23Version = "2.3.1"
	// LegacyChroot is the legacy cluster's chroot in the stack's ZooKeeper.
	LegacyChroot = "/legacy"
)

// NATSNode is one node of the stack's NATS cluster: the server named Name (its
// server_name too), with its client, monitoring and cluster route addresses.
type NATSNode struct {
	Name       string
	URL        string // nats://127.0.0.1:<client port>
	MonitorURL string // http://127.0.0.1:<monitoring port>
	RouteAddr  string // the cluster listener, which the other nodes route to
}

// NATSNodes are the three nodes of the stack's NATS cluster, in start order. The stack's
// server group "nats" names them all (stackctl stop nats stops the three).
func NATSNodes() []NATSNode {
	return []NATSNode{
		{Name: "nats-1", URL: "nats://127.0.0.1:4222", MonitorURL: "http://127.0.0.1:8222", RouteAddr: "127.0.0.1:6222"},
		{Name: "nats-2", URL: "nats://127.0.0.1:4232", MonitorURL: "http://127.0.0.1:8232", RouteAddr: "127.0.0.1:6232"},
		{Name: "nats-3", URL: "nats://127.0.0.1:4242", MonitorURL: "http://127.0.0.1:8242", RouteAddr: "127.0.0.1:6242"},
	}
}

// NATSURLs are the client URLs of the NATS cluster's nodes.
func NATSURLs() []string {
	var out []string
	for _, n := range NATSNodes() {
		out = append(out, n.URL)
	}
	return out
}

// NATSMonitorURLs are the monitoring URLs of the NATS cluster's nodes.
func NATSMonitorURLs() []string {
	var out []string
	for _, n := range NATSNodes() {
		out = append(out, n.MonitorURL)
	}
	return out
}

// NATSNodeByName returns the node of the NATS cluster whose server_name is name.
func NATSNodeByName(name string) (NATSNode, bool) {
	for _, n := range NATSNodes() {
		if n.Name == name {
			return n, true
		}
	}
	return NATSNode{}, false
}

// Mode is how a Kafka cluster keeps its metadata.
type Mode string

const (
	ModeZooKeeper Mode = "zookeeper"
	ModeKRaft     Mode = "kraft"
)

// Broker is one Kafka broker (or, in KRaft mode, one combined broker+controller node).
type Broker struct {
	ID   int32
	Addr string // PLAINTEXT listener, what clients bootstrap from
	// SASLAddr is the broker's SASL_SSL listener (SCRAM-SHA-512, the stack's CA), where an
	// ACL authorizer holds the worker's user to the documented permissions; empty when
	// the broker has none. See secure.go.
	SASLAddr       string
	ControllerAddr string // KRaft controller listener; empty in ZooKeeper mode
	Rack           string
	LogDirs        int // number of log directories (disks)
}

// Cluster is one Kafka cluster of the stack.
type Cluster struct {
	Name    string
	Mode    Mode
	Version string
	// Chroot is the cluster's path in the stack's ZooKeeper (ZooKeeper mode only).
	Chroot  string
	Brokers []Broker
}

// Bootstrap returns every broker address of the cluster.
func (c Cluster) Bootstrap() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = b.Addr
	}
	return out
}

// SASLBootstrap returns the addresses of the cluster's SASL_SSL listeners, or nil when
// its brokers have none.
func (c Cluster) SASLBootstrap() []string {
	var out []string
	for _, b := range c.Brokers {
		if b.SASLAddr != "" {
			out = append(out, b.SASLAddr)
		}
	}
	return out
}

// ZooKeeperConnect returns the cluster's ZooKeeper connect string with chroot, or "" for
// a KRaft cluster.
func (c Cluster) ZooKeeperConnect() string {
	if c.Mode != ModeZooKeeper {
		return ""
	}
	return ZooKeeperAddr + c.Chroot
}

// ServerName is the name of a broker's server in the stack ("local-1", "kraft-3").
func (c Cluster) ServerName(id int32) string { return fmt.Sprintf("%s-%d", c.Name, id) }

// Broker returns the broker with the given id.
func (c Cluster) Broker(id int32) (Broker, bool) {
	for _, b := range c.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// Clusters returns the Kafka clusters of the local stack, as the README's table describes.
func Clusters() []Cluster {
	return []Cluster{
		{
			Name: "local", Mode: ModeZooKeeper, Version: Kafka39Version, Chroot: KafkaChroot,
			Brokers: []Broker{
				{ID: 1, Addr: "127.0.0.1:19092", SASLAddr: "127.0.0.1:19093", Rack: "r1", LogDirs: 2},
				{ID: 2, Addr: "127.0.0.1:29092", SASLAddr: "127.0.0.1:29093", Rack: "r1", LogDirs: 1},
				{ID: 3, Addr: "127.0.0.1:39092", SASLAddr: "127.0.0.1:39093", Rack: "r2", LogDirs: 1},
				{ID: 4, Addr: "127.0.0.1:49092", SASLAddr: "127.0.0.1:49093", Rack: "r2", LogDirs: 1},
			},
		},
		{
			Name: "legacy", Mode: ModeZooKeeper, Version: Kafka23Version, Chroot: LegacyChroot,
			Brokers: []Broker{
				{ID: 1, Addr: "127.0.0.1:19392", Rack: "r1", LogDirs: 1},
				{ID: 2, Addr: "127.0.0.1:29392", Rack: "r1", LogDirs: 1},
				{ID: 3, Addr: "127.0.0.1:39392", Rack: "r2", LogDirs: 1},
			},
		},
		{
			Name: "kraft", Mode: ModeKRaft, Version: Kafka4Version,
			Brokers: []Broker{
				{ID: 1, Addr: "127.0.0.1:19192", ControllerAddr: "127.0.0.1:19193", LogDirs: 2},
				{ID: 2, Addr: "127.0.0.1:29192", ControllerAddr: "127.0.0.1:29193", LogDirs: 1},
				{ID: 3, Addr: "127.0.0.1:39192", ControllerAddr: "127.0.0.1:39193", LogDirs: 1},
			},
		},
	}
}

// ClusterByName returns the named cluster of the local stack.
func ClusterByName(name string) (Cluster, error) {
	var names []string
	for _, c := range Clusters() {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	return Cluster{}, fmt.Errorf("no cluster %q in the local stack (have %s)", name, strings.Join(names, ", "))
}
