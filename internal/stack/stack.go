package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configures a Stack. Only Root is required.
type Options struct {
	// Root is the repository root: it holds go.mod and deployments/local/maven.
	Root string
	// StateDir holds each server's configuration, data and log. Default Root/.state/stack.
	StateDir string
	// CacheDir holds the Maven-resolved jars and the built nats-server. Default Root/.cache.
	CacheDir string
	// ReadyTimeout bounds how long a server may take to answer after it starts. Default 3m.
	ReadyTimeout time.Duration
	// Logf receives progress messages. Default: discard.
	Logf func(format string, args ...any)
}

// Stack controls the local stack's servers.
type Stack struct {
	root, stateDir, cacheDir string
	readyTimeout             time.Duration
	logf                     func(string, ...any)
	java                     string
}

// New returns a Stack for the repository at opts.Root.
func New(opts Options) (*Stack, error) {
	if opts.Root == "" {
		return nil, errors.New("stack: Root is required")
	}
	if _, err := os.Stat(filepath.Join(opts.Root, "deployments", "local", "maven")); err != nil {
		return nil, fmt.Errorf("stack: %s is not the kafkamender repository: %w", opts.Root, err)
	}
	s := &Stack{root: opts.Root, stateDir: opts.StateDir, cacheDir: opts.CacheDir, readyTimeout: opts.ReadyTimeout, logf: opts.Logf}
	if s.stateDir == "" {
		s.stateDir = filepath.Join(opts.Root, ".state", "stack")
	}
	if s.cacheDir == "" {
		s.cacheDir = filepath.Join(opts.Root, ".cache")
	}
	// A state or cache folder reached through a symbolic link (worktrees of one clone
	// sharing one stack) is named by its real path: the stack finds its servers by the
	// configuration paths on their command lines, which must be spelled the same whichever
	// checkout started them.
	s.stateDir, s.cacheDir = realPath(s.stateDir), realPath(s.cacheDir)
	if s.readyTimeout == 0 {
		s.readyTimeout = 3 * time.Minute
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	s.java = "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		s.java = filepath.Join(home, "bin", "java")
	}
	return s, nil
}

// realPath is path with its symbolic links resolved, as far as they exist: the longest
// existing prefix is resolved, the rest kept as written.
func realPath(path string) string {
	rest := ""
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if p == filepath.Dir(p) {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// FindRoot walks up from dir to the folder holding kafkamender's go.mod.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		raw, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(raw), "module github.com/kafkamender/kafkamender\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no kafkamender go.mod above %s", dir)
		}
	}
}

// StateDir is the folder holding the servers' configuration, data and logs.
func (s *Stack) StateDir() string { return s.stateDir }

// lock takes an exclusive lock across processes, so that concurrent `go test` binaries
// and stackctl calls do not start or stop the same servers twice.
func (s *Stack) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(s.stateDir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.stateDir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process to finish with the stack: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Prepare resolves the Kafka jars with Maven and builds nats-server, unless the cache
// already holds them. Up calls it; it is exported for `stackctl prepare` in CI.
func (s *Stack) Prepare(ctx context.Context) error {
	for _, name := range []string{"kafka-3.9", "kafka-4", "kafka-2.3"} {
		if err := s.resolveJars(ctx, name); err != nil {
			return err
		}
	}
	if err := s.buildNATS(ctx); err != nil {
		return err
	}
	return s.buildAlertmanager(ctx)
}

func (s *Stack) libsDir(name string) string { return filepath.Join(s.cacheDir, name, "libs") }

// resolveJars copies the runtime dependencies of deployments/local/maven/<name>/pom.xml
// into the cache. A stamp holding the pom's hash marks a complete copy; a changed pom
// resolves again. Maven's own repository (~/.m2) makes a second resolution cheap.
func (s *Stack) resolveJars(ctx context.Context, name string) error {
	pom := filepath.Join(s.root, "deployments", "local", "maven", name, "pom.xml")
	raw, err := os.ReadFile(pom)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	want := hex.EncodeToString(sum[:])
	libs := s.libsDir(name)
	stamp := filepath.Join(filepath.Dir(libs), "resolved-from-pom.sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return nil
	}
	s.logf("resolving %s jars from Maven Central (once; cached in %s)", name, libs)
	tmp := libs + ".tmp"
	_ = os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom,
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("resolve %s with maven: %w\n%s", name, err, lastLines(string(out), 30))
	}
	_ = os.RemoveAll(libs)
	if err := os.Rename(tmp, libs); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(want+"\n"), 0o644)
}

func (s *Stack) natsBinary() string {
	return filepath.Join(s.cacheDir, "bin", "nats-server-"+s.natsVersion())
}

// natsVersion reads the pinned nats-server version from go.mod, where it is a tool
// dependency, so the binary's name changes when the pin does.
func (s *Stack) natsVersion() string {
	raw, err := os.ReadFile(filepath.Join(s.root, "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/nats-io/nats-server/v2" {
			return f[1]
		}
	}
	return "unknown"
}

func (s *Stack) buildNATS(ctx context.Context) error {
	bin := s.natsBinary()
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	s.logf("building nats-server %s from the Go module pinned in go.mod", s.natsVersion())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+".tmp", "github.com/nats-io/nats-server/v2")
	cmd.Dir = s.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build nats-server: %w\n%s", err, lastLines(string(out), 30))
	}
	return os.Rename(bin+".tmp", bin)
}

// AlertmanagerVersion is the pinned Alertmanager release the stack builds from its Go
// module.
const AlertmanagerVersion = "v0.35.0"

// AlertmanagerBinary is the Alertmanager the stack runs, which Prepare builds (tests start
// Alertmanagers of their own with it).
func (s *Stack) AlertmanagerBinary() string {
	return filepath.Join(s.cacheDir, "bin", "alertmanager-"+AlertmanagerVersion)
}

// AmtoolBinary is Alertmanager's amtool of the same release, which Prepare builds beside
// it (`amtool check-config` checks the configurations the docs give).
func (s *Stack) AmtoolBinary() string {
	return filepath.Join(s.cacheDir, "bin", "amtool-"+AlertmanagerVersion)
}

// buildAlertmanager builds Alertmanager and amtool from its Go module, unless the cache
// holds them.
// The module leaves out the web UI's compiled assets (ui/app/dist, built by npm in
// Alertmanager's release process), which its ui package embeds; a copy of the module
// gets a one-page placeholder there. The API, all the stack needs, is unchanged.
func (s *Stack) buildAlertmanager(ctx context.Context) error {
	bin, amtool := s.AlertmanagerBinary(), s.AmtoolBinary()
	_, errBin := os.Stat(bin)
	_, errTool := os.Stat(amtool)
	if errBin == nil && errTool == nil {
		return nil
	}
	s.logf("building alertmanager %s from its Go module (once; cached in %s)", AlertmanagerVersion, filepath.Dir(bin))
	mod := "github.com/prometheus/alertmanager@" + AlertmanagerVersion
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod).Output()
	if err != nil {
		return fmt.Errorf("download %s: %w", mod, err)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		return fmt.Errorf("download %s: %v %s", mod, err, dl.Error)
	}
	src, err := os.MkdirTemp("", "kafkamender-alertmanager-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := os.CopyFS(src, os.DirFS(dl.Dir)); err != nil {
		return fmt.Errorf("copy %s: %w", mod, err)
	}
	page := []byte("<!doctype html><title>Alertmanager</title><p>No web UI in this build (the kafkamender local stack); the API is at /api/v2.</p>\n")
	for _, d := range []string{"elm", "mantine"} {
		dir := filepath.Join(src, "ui", "app", "dist", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "index.html"), page, 0o644); err != nil {
			return err
		}
	}
	for out, pkg := range map[string]string{bin: "./cmd/alertmanager", amtool: "./cmd/amtool"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", out+".tmp", pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		if log, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", pkg, err, lastLines(string(log), 30))
		}
		if err := os.Rename(out+".tmp", out); err != nil {
			return err
		}
	}
	return nil
}

// Up starts every server that is not running and waits until all of them answer. It is
// safe to call while the stack runs, from several processes at once.
func (s *Stack) Up(ctx context.Context) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.Prepare(ctx); err != nil {
		return err
	}
	all := servers()
	// ZooKeeper first: the ZooKeeper-mode brokers exit when they cannot reach it.
	if err := s.ensureRunning(ctx, all[0]); err != nil {
		return err
	}
	if err := s.waitReady(ctx, all[0]); err != nil {
		return err
	}
	for _, srv := range all[1:] {
		if err := s.ensureRunning(ctx, srv); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(all))
	for i, srv := range all[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = s.waitReady(ctx, srv)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.secureSetup(ctx); err != nil {
		return err
	}
	s.logf("stack is up: %s", strings.Join(ServerNames(), ", "))
	return nil
}

// ensureRunning starts srv unless it already runs.
func (s *Stack) ensureRunning(ctx context.Context, srv server) error {
	pid, err := s.pid(srv)
	if err != nil {
		return err
	}
	if pid != 0 {
		s.logf("%s already running (pid %d)", srv.name, pid)
		return nil
	}
	return s.start(ctx, srv)
}

func (s *Stack) pid(srv server) (int, error) {
	return findProcess(s.configPath(srv), srv.progs()...)
}

func (s *Stack) start(ctx context.Context, srv server) error {
	// A port held by another process (a stack of another checkout, a CI run) would make
	// the server fail to bind, and the checks then talk to the other process's server.
	// A client's connection may hold one of the fixed ports for a moment as its own
	// ephemeral port (they are in Linux's ephemeral range): wait a little before calling
	// it taken. `stackctl reserve-ports` keeps the kernel from handing them out.
	for _, addr := range srv.listenAddrs() {
		deadline := time.Now().Add(15 * time.Second)
		for {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				ln.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s: cannot start: %s is taken by a process that is not this stack's (another checkout's stack, or a CI run?): %w", srv.name, addr, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if err := s.writeConfig(srv); err != nil {
		return fmt.Errorf("%s: write config: %w", srv.name, err)
	}
	if srv.kind == kindKafka && srv.cluster.Mode == ModeKRaft {
		if err := s.formatKRaft(ctx, srv); err != nil {
			return err
		}
	}
	env := os.Environ()
	if srv.kind == kindNATSSecure {
		var err error
		if env, err = s.natsSecureEnv(); err != nil {
			return fmt.Errorf("%s: %w", srv.name, err)
		}
	}
	pid, err := startDetached(s.argv(srv), s.serverDir(srv), s.LogPath(srv.name), env)
	if err != nil {
		return fmt.Errorf("%s: %w", srv.name, err)
	}
	s.logf("started %s (pid %d), log %s", srv.name, pid, s.LogPath(srv.name))
	return nil
}

// formatKRaft formats the node's log directory once, with the stack's fixed cluster id and
// the static voter set of server.properties.
func (s *Stack) formatKRaft(ctx context.Context, srv server) error {
	for _, d := range srv.logDirs(s.serverDir(srv)) {
		if _, err := os.Stat(filepath.Join(d, "meta.properties")); err == nil {
			return nil
		}
	}
	cmd := exec.CommandContext(ctx, s.java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Dlog4j2.configurationFile="+filepath.Join(s.serverDir(srv), "log4j2.properties"),
		"-cp", filepath.Join(s.libs(srv), "*"),
		"kafka.tools.StorageTool", "format", "-t", KRaftClusterID, "-c", s.configPath(srv), "--ignore-formatted")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: format KRaft storage: %w\n%s", srv.name, err, lastLines(string(out), 30))
	}
	return nil
}

// Down stops every server of the stack and removes the state folder.
func (s *Stack) Down(ctx context.Context) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	all := servers()
	// Brokers and NATS together, ZooKeeper last so the ZooKeeper-mode brokers can deregister.
	rest := s.stopAll(ctx, all[1:], 15*time.Second)
	if err := errors.Join(s.stopAll(ctx, all[:1], 15*time.Second), rest); err != nil {
		return err
	}
	if err := os.RemoveAll(s.stateDir); err != nil {
		return fmt.Errorf("remove %s: %w", s.stateDir, err)
	}
	s.logf("stack is down; removed %s", s.stateDir)
	return nil
}

// stopAll stops the servers at once, each as stop does, and waits until all have exited.
// A failure names its server.
func (s *Stack) stopAll(ctx context.Context, srvs []server, grace time.Duration) error {
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	for i, srv := range srvs {
		wg.Go(func() {
			if err := s.stop(ctx, srv, grace); err != nil {
				errs[i] = fmt.Errorf("stop %s: %w", srv.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stop sends SIGTERM, waits up to grace for the server to exit, then kills it.
func (s *Stack) stop(ctx context.Context, srv server, grace time.Duration) error {
	pid, err := s.pid(srv)
	if err != nil || pid == 0 {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if err := signalAndWait(gctx, pid, syscall.SIGTERM); err == nil {
		s.logf("stopped %s (pid %d)", srv.name, pid)
		return nil
	}
	s.logf("%s (pid %d) did not stop within %s; killing it", srv.name, pid, grace)
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return signalAndWait(kctx, pid, syscall.SIGKILL)
}

// Running lists the stack's servers that have a live process, by name, with their pids.
func (s *Stack) Running() (map[string]int, error) {
	out := map[string]int{}
	for _, srv := range servers() {
		pid, err := s.pid(srv)
		if err != nil {
			return nil, err
		}
		if pid != 0 {
			out[srv.name] = pid
		}
	}
	return out, nil
}

// ServerStatus is what Status reports of one server.
type ServerStatus struct {
	Name  string
	Addr  string
	PID   int   // 0 when not running
	Ready error // nil when the server answers
}

// Status reports every server: its process and whether it answers.
func (s *Stack) Status(ctx context.Context) ([]ServerStatus, error) {
	var out []ServerStatus
	for _, srv := range servers() {
		pid, err := s.pid(srv)
		if err != nil {
			return nil, err
		}
		st := ServerStatus{Name: srv.name, Addr: srv.addr(), PID: pid}
		if pid == 0 {
			st.Ready = errors.New("not running")
		} else {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st.Ready = s.check(cctx, srv)
			cancel()
		}
		out = append(out, st)
	}
	return out, nil
}

// Ports lists every port the stack's servers listen on, in start order.
func Ports() []string {
	var out []string
	for _, srv := range servers() {
		for _, a := range srv.listenAddrs() {
			if _, port, err := net.SplitHostPort(a); err == nil {
				out = append(out, port)
			}
		}
	}
	return out
}

// listenAddrs are the addresses the server listens on.
func (srv server) listenAddrs() []string {
	switch srv.kind {
	case kindZooKeeper:
		return []string{ZooKeeperAddr}
	case kindNATS:
		return []string{strings.TrimPrefix(srv.node.URL, "nats://"), strings.TrimPrefix(srv.node.MonitorURL, "http://"), srv.node.RouteAddr}
	case kindNATSSecure:
		return []string{strings.TrimPrefix(SecureNATSURL, "tls://"), strings.TrimPrefix(SecureNATSMonitorURL, "http://")}
	case kindAlertmanager:
		return []string{strings.TrimPrefix(AlertmanagerURL, "http://")}
	}
	out := []string{srv.broker.Addr}
	for _, a := range []string{srv.broker.SASLAddr, srv.broker.ControllerAddr} {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (srv server) addr() string {
	switch srv.kind {
	case kindZooKeeper:
		return ZooKeeperAddr
	case kindNATS:
		return strings.TrimPrefix(srv.node.URL, "nats://")
	case kindNATSSecure:
		return strings.TrimPrefix(SecureNATSURL, "tls://")
	case kindAlertmanager:
		return strings.TrimPrefix(AlertmanagerURL, "http://")
	default:
		return srv.broker.Addr
	}
}

// Stop stops one server gracefully (SIGTERM: a broker does a controlled shutdown) and
// waits until it has exited. Stopping a stopped server is not an error.
func (s *Stack) Stop(ctx context.Context, name string) error {
	srvs, err := lookupServers(name)
	if err != nil {
		return err
	}
	return s.stopAll(ctx, srvs, time.Minute)
}

// StopServers stops the named servers gracefully as Stop does, all at once, and waits until
// all have exited. A failure names its server.
func (s *Stack) StopServers(ctx context.Context, names ...string) error {
	var srvs []server
	for _, name := range names {
		some, err := lookupServers(name)
		if err != nil {
			return err
		}
		srvs = append(srvs, some...)
	}
	return s.stopAll(ctx, srvs, time.Minute)
}

// Kill kills one server with SIGKILL (a crash: no controlled shutdown) and waits until it
// has exited.
func (s *Stack) Kill(ctx context.Context, name string) error {
	srvs, err := lookupServers(name)
	if err != nil {
		return err
	}
	for _, srv := range srvs {
		pid, err := s.pid(srv)
		if err != nil {
			return err
		}
		if pid == 0 {
			continue
		}
		s.logf("killing %s (pid %d)", srv.name, pid)
		if err := signalAndWait(ctx, pid, syscall.SIGKILL); err != nil {
			return err
		}
	}
	return nil
}

// Pause freezes one server with SIGSTOP: it keeps its sockets but answers nothing, as a
// hung JVM would; a paused broker loses its ZooKeeper session once the timeout passes.
func (s *Stack) Pause(name string) error { return s.signal(name, syscall.SIGSTOP) }

// Resume thaws a server frozen by Pause.
func (s *Stack) Resume(name string) error { return s.signal(name, syscall.SIGCONT) }

func (s *Stack) signal(name string, sig syscall.Signal) error {
	srvs, err := lookupServers(name)
	if err != nil {
		return err
	}
	for _, srv := range srvs {
		pid, err := s.pid(srv)
		if err != nil {
			return err
		}
		if pid == 0 {
			return fmt.Errorf("%s is not running", srv.name)
		}
		if err := syscall.Kill(pid, sig); err != nil {
			return err
		}
	}
	return nil
}

// Start starts one stopped server and waits until it answers (a broker: until the
// cluster's metadata lists it again). Starting a running server only waits for it.
//
// Starting the NATS group starts every stopped node before it waits for any: a node of
// the cluster reports healthy only once JetStream has a quorum.
func (s *Stack) Start(ctx context.Context, name string) error {
	srvs, err := lookupServers(name)
	if err != nil {
		return err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, srv := range srvs {
		if err := s.ensureRunning(ctx, srv); err != nil {
			return err
		}
	}
	errs := make([]error, len(srvs))
	var wg sync.WaitGroup
	for i, srv := range srvs {
		wg.Go(func() { errs[i] = s.waitReady(ctx, srv) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Restart stops one server gracefully, starts it again and waits until it answers.
func (s *Stack) Restart(ctx context.Context, name string) error {
	if err := s.Stop(ctx, name); err != nil {
		return err
	}
	return s.Start(ctx, name)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
