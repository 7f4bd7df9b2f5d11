package check

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	amconfig "github.com/prometheus/alertmanager/config"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/stack"
)

const composeFile = "deployments/compose/compose.yaml"

// loadCompose loads a compose file with compose-go, the loader of Docker Compose itself:
// it validates against the Compose specification's schema (an unknown key fails), and
// checks that what services refer to (depends_on, volumes, networks) exists.
func loadCompose(t testing.TB, path string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithWorkingDirectory(filepath.Dir(path)),
		cli.WithName("kafkamender"),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func composeProject(t testing.TB) *types.Project {
	t.Helper()
	p, err := loadCompose(t, filepath.Join(repoRoot(t), filepath.FromSlash(composeFile)))
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return p
}

// composeWorker is a worker service of the compose file and the configuration it mounts.
type composeWorker struct {
	name    string
	service types.ServiceConfig
	cfgFile string
	cfg     *config.Config
}

// composeWorkers returns the services built from the repository's Dockerfile, each with
// the configuration file its --config names, parsed as the worker parses it.
func composeWorkers(t testing.TB, p *types.Project) []composeWorker {
	t.Helper()
	root := repoRoot(t)
	var out []composeWorker
	for _, name := range mapsKeys(p.Services) {
		s := p.Services[name]
		if s.Build == nil {
			continue
		}
		if s.Build.Context != root || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("service %s builds %s/%s: want the repository's Dockerfile", name, s.Build.Context, s.Build.Dockerfile)
			continue
		}
		cfgPath, ok := flagValue(s.Command, "config")
		if !ok {
			t.Errorf("service %s: command %q has no --config", name, []string(s.Command))
			continue
		}
		i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == cfgPath })
		if i < 0 {
			t.Errorf("service %s: nothing is mounted at %s, the --config file", name, cfgPath)
			continue
		}
		v := s.Volumes[i]
		if v.Type != types.VolumeTypeBind || !v.ReadOnly {
			t.Errorf("service %s: %s is a %s mount (read-only %v); want a read-only bind mount of a file beside compose.yaml", name, cfgPath, v.Type, v.ReadOnly)
		}
		data, err := os.ReadFile(v.Source)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		cfg, err := config.Parse(data)
		if err != nil {
			t.Errorf("service %s: %s: %v", name, v.Source, err)
			continue
		}
		out = append(out, composeWorker{name: name, service: s, cfgFile: v.Source, cfg: cfg})
	}
	if len(out) < 2 {
		t.Fatalf("%s: %d worker services (built from the Dockerfile); want two", composeFile, len(out))
	}
	return out
}

func TestComposeLoadsStrictly(t *testing.T) {
	p := composeProject(t)
	for _, want := range []string{"zookeeper", "kafka-1", "nats-1", "alertmanager"} {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	// The loader is strict: the same file with a misspelt key does not load.
	data := readRepoFile(t, composeFile)
	bad := strings.Replace(string(data), "  stop_grace_period: 60s", "  stop_grace_periods: 60s", 1)
	if bad == string(data) {
		t.Fatal("compose.yaml no longer has stop_grace_period; update this test")
	}
	dir := t.TempDir()
	for _, f := range []string{"worker.yaml", "alertmanager.yml"} {
		if err := os.WriteFile(filepath.Join(dir, f), readRepoFile(t, "deployments/compose/"+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCompose(t, path); err == nil || !strings.Contains(err.Error(), "stop_grace_periods") {
		t.Fatalf("a misspelt key loaded: %v", err)
	}
}

func TestComposeServices(t *testing.T) {
	p := composeProject(t)
	for _, name := range mapsKeys(p.Services) {
		s := p.Services[name]
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 {
			t.Errorf("service %s has no healthcheck: depends_on conditions and `up --wait` need one", name)
		}
		if s.Build == nil {
			// Third-party images: pinned, never latest.
			_, tag, ok := strings.Cut(lastPathElem(s.Image), ":")
			if !ok || tag == "latest" || !strings.ContainsAny(tag, "0123456789") {
				t.Errorf("service %s: image %q is not pinned to a version", name, s.Image)
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
				continue
			}
			if d.Condition == types.ServiceConditionHealthy && target.HealthCheck == nil {
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}
}

// The Compose stack runs the servers the local stack and the tests pin: nats-server of
// go.mod's version, the Alertmanager the stack builds.
func TestComposeServerVersions(t *testing.T) {
	p := composeProject(t)
	natsVersion := pinnedNATSServer(t)
	want := map[string]string{"alertmanager": "prom/alertmanager:" + stack.AlertmanagerVersion}
	nodes := composeNATSNodes(t, p)
	if len(nodes) == 0 {
		t.Error("no NATS service")
	}
	for _, n := range nodes {
		want[n.name] = "nats:" + natsVersion + "-alpine"
	}
	for name, image := range want {
		s, ok := p.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if s.Image != image {
			t.Errorf("service %s: image %s, want %s (the version the local stack and the tests run)", name, s.Image, image)
		}
	}
}

func TestComposeWorkers(t *testing.T) {
	p := composeProject(t)
	workers := composeWorkers(t, p)
	ids := map[string]string{}
	for _, w := range workers {
		s := w.service
		host, port, err := splitHostPort(w.cfg.HTTP.Listen)
		if err != nil {
			t.Fatal(err)
		}
		if !allInterfaces(host) {
			t.Errorf("%s: http.listen %s: only the container itself could reach it; want 0.0.0.0", w.cfgFile, w.cfg.HTTP.Listen)
		}
		if len(s.Ports) == 0 {
			t.Errorf("service %s publishes no port", w.name)
		}
		for _, pc := range s.Ports {
			if fmt.Sprint(pc.Target) != port {
				t.Errorf("service %s publishes container port %d; the worker listens on %s", w.name, pc.Target, port)
			}
		}
		// The healthcheck asks the worker's own port, with the binary the image ships.
		test := s.HealthCheck.Test
		if len(test) < 3 || test[0] != "CMD" || !slices.Contains(imageBinaries, filepath.Base(test[1])) || !strings.HasPrefix(test[1], "/usr/local/bin/") {
			t.Errorf("service %s healthcheck %q: want [CMD /usr/local/bin/healthcheck URL] (the image has no shell)", w.name, test)
		} else if u, err := url.Parse(test[len(test)-1]); err != nil || u.Port() != port || (u.Path != "/readyz" && u.Path != "/healthz") || !loopback(u.Hostname()) {
			t.Errorf("service %s healthcheck URL %q: want http://127.0.0.1:%s/readyz", w.name, test[len(test)-1], port)
		}
		// Distinct worker ids: explicit, or <hostname>-<pid> with distinct hostnames.
		id := w.cfg.Worker.ID
		if raw := rawWorkerID(t, w.cfgFile); raw == "" {
			if s.Hostname == "" {
				t.Errorf("service %s sets no hostname: its worker id would be the container id", w.name)
			}
			id = s.Hostname + "-<pid>"
		}
		if other, dup := ids[id]; dup {
			t.Errorf("services %s and %s have the same worker id %s", other, w.name, id)
		}
		ids[id] = w.name

		// Every server the configuration names is a service the worker waits for.
		for _, addr := range configAddresses(w.cfg) {
			svc := serviceByHost(p, addr.host)
			if svc == "" {
				t.Errorf("%s: %s %s: no service of that name or hostname", w.cfgFile, addr.field, addr.host)
				continue
			}
			if d, ok := s.DependsOn[svc]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("service %s does not wait for %s to be healthy (%s names it)", w.name, svc, addr.field)
			}
		}
	}
}

// composeNATSNode is a NATS server of the compose file: its service, and the options
// nats-server makes of its command line.
type composeNATSNode struct {
	name    string
	service types.ServiceConfig
	opts    *server.Options
}

// clientPort is the port the node takes clients on.
func (n composeNATSNode) clientPort() int {
	if n.opts.Port <= 0 {
		return server.DEFAULT_PORT
	}
	return n.opts.Port
}

// composeNATSNodes returns the services that run the nats image, each with its command
// line parsed by nats-server's own flag parser (server.ConfigureOptions: an unknown flag,
// or routes without a cluster listener, fail) and its options checked as nats-server
// checks them before it starts (server.NewServer, which listens on nothing: a JetStream
// cluster needs a server name and a cluster name).
func composeNATSNodes(t testing.TB, p *types.Project) []composeNATSNode {
	t.Helper()
	var out []composeNATSNode
	for _, name := range mapsKeys(p.Services) {
		s := p.Services[name]
		if repo, _, _ := strings.Cut(lastPathElem(s.Image), ":"); repo != "nats" {
			continue
		}
		cmd := []string(s.Command)
		if len(cmd) == 0 || cmd[0] != "nats-server" {
			t.Errorf("service %s: command %q: want nats-server and its flags", name, cmd)
			continue
		}
		fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		opts, err := server.ConfigureOptions(fs, cmd[1:], func() {}, func() {}, func() {})
		if err != nil || opts == nil {
			t.Errorf("service %s: nats-server %q: %v", name, cmd[1:], err)
			continue
		}
		if _, err := server.NewServer(opts); err != nil {
			t.Errorf("service %s: nats-server %q would not start: %v", name, cmd[1:], err)
			continue
		}
		out = append(out, composeNATSNode{name: name, service: s, opts: opts})
	}
	return out
}

// TestComposeNATSCluster: the NATS services are three JetStream nodes of one cluster:
// one cluster name, distinct server names, JetStream on a volume of each node's own,
// routes from each node to the other two on their cluster port, and a healthcheck that
// passes only once the node is current with a JetStream meta leader. The host port the
// README gives the emitter reaches one of them.
func TestComposeNATSCluster(t *testing.T) {
	p := composeProject(t)
	nodes := composeNATSNodes(t, p)
	names := func() (out []string) {
		for _, n := range nodes {
			out = append(out, n.name)
		}
		return out
	}()
	if len(nodes) != 3 {
		t.Fatalf("NATS services %v; want a cluster of three nodes", names)
	}
	clusters := map[string][]string{} // cluster name -> services
	servers := map[string]string{}    // server name -> service
	volumes := map[string]string{}    // volume -> service
	for _, n := range nodes {
		o := n.opts
		if !o.JetStream {
			t.Errorf("service %s: JetStream is off (--jetstream)", n.name)
		}
		clusters[o.Cluster.Name] = append(clusters[o.Cluster.Name], n.name)
		if other, dup := servers[o.ServerName]; dup {
			t.Errorf("services %s and %s have the same server name %q: JetStream needs one per node", other, n.name, o.ServerName)
		}
		servers[o.ServerName] = n.name
		if o.Cluster.Port <= 0 {
			t.Errorf("service %s: no cluster listener (--cluster)", n.name)
		}

		// JetStream stores on a named volume of this node's own.
		i := slices.IndexFunc(n.service.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == o.StoreDir })
		switch {
		case o.StoreDir == "" || i < 0 || n.service.Volumes[i].Type != types.VolumeTypeVolume:
			t.Errorf("service %s: store_dir %q is not on a named volume: its streams would go with the container", n.name, o.StoreDir)
		case volumes[n.service.Volumes[i].Source] != "":
			t.Errorf("services %s and %s store JetStream on the same volume %s", volumes[n.service.Volumes[i].Source], n.name, n.service.Volumes[i].Source)
		default:
			volumes[n.service.Volumes[i].Source] = n.name
		}

		// Routes to every other node, on its cluster port.
		routed := map[string]bool{}
		for _, r := range o.Routes {
			svc := serviceByHost(p, r.Hostname())
			j := slices.IndexFunc(nodes, func(m composeNATSNode) bool { return m.name == svc })
			if j < 0 {
				t.Errorf("service %s: route %s is not a NATS service (%v)", n.name, r.Redacted(), names)
				continue
			}
			if want := strconv.Itoa(nodes[j].opts.Cluster.Port); r.Port() != want {
				t.Errorf("service %s: route %s; %s takes routes on %s", n.name, r.Redacted(), svc, want)
			}
			routed[svc] = true
		}
		for _, m := range nodes {
			if m.name != n.name && !routed[m.name] {
				t.Errorf("service %s has no route to %s (--routes): the cluster would not form", n.name, m.name)
			}
		}

		// Healthy: the node is current with a meta leader, so the workers that wait for
		// it can create their streams; js-enabled-only and js-server-only pass before.
		hc := n.service.HealthCheck
		if hc == nil || len(hc.Test) < 2 {
			continue // TestComposeServices says so
		}
		u, err := url.Parse(hc.Test[len(hc.Test)-1])
		if err != nil || u.Path != "/healthz" || u.Port() != strconv.Itoa(o.HTTPPort) || !loopback(u.Hostname()) {
			t.Errorf("service %s healthcheck %q: want http://127.0.0.1:%d/healthz (--http_port)", n.name, hc.Test, o.HTTPPort)
			continue
		}
		for _, q := range []string{"js-enabled-only", "js-server-only"} {
			if u.Query().Has(q) {
				t.Errorf("service %s healthcheck %s: %s passes before the node has a JetStream meta leader", n.name, u, q)
			}
		}
	}
	if len(clusters) != 1 {
		t.Errorf("the NATS services form %d clusters %v; want one (--cluster_name)", len(clusters), clusters)
	}
	if _, ok := clusters[""]; ok {
		t.Errorf("services %v name no cluster (--cluster_name)", clusters[""])
	}

	// The emitter on the host reaches a node through the port the README gives it.
	const hostURL = "nats://127.0.0.1:14222"
	published := slices.ContainsFunc(nodes, func(n composeNATSNode) bool {
		return slices.ContainsFunc(n.service.Ports, func(pc types.ServicePortConfig) bool {
			return pc.Published == "14222" && loopback(pc.HostIP) && int(pc.Target) == n.clientPort()
		})
	})
	if !published {
		t.Errorf("no NATS node publishes its client port on 127.0.0.1:14222, which the README gives the emitter")
	}
	if !strings.Contains(string(readRepoFile(t, "deployments/compose/README.md")), hostURL) {
		t.Errorf("deployments/compose/README.md no longer says %s; update this test", hostURL)
	}
}

// TestComposeWorkersNATS: each worker's nats.url lists every node of the cluster, on its
// client port, so that it connects to any of them and reconnects to another; and the
// replicas it asks for fit on the nodes.
func TestComposeWorkersNATS(t *testing.T) {
	p := composeProject(t)
	nodes := composeNATSNodes(t, p)
	if len(nodes) == 0 {
		t.Fatal("no NATS service")
	}
	for _, w := range composeWorkers(t, p) {
		listed := map[string]bool{}
		for raw := range strings.SplitSeq(w.cfg.NATS.URL.Reveal(), ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil {
				t.Errorf("%s: nats.url: %v", w.cfgFile, err)
				continue
			}
			svc := serviceByHost(p, u.Hostname())
			j := slices.IndexFunc(nodes, func(n composeNATSNode) bool { return n.name == svc })
			if j < 0 {
				t.Errorf("%s: nats.url %s is not a NATS service", w.cfgFile, u.Redacted())
				continue
			}
			port := u.Port()
			if port == "" {
				port = strconv.Itoa(server.DEFAULT_PORT)
			}
			if port != strconv.Itoa(nodes[j].clientPort()) {
				t.Errorf("%s: nats.url %s; %s takes clients on %d", w.cfgFile, u.Redacted(), svc, nodes[j].clientPort())
			}
			listed[svc] = true
		}
		for _, n := range nodes {
			if !listed[n.name] {
				t.Errorf("%s: nats.url does not list %s: the worker could not start while the nodes it lists are down", w.cfgFile, n.name)
			}
		}
		if r := w.cfg.NATS.Replicas; r > len(nodes) {
			t.Errorf("%s: nats.replicas %d: JetStream cannot place them on %d nodes", w.cfgFile, r, len(nodes))
		}
	}
}

// TestComposeClusterAddresses: the clusters of the worker configuration are the brokers
// and the ZooKeeper chroot the Kafka services advertise and use.
func TestComposeClusterAddresses(t *testing.T) {
	p := composeProject(t)
	advertised := map[string]string{} // host:port -> service
	var chroots []string
	zkPort := env(p.Services["zookeeper"], "ZOOKEEPER_CLIENT_PORT")
	for name, s := range p.Services {
		if l := env(s, "KAFKA_ADVERTISED_LISTENERS"); l != "" {
			for listener := range strings.SplitSeq(l, ",") {
				_, addr, _ := strings.Cut(listener, "://")
				advertised[addr] = name
			}
			chroots = append(chroots, env(s, "KAFKA_ZOOKEEPER_CONNECT"))
		}
	}
	if len(advertised) < 3 {
		t.Fatalf("%d Kafka brokers; want three", len(advertised))
	}
	for _, w := range composeWorkers(t, p) {
		if z := w.cfg.Lock.ZooKeeper; z != "" {
			if _, port, _ := splitHostPort(strings.Split(z, "/")[0]); port != zkPort {
				t.Errorf("%s: lock.zookeeper %s: ZooKeeper listens on %s", w.cfgFile, z, zkPort)
			}
		}
		for _, name := range w.cfg.ClusterNames() {
			cl := w.cfg.Clusters[name]
			seen := map[string]bool{}
			for _, b := range cl.BootstrapServers {
				svc, ok := advertised[b]
				if !ok {
					t.Errorf("%s: clusters.%s: %s is no broker's advertised listener (%v)", w.cfgFile, name, b, mapsKeys(advertised))
				}
				seen[svc] = true
			}
			if len(seen) < len(advertised) {
				t.Errorf("%s: clusters.%s lists %d of the %d brokers", w.cfgFile, name, len(seen), len(advertised))
			}
			for _, c := range chroots {
				if cl.ZooKeeper != "" && cl.ZooKeeper != c {
					t.Errorf("%s: clusters.%s.zookeeper %s; the brokers use %s", w.cfgFile, name, cl.ZooKeeper, c)
				}
			}
		}
	}
}

// TestComposeAlertmanager: Alertmanager's configuration loads as Alertmanager loads it,
// and its webhooks are the workers' receivers, on their port.
func TestComposeAlertmanager(t *testing.T) {
	p := composeProject(t)
	s, ok := p.Services["alertmanager"]
	if !ok {
		t.Fatal("no alertmanager service")
	}
	cfgPath, ok := flagValue(s.Command, "config.file")
	if !ok {
		t.Fatalf("alertmanager command %q has no --config.file", []string(s.Command))
	}
	i := slices.IndexFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == cfgPath })
	if i < 0 {
		t.Fatalf("alertmanager: nothing is mounted at %s", cfgPath)
	}
	cfg, err := amconfig.LoadFile(s.Volumes[i].Source)
	if err != nil {
		t.Fatalf("%s: %v", s.Volumes[i].Source, err)
	}
	workers := composeWorkers(t, p)
	targeted := map[string]bool{}
	for _, r := range cfg.Receivers {
		for _, wh := range r.WebhookConfigs {
			u, err := url.Parse(string(wh.URL))
			if err != nil {
				t.Errorf("receiver %s: webhook URL: %v", r.Name, err)
				continue
			}
			svc := serviceByHost(p, u.Hostname())
			j := slices.IndexFunc(workers, func(w composeWorker) bool { return w.name == svc })
			if j < 0 {
				t.Errorf("receiver %s: webhook %s is not a worker service", r.Name, u)
				continue
			}
			targeted[svc] = true
			if _, port, _ := splitHostPort(workers[j].cfg.HTTP.Listen); u.Port() != port || u.Path != alertmanager.Path {
				t.Errorf("receiver %s: webhook %s; the worker takes alerts at :%s%s", r.Name, u, port, alertmanager.Path)
			}
		}
	}
	for _, w := range workers {
		if !targeted[w.name] {
			t.Errorf("no webhook sends alerts to %s", w.name)
		}
	}
	if cfg.Route == nil || cfg.Route.Receiver == "" {
		t.Error("alertmanager.yml has no default route")
	}
}

// address is a server a worker configuration names.
type address struct {
	field string
	host  string
}

// configAddresses returns the hosts of every server a configuration connects to.
func configAddresses(cfg *config.Config) []address {
	var out []address
	for u := range strings.SplitSeq(cfg.NATS.URL.Reveal(), ",") {
		if pu, err := url.Parse(strings.TrimSpace(u)); err == nil {
			out = append(out, address{"nats.url", pu.Hostname()})
		}
	}
	zk := func(field, connect string) {
		hosts, _, _ := strings.Cut(connect, "/")
		for hp := range strings.SplitSeq(hosts, ",") {
			if h, _, err := net.SplitHostPort(hp); err == nil {
				out = append(out, address{field, h})
			}
		}
	}
	if cfg.NeedsLockZooKeeper() || cfg.Lock.ZooKeeper != "" {
		zk("lock.zookeeper", cfg.Lock.ZooKeeper)
	}
	for _, name := range cfg.ClusterNames() {
		cl := cfg.Clusters[name]
		for _, b := range cl.BootstrapServers {
			if h, _, err := net.SplitHostPort(b); err == nil {
				out = append(out, address{"clusters." + name + ".bootstrap_servers", h})
			}
		}
		if cl.ZooKeeper != "" {
			zk("clusters."+name+".zookeeper", cl.ZooKeeper)
		}
	}
	return out
}

// serviceByHost returns the service reachable as host on the project's network: by its
// name or its hostname.
func serviceByHost(p *types.Project, host string) string {
	if _, ok := p.Services[host]; ok {
		return host
	}
	for name, s := range p.Services {
		if s.Hostname == host {
			return name
		}
	}
	return ""
}

func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}

// rawWorkerID returns worker.id as written in a configuration file (config.Parse fills in
// the default, <hostname>-<pid> of the process that parses it).
func rawWorkerID(t testing.TB, file string) string {
	t.Helper()
	var doc struct {
		Worker struct {
			ID string `yaml:"id"`
		} `yaml:"worker"`
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yamlUnmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc.Worker.ID
}

func lastPathElem(image string) string {
	return image[strings.LastIndex(image, "/")+1:]
}
