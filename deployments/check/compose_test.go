package check

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
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
	for _, want := range []string{"zookeeper", "kafka-1", "nats", "alertmanager"} {
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
	var natsVersion string
	for _, line := range strings.Split(string(readRepoFile(t, "go.mod")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/nats-io/nats-server/v2" {
			natsVersion = strings.TrimPrefix(f[1], "v")
		}
	}
	if natsVersion == "" {
		t.Fatal("go.mod pins no nats-server")
	}
	want := map[string]string{"nats": "nats:" + natsVersion + "-alpine", "alertmanager": "prom/alertmanager:" + stack.AlertmanagerVersion}
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
