package main

// Scenario fleet: scale out. A fleet of worker processes (./cmd/worker, built once with
// go build -o, each its own OS process with its own YAML configuration, so that its CPU
// and memory are its own) serves N Kafka clusters, N = 100 then 300 (-fleet-clusters).
// Each Kafka cluster is an in-process placement fake (internal/scale: kfake on loopback)
// of 6 brokers in 3 racks and 300 partitions in 6 topics, which serves metadata and
// carries out reassignments and elections. Locks are in NATS key-value (lock.backend
// nats), no ZooKeeper; NATS is the stack's three-node JetStream cluster (-fleet-nats).
//
// 10,000 events (-fleet-events) spread over the clusters are published on NATS as an
// alerting system publishes them, round robin over the clusters. Each cluster's first is
// a broker-overloaded alert for broker 1, which the fake skews leadership to: it sheds it
// (succeeded). The others are alerts for the same broker again, within its cool-down
// (noop, naming the first), and dry runs (planned): a preferred leader of one partition,
// a raise of topic "big" to 4 replicas, a shed of broker 2. Every event must get exactly
// one result, with the status it must have; the scenario waits for all of them on
// kafkamender.results.* and fails on one missing, one duplicated (a replay too, unless
// -fleet-replays-ok: the stored result announced again, when an event is delivered again
// after its result was stored) or one unexpected, and on an event whose result the
// results stream does not hold exactly once.
//
// Measured: events per second (first publish to last result), the publish → result
// latency (p50, p99), each worker's CPU seconds (/proc/<pid>/stat utime+stime) while the
// events ran and its peak RSS (/proc/<pid>/status VmHWM), the consumers on
// KAFKAMENDER_EVENTS (JetStream API) and the NATS servers' memory (each node's /varz mem,
// summed, its peak while the fleet ran); per Kafka cluster too, and the growth from the
// smallest N to each larger one.
//
// Isolation: the fleet's consumer name (nats.consumer) is its own, and its subjects are
// kafkamender.events.<cluster>.> of its own cluster names (fleet-001, …), so it takes no
// event of another scenario or of the stack's workers. It cleans up after itself: its
// consumers, and its clusters' keys in the workers' key-value buckets (journal, locks,
// lock locations, cool-downs: the next run reuses the names on fresh fakes). Its results
// stay. The workers are stopped with SIGTERM; any worker error (an error line in its log,
// an exit before it was stopped, an exit status other than 0) fails the scenario.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/scale"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// The stack's NATS cluster, the fleet's by default.
var (
	defaultFleetNATS    = stack.NATSClusterURL
	defaultFleetMonitor = strings.Join(stack.NATSMonitorURLs(), ",")
)

const (
	// fleetConsumer is the fleet's nats.consumer: its consumers are
	// kafkamender-bench-fleet_<cluster> and kafkamender-bench-fleet_<cluster>~control
	// (pipeline.ClusterConsumer, pipeline.ControlConsumer), no other fleet's.
	fleetConsumer = "kafkamender-bench-fleet"
	// fleetShedBroker is the broker each cluster's first event sheds: the fakes skew
	// leadership to it. Its later alerts fall in its cool-down.
	fleetShedBroker = 1
	// fleetDryBroker is the broker of the dry-run broker-overloaded events.
	fleetDryBroker = 2
	// fleetRaise is the replication factor of the dry-run raises of topic scale.BigTopic.
	fleetRaise = 4
	// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on Linux
	// whatever the kernel's own tick rate.
	clockTicks = 100
)

// fleetShape is each Kafka cluster of the fleet: 6 brokers in 3 racks, 300 partitions of
// 3 replicas (topic "big" of 50 and 5 topics of 50), leadership skewed to broker 1. Each
// cluster gets its own seed.
var fleetShape = scale.Shape{Partitions: 300, PerTopic: 50, Big: 50, Racks: 3, PerRack: 2, RF: 3, Skewed: fleetShedBroker}

// fleetClusterNames are the names of the fleet's n Kafka clusters: fleet-001, fleet-002, …
func fleetClusterNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("fleet-%03d", i+1)
	}
	return out
}

// fleetTarget is one Kafka cluster of the fleet, as the events are planned for it.
type fleetTarget struct {
	name string
	// preferred are (topic, partition, broker) triples for dry-run preferred-leader
	// events whose plan is not empty whatever the shed changed: partitions broker 1 neither
	// leads nor heads (the shed leaves them), each with an in-sync replica other than its
	// head and other than broker 1.
	preferred []preferredLeader
}

type preferredLeader struct {
	topic     string
	partition int32
	broker    int32
}

// preferredCandidates returns the preferred-leader targets of a cluster read before any
// event (see fleetTarget.preferred), in topic and partition order.
func preferredCandidates(s *kafka.Snapshot) []preferredLeader {
	var out []preferredLeader
	for _, topic := range slices.Sorted(maps.Keys(s.Topics)) {
		for _, p := range s.Topics[topic] {
			if len(p.Replicas) < 2 || p.Leader == fleetShedBroker || p.Replicas[0] == fleetShedBroker || p.Leader != p.Replicas[0] {
				continue
			}
			for _, b := range p.Replicas[1:] {
				if b != fleetShedBroker && p.InSync(b) {
					out = append(out, preferredLeader{topic: topic, partition: p.Partition, broker: b})
					break
				}
			}
		}
	}
	return out
}

// fleetEvent is one event of the scenario, and the result it must get.
type fleetEvent struct {
	id, cluster, typ string
	data             map[string]any
	want             events.Status
	// acting is, for an alert within the cool-down, the id of the event that shed the
	// broker: its result's previous_event.
	acting string
}

// planFleetEvents returns total events over the clusters, in publish order: round robin
// over the clusters, each cluster's i-th event in turn (a cluster gets total/len or one
// more). A cluster's first event is the alert that sheds broker 1; then, in turn, the same
// alert again (noop), a dry-run preferred leader, a dry-run raise, a dry-run shed of
// broker 2 (each planned). prefix starts every event id.
func planFleetEvents(prefix string, total int, clusters []fleetTarget) ([]fleetEvent, error) {
	n := len(clusters)
	if n == 0 || total < n {
		return nil, fmt.Errorf("%d events for %d clusters: want at least one per cluster", total, n)
	}
	for _, c := range clusters {
		if len(c.preferred) == 0 {
			return nil, fmt.Errorf("cluster %s: no partition to move a preferred leader in", c.name)
		}
	}
	count := func(c int) int {
		if c < total%n {
			return total/n + 1
		}
		return total / n
	}
	out := make([]fleetEvent, 0, total)
	reason := "bench fleet: cpu 97%"
	for i := 0; len(out) < total; i++ {
		for c, cl := range clusters {
			if i >= count(c) {
				continue
			}
			ev := fleetEvent{id: fmt.Sprintf("%s-%s-%05d", prefix, cl.name, i), cluster: cl.name}
			switch {
			case i == 0:
				ev.typ, ev.want = events.TypeBrokerOverloaded, events.StatusSucceeded
				ev.data = map[string]any{"broker": fleetShedBroker, "reason": reason}
			case i%4 == 1:
				ev.typ, ev.want, ev.acting = events.TypeBrokerOverloaded, events.StatusNoop, fmt.Sprintf("%s-%s-%05d", prefix, cl.name, 0)
				ev.data = map[string]any{"broker": fleetShedBroker, "reason": reason}
			case i%4 == 2:
				p := cl.preferred[(i/4)%len(cl.preferred)]
				ev.typ, ev.want = events.TypeReplicaChangeRequested, events.StatusPlanned
				ev.data = map[string]any{"topic": p.topic, "partitions": []int32{p.partition}, "preferred_leader": p.broker, "dry_run": true}
			case i%4 == 3:
				ev.typ, ev.want = events.TypeReplicaChangeRequested, events.StatusPlanned
				ev.data = map[string]any{"topic": scale.BigTopic, "replication_factor": fleetRaise, "dry_run": true}
			default:
				ev.typ, ev.want = events.TypeBrokerOverloaded, events.StatusPlanned
				ev.data = map[string]any{"broker": fleetDryBroker, "dry_run": true, "reason": reason}
			}
			out = append(out, ev)
		}
	}
	return out, nil
}

// checkFleetResult says what is wrong with the result of ev, or nil.
func checkFleetResult(ev *fleetEvent, res *events.Result) error {
	if res.Status != ev.want {
		return fmt.Errorf("%s (%s on %s): %s %q, want %s", ev.id, ev.typ, ev.cluster, res.Status, res.Error, ev.want)
	}
	switch ev.want {
	case events.StatusSucceeded:
		if len(res.Changes) == 0 || len(res.Skipped) > 0 {
			return fmt.Errorf("%s: succeeded with %d changes, %d skipped; want the shed of broker %d, every partition", ev.id, len(res.Changes), len(res.Skipped), fleetShedBroker)
		}
	case events.StatusNoop:
		if res.PreviousEvent != ev.acting {
			return fmt.Errorf("%s: noop naming %q, want the cool-down of %s", ev.id, res.PreviousEvent, ev.acting)
		}
	case events.StatusPlanned:
		if len(res.Changes) == 0 {
			return fmt.Errorf("%s (%s on %s): planned nothing", ev.id, ev.typ, ev.cluster)
		}
	}
	return nil
}

// fleetWorkerConfig is a worker's configuration file (docs/configuration.md): what the
// fleet sets, every other key at its default.
type fleetWorkerConfig struct {
	Worker   fleetWorkerID                         `yaml:"worker"`
	Log      fleetLog                              `yaml:"log"`
	HTTP     fleetHTTP                             `yaml:"http"`
	NATS     fleetNATSConfig                       `yaml:"nats"`
	Lock     fleetLock                             `yaml:"lock"`
	Clusters map[string]fleetClusterWorkerSettings `yaml:"clusters"`
}

type fleetWorkerID struct {
	ID string `yaml:"id"`
}

type fleetLog struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

type fleetHTTP struct {
	Listen string `yaml:"listen"`
}

type fleetNATSConfig struct {
	URL      string   `yaml:"url"`
	Consumer string   `yaml:"consumer"`
	Subjects []string `yaml:"subjects"`
}

type fleetLock struct {
	Backend string `yaml:"backend"`
}

type fleetClusterWorkerSettings struct {
	BootstrapServers []string `yaml:"bootstrap_servers"`
	Strategy         string   `yaml:"strategy"`
}

// fleetConfigYAML is the configuration of worker id: the fleet's NATS (every node), its
// consumer name, one subject filter per cluster, locks in NATS, the clusters at addrs
// (by name), JSON logs at info level, HTTP on a port the system picks.
func fleetConfigYAML(id string, natsURLs []string, addrs map[string][]string) ([]byte, error) {
	c := fleetWorkerConfig{
		Worker:   fleetWorkerID{ID: id},
		Log:      fleetLog{Level: "info", Format: "json"},
		HTTP:     fleetHTTP{Listen: "127.0.0.1:0"},
		NATS:     fleetNATSConfig{URL: strings.Join(natsURLs, ","), Consumer: fleetConsumer},
		Lock:     fleetLock{Backend: "nats"},
		Clusters: map[string]fleetClusterWorkerSettings{},
	}
	for _, name := range slices.Sorted(maps.Keys(addrs)) {
		c.NATS.Subjects = append(c.NATS.Subjects, events.EventsSubjectPrefix+"."+name+".>")
		c.Clusters[name] = fleetClusterWorkerSettings{BootstrapServers: addrs[name], Strategy: "api"}
	}
	return yaml.Marshal(&c)
}

// fleetRun is what one run of the fleet over n clusters measured.
type fleetRun struct {
	elapsed           time.Duration // first publish to last result
	p50, p99          time.Duration // publish → result heard
	cpu, cpuTotal     []float64     // each worker's CPU seconds while the events ran, and since it started
	rss               []float64     // each worker's peak RSS, bytes
	consumers, all    int           // the fleet's consumers, and all consumers on KAFKAMENDER_EVENTS
	natsMem, natsBase float64       // the NATS nodes' memory summed: its peak while the fleet ran, and before it started
	replays           int           // results published again as replays (-fleet-replays-ok)
}

func (r *fleetRun) rate(events int) float64 { return float64(events) / r.elapsed.Seconds() }

// percentile is the q-th quantile (0 < q ≤ 1) of ds by the nearest rank; 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*q+0.999999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// procCPU returns the CPU time (user + system) of process pid, in seconds, from
// /proc/<pid>/stat.
func procCPU(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(raw))
}

// parseProcStatCPU reads utime + stime (fields 14 and 15, in clock ticks) of a
// /proc/<pid>/stat line, in seconds. The command name (field 2) is in parentheses and may
// hold spaces: the fields are counted from its closing one.
func parseProcStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", clip(stat))
	}
	f := strings.Fields(stat[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %q: %d fields", clip(stat), len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// procPeakRSS returns the peak resident set size of process pid (VmHWM), in bytes.
func procPeakRSS(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(raw))
}

// parseVmHWM reads the VmHWM line of a /proc/<pid>/status ("VmHWM:   12345 kB"), in bytes.
func parseVmHWM(status string) (float64, error) {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "VmHWM" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: VmHWM %q", strings.TrimSpace(v))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmHWM: %w", err)
		}
		return float64(kb) * 1024, nil
	}
	return 0, errors.New("/proc status: no VmHWM")
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// workerLogLine is what the bench reads of a worker's JSON log line.
type workerLogLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	HTTP  string `json:"http"`
}

// workerLogProblem says whether a line a worker wrote on its standard error is an error:
// a log entry at level error or above, or a line that is no JSON log entry (a panic's
// stack, a message before the logger existed).
func workerLogProblem(line string) (workerLogLine, bool) {
	var l workerLogLine
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Level == "" {
		return l, strings.TrimSpace(line) != ""
	}
	switch l.Level {
	case "error", "dpanic", "panic", "fatal":
		return l, true
	}
	return l, false
}

// fleetWorker is one worker process of the fleet.
type fleetWorker struct {
	id     string
	cmd    *exec.Cmd
	log    string
	addr   chan string   // its HTTP address, from its start-up line
	exited chan struct{} // closed once it has exited; then err is its exit
	err    error

	mu       sync.Mutex
	problems []string // error lines of its log
	warnings int
}

// startFleetWorker starts bin with the configuration file cfg, its standard output and
// error in logPath. anyExit is called when it exits.
func startFleetWorker(root, bin, id, cfg, logPath string, anyExit func()) (*fleetWorker, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = root
	// The file alone configures it: KAFKAMENDER_* variables of the bench's environment
	// would override its keys (another nats.url, say).
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KAFKAMENDER_") })
	cmd.Stdout = f
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start worker %s: %w", id, err)
	}
	w := &fleetWorker{id: id, cmd: cmd, log: logPath, addr: make(chan string, 1), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, f))
		sc.Buffer(make([]byte, 64<<10), 16<<20) // the start-up line lists every cluster
		for sc.Scan() {
			l, bad := workerLogProblem(sc.Text())
			w.mu.Lock()
			switch {
			case bad:
				w.problems = append(w.problems, clip(sc.Text()))
			case l.Level == "warn":
				w.warnings++
			}
			w.mu.Unlock()
			if l.Msg == "kafkamender worker started" && l.HTTP != "" {
				select {
				case w.addr <- l.HTTP:
				default:
				}
			}
		}
		if err := sc.Err(); err != nil {
			w.mu.Lock()
			w.problems = append(w.problems, fmt.Sprintf("its log could not be read to the end: %v", err))
			w.mu.Unlock()
		}
		_, _ = io.Copy(f, stderr) // after a line too long for the scanner: the rest, unread
		w.err = cmd.Wait()
		f.Close()
		close(w.exited)
		anyExit()
	}()
	return w, nil
}

// errorLines returns the error lines of the worker's log so far, and how many warnings.
func (w *fleetWorker) errorLines() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.problems), w.warnings
}

// stopFleet sends SIGTERM to every worker at once, then waits for each to exit (a minute
// at most; then it is killed). A worker that exited before, did not stop in time, or
// stopped with an exit status other than 0, is an error.
func stopFleet(ws []*fleetWorker) error {
	var errs []error
	signalled := make([]bool, len(ws))
	for i, w := range ws {
		select {
		case <-w.exited:
			errs = append(errs, fmt.Errorf("worker %s exited before it was stopped: %v (log %s)", w.id, w.err, w.log))
			continue
		default:
		}
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			errs = append(errs, fmt.Errorf("worker %s: SIGTERM: %w", w.id, err))
			continue
		}
		signalled[i] = true
	}
	deadline := time.After(time.Minute)
	for i, w := range ws {
		if !signalled[i] {
			continue
		}
		select {
		case <-w.exited:
		case <-deadline:
			_ = w.cmd.Process.Kill()
			<-w.exited
			errs = append(errs, fmt.Errorf("worker %s did not stop within a minute of SIGTERM: killed (log %s)", w.id, w.log))
			continue
		}
		if w.err != nil {
			errs = append(errs, fmt.Errorf("worker %s stopped with %v (log %s)", w.id, w.err, w.log))
		}
	}
	return errors.Join(errs...)
}

// fleet is what the runs of the scenario share.
type fleet struct {
	b       *bench
	bin     string // the worker binary
	nc      *nats.Conn
	js      jetstream.JetStream
	monitor []string
}

// fleet runs the scenario -runs times for each size of -fleet-clusters and adds its rows.
func (b *bench) fleet(ctx context.Context) error {
	dir := filepath.Join(b.dir, "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "worker")
	b.logf("fleet: go build -o %s ./cmd/worker", bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/worker")
	build.Dir = b.root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("fleet: build the worker: %w\n%s", err, out)
	}
	nc, err := nats.Connect(strings.Join(b.opts.fleetNATS, ","))
	if err != nil {
		return fmt.Errorf("fleet: nats %s (is the stack up? go tool task stack:up): %w", strings.Join(b.opts.fleetNATS, ","), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	f := &fleet{b: b, bin: bin, nc: nc, js: js, monitor: b.opts.fleetMonitor}
	runs := map[int][]*fleetRun{}
	for run := range b.opts.runs {
		for _, n := range order(run, b.opts.fleetSizes) {
			r, err := f.run(ctx, n, run)
			if err != nil {
				return fmt.Errorf("fleet of %d clusters, run %d: %w", n, run+1, err)
			}
			runs[n] = append(runs[n], r)
		}
	}
	b.fleetRows(runs)
	return nil
}

// run is one run of the fleet over n clusters.
func (f *fleet) run(ctx context.Context, n, run int) (_ *fleetRun, err error) {
	b := f.b
	names := fleetClusterNames(n)
	dir := filepath.Join(b.dir, "fleet", fmt.Sprintf("%d-clusters-run-%d", n, run+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}

	// The Kafka clusters, and the partitions of each that a preferred leader can move in.
	b.logf("fleet: %d clusters, run %d: starting %d fakes of %d brokers and %d partitions", n, run+1, n, fleetShape.Racks*fleetShape.PerRack, fleetShape.Partitions)
	fakes := make([]*scale.Cluster, 0, n)
	defer func() {
		for _, fc := range fakes {
			fc.Close()
		}
	}()
	targets := make([]fleetTarget, n)
	addrs := map[string][]string{}
	for i, name := range names {
		shape := fleetShape
		shape.Seed = uint64(i + 1)
		fc, err := scale.Start(shape)
		if err != nil {
			return nil, fmt.Errorf("fake %s: %w", name, err)
		}
		fakes = append(fakes, fc)
		addrs[name] = fc.Addrs()
		s, err := readFake(ctx, fc)
		if err != nil {
			return nil, fmt.Errorf("fake %s: %w", name, err)
		}
		targets[i] = fleetTarget{name: name, preferred: preferredCandidates(s)}
	}
	prefix := fmt.Sprintf("bench-%s-fleet%d-run%d", b.stamp, n, run+1)
	evs, err := planFleetEvents(prefix, b.opts.fleetEvents, targets)
	if err != nil {
		return nil, err
	}
	bodies, err := fleetBodies(evs, names)
	if err != nil {
		return nil, err
	}

	// What an earlier run that did not finish may have left; then, once the workers are
	// stopped (deferred calls run last first), what this one leaves.
	if err := f.clean(ctx, names); err != nil {
		return nil, fmt.Errorf("clean up before the run: %w", err)
	}
	defer func() {
		if cerr := f.clean(context.WithoutCancel(ctx), names); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
	}()

	mem, err := f.sampleMemory(ctx)
	if err != nil {
		return nil, err
	}
	defer mem.stop()

	// The workers, each its own process and configuration.
	died := make(chan struct{})
	var once sync.Once
	anyExit := func() { once.Do(func() { close(died) }) }
	var ws []*fleetWorker
	defer func() {
		if serr := stopFleet(ws); serr != nil {
			err = errors.Join(err, serr)
		}
		for _, w := range ws {
			lines, warns := w.errorLines()
			if len(lines) > 0 {
				err = errors.Join(err, fmt.Errorf("worker %s logged %d errors (log %s), the first: %s", w.id, len(lines), w.log, strings.Join(lines[:min(5, len(lines))], "\n  ")))
			}
			if warns > 0 {
				b.logf("fleet: worker %s logged %d warnings (log %s)", w.id, warns, w.log)
			}
		}
	}()
	for i := range b.opts.fleetWorkers {
		id := fmt.Sprintf("bench-fleet-%s-%d", b.stamp, i+1)
		raw, err := fleetConfigYAML(id, b.opts.fleetNATS, addrs)
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, fmt.Sprintf("worker-%d.yaml", i+1))
		if err := os.WriteFile(cfg, raw, 0o644); err != nil {
			return nil, err
		}
		w, err := startFleetWorker(b.root, f.bin, id, cfg, filepath.Join(dir, fmt.Sprintf("worker-%d.log", i+1)), anyExit)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	b.logf("fleet: %d clusters, run %d: %d workers started (logs in %s); waiting until each is ready", n, run+1, len(ws), dir)
	started := time.Now()
	if err := f.ready(ctx, ws, died, 2*len(names)); err != nil {
		return nil, err
	}
	r := &fleetRun{}
	if r.consumers, r.all, err = f.consumers(ctx); err != nil {
		return nil, err
	}
	b.logf("fleet: %d clusters, run %d: ready in %s, %d consumers of the fleet (%d on %s); publishing %d events",
		n, run+1, time.Since(started).Round(time.Millisecond), r.consumers, r.all, events.EventsStream, len(evs))

	// The events, and their results.
	col, err := f.collect(evs)
	if err != nil {
		return nil, err
	}
	defer col.close()
	cpu0 := make([]float64, len(ws))
	for i, w := range ws {
		if cpu0[i], err = procCPU(w.cmd.Process.Pid); err != nil {
			return nil, fmt.Errorf("worker %s: %w", w.id, err)
		}
	}
	first, err := f.publish(ctx, evs, bodies, col)
	if err != nil {
		return nil, err
	}
	if err := col.wait(ctx, died, 15*time.Minute, func(heard int) {
		b.logf("fleet: %d clusters, run %d: %d of %d results", n, run+1, heard, len(evs))
	}); err != nil {
		return nil, err
	}
	for i, w := range ws {
		cpu, err := procCPU(w.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", w.id, err)
		}
		rss, err := procPeakRSS(w.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", w.id, err)
		}
		r.cpu, r.cpuTotal, r.rss = append(r.cpu, cpu-cpu0[i]), append(r.cpuTotal, cpu), append(r.rss, rss)
	}
	if r.natsMem, r.natsBase, err = mem.stop(); err != nil {
		return nil, err
	}

	r.elapsed = col.last.Sub(first)
	lat := col.latencies()
	r.p50, r.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	b.logf("fleet: %d clusters, run %d: measured (each result is checked next): %d events in %s (%.0f/s), publish → result p50 %s, p99 %s; workers' CPU %s s while the events ran (%s s since start), peak RSS %s MB; NATS memory %.0f MB at its peak (%.0f MB before the workers started)",
		n, run+1, len(evs), short(r.elapsed), r.rate(len(evs)), short(r.p50), short(r.p99), joinF(r.cpu, "%.1f", 1), joinF(r.cpuTotal, "%.1f", 1),
		joinF(r.rss, "%.0f", 1<<20), r.natsMem/(1<<20), r.natsBase/(1<<20))

	// Every event answered once, as it must be; nothing left in the fleet's consumers;
	// each Kafka cluster shed.
	if err := f.drained(ctx, died); err != nil {
		return nil, err
	}
	if r.replays, err = col.check(b.opts.fleetReplaysOK); err != nil {
		return nil, err
	}
	if err := f.stored(ctx, col); err != nil {
		return nil, err
	}
	for i, fc := range fakes {
		if err := shedOn(ctx, fc); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", names[i], err)
		}
	}
	b.logf("fleet: %d clusters, run %d: every result as it must be (%d replayed)", n, run+1, r.replays)
	return r, nil
}

func joinF(vs []float64, verb string, unit float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf(verb, v/unit)
	}
	return strings.Join(out, ", ")
}

// readFake reads a fake's placement as the worker does.
func readFake(ctx context.Context, fc *scale.Cluster) (*kafka.Snapshot, error) {
	cl, err := fc.Client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return kafka.ReadSnapshot(ctx, cl)
}

// shedOn checks that the cluster shows the shed: broker 1 leads no partition.
func shedOn(ctx context.Context, fc *scale.Cluster) error {
	s, err := readFake(ctx, fc)
	if err != nil {
		return err
	}
	for _, ps := range s.Topics {
		for _, p := range ps {
			if p.Leader == fleetShedBroker {
				return fmt.Errorf("after the shed, %s is still led by broker %d", p.TopicPartition, fleetShedBroker)
			}
		}
	}
	return nil
}

// fleetBodies encodes each event as an alerting system publishes it (a CloudEvents JSON
// envelope), and checks it with the workers' own decoder: an event the workers would
// reject is the bench's mistake.
func fleetBodies(evs []fleetEvent, clusters []string) ([][]byte, error) {
	out := make([][]byte, len(evs))
	for i, ev := range evs {
		body, err := eventBody(ev.typ, ev.id, "bench/fleet", ev.data)
		if err != nil {
			return nil, err
		}
		h := nats.Header{}
		h.Set("Content-Type", events.ContentTypeCloudEventsJSON)
		if _, err := events.Decode(events.Subject(ev.cluster, ev.typ), h, body, events.DecodeOptions{Clusters: clusters}); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.id, err)
		}
		out[i] = body
	}
	return out, nil
}

// ready waits until every worker answers /readyz with 200 (every cluster probed, the
// streams and consumers set up) and the fleet has its consumers.
func (f *fleet) ready(ctx context.Context, ws []*fleetWorker, died <-chan struct{}, consumers int) error {
	deadline := time.After(10 * time.Minute)
	addrs := make([]string, len(ws))
	for i, w := range ws {
		select {
		case addrs[i] = <-w.addr:
		case <-died:
			return f.exitError(ws)
		case <-deadline:
			return fmt.Errorf("worker %s did not log its HTTP address within 10 minutes (log %s)", w.id, w.log)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	check := func(ctx context.Context) error {
		for i, w := range ws {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addrs[i]+"/readyz", nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("worker %s: %w", w.id, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("worker %s: /readyz %s", w.id, resp.Status)
			}
		}
		n, _, err := f.consumers(ctx)
		if err == nil && n != consumers {
			err = fmt.Errorf("%d consumers of the fleet, want %d", n, consumers)
		}
		return err
	}
	for i := 0; ; i++ {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-died:
			return f.exitError(ws)
		case <-deadline:
			return fmt.Errorf("the workers not ready within 10 minutes: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// exitError says which worker exited, and how.
func (f *fleet) exitError(ws []*fleetWorker) error {
	var errs []error
	for _, w := range ws {
		select {
		case <-w.exited:
			lines, _ := w.errorLines()
			errs = append(errs, fmt.Errorf("worker %s exited: %v (log %s): %s", w.id, w.err, w.log, strings.Join(lines[:min(5, len(lines))], "\n  ")))
		default:
		}
	}
	return errors.Join(errs...)
}

// isFleetConsumer reports whether a consumer of KAFKAMENDER_EVENTS is the fleet's.
func isFleetConsumer(name string) bool { return strings.HasPrefix(name, fleetConsumer+"_") }

// consumers counts the fleet's consumers and all consumers of the events stream.
func (f *fleet) consumers(ctx context.Context) (ours, all int, err error) {
	stream, err := f.js.Stream(ctx, events.EventsStream)
	if err != nil {
		return 0, 0, fmt.Errorf("stream %s: %w", events.EventsStream, err)
	}
	names := stream.ConsumerNames(ctx)
	for name := range names.Name() {
		all++
		if isFleetConsumer(name) {
			ours++
		}
	}
	if err := names.Err(); err != nil {
		return 0, 0, fmt.Errorf("consumers of %s: %w", events.EventsStream, err)
	}
	return ours, all, nil
}

// drained waits until the fleet's consumers have no event waiting and none out: every
// event acknowledged, so that no worker publishes another result for one.
func (f *fleet) drained(ctx context.Context, died <-chan struct{}) error {
	stream, err := f.js.Stream(ctx, events.EventsStream)
	if err != nil {
		return err
	}
	deadline := time.After(time.Minute)
	for i := 0; ; i++ {
		waiting, out := uint64(0), 0
		infos := stream.ListConsumers(ctx)
		for ci := range infos.Info() {
			if isFleetConsumer(ci.Name) {
				waiting, out = waiting+ci.NumPending, out+ci.NumAckPending
			}
		}
		err := infos.Err()
		if err == nil && waiting == 0 && out == 0 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%d events waiting, %d out", waiting, out)
		}
		select {
		case <-died:
			return errors.New("a worker exited before its events were acknowledged")
		case <-deadline:
			return fmt.Errorf("the fleet's consumers not drained a minute after the last result: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(kafka.PollDelay(i)):
		}
	}
}

// clean deletes what the fleet leaves in NATS, but its results: its consumers, the events
// of its clusters still in the stream (a run that failed), and its clusters' keys in the
// workers' key-value buckets. Run with no worker of the fleet running.
func (f *fleet) clean(ctx context.Context, clusters []string) error {
	var errs []error
	stream, err := f.js.Stream(ctx, events.EventsStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return fmt.Errorf("stream %s: %w", events.EventsStream, err)
	default:
		var ours []string
		names := stream.ConsumerNames(ctx)
		for name := range names.Name() {
			if isFleetConsumer(name) {
				ours = append(ours, name)
			}
		}
		if err := names.Err(); err != nil {
			return fmt.Errorf("consumers of %s: %w", events.EventsStream, err)
		}
		for _, name := range ours {
			if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				errs = append(errs, fmt.Errorf("delete consumer %s: %w", name, err))
			}
		}
	}
	mine := map[string]bool{}
	for _, c := range clusters {
		mine[c] = true
	}
	errs = append(errs, f.purge(ctx, events.EventsStream, events.EventsSubjectPrefix+".", mine))
	for _, bucket := range []string{events.JournalBucket, events.LocksBucket, events.LockBackendsBucket, events.OverloadedBucket,
		events.GuardrailsBucket, events.PausesBucket, events.CancelsBucket, events.PlansBucket} {
		// A bucket's keys are <cluster> or <cluster>.<…>, on subjects $KV.<bucket>.<key>; a
		// purge of the subject leaves no delete marker.
		errs = append(errs, f.purge(ctx, "KV_"+bucket, "$KV."+bucket+".", mine))
	}
	return errors.Join(errs...)
}

// purge removes from stream name every message on a subject prefix + <cluster>[.…] of a
// cluster of mine; a stream that does not exist holds none.
func (f *fleet) purge(ctx context.Context, name, prefix string, mine map[string]bool) error {
	stream, err := f.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	var errs []error
	for subject := range info.State.Subjects {
		cluster, _, _ := strings.Cut(strings.TrimPrefix(subject, prefix), ".")
		if !mine[cluster] {
			continue
		}
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: purge %s: %w", name, subject, err))
		}
	}
	return errors.Join(errs...)
}

// memSampler reads each NATS node's /varz mem every 250 ms and keeps the peak of their sum.
type memSampler struct {
	done     chan struct{}
	finished chan struct{}
	base     float64 // the first sum
	peak     float64
	err      error
	once     sync.Once
}

// sampleMemory takes a first sample (the baseline) and starts sampling.
func (f *fleet) sampleMemory(ctx context.Context) (*memSampler, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	sum := func() (float64, error) {
		total := 0.0
		for _, u := range f.monitor {
			v, err := natsMem(ctx, client, u)
			if err != nil {
				return 0, err
			}
			total += v
		}
		return total, nil
	}
	base, err := sum()
	if err != nil {
		return nil, err
	}
	m := &memSampler{done: make(chan struct{}), finished: make(chan struct{}), base: base, peak: base}
	go func() {
		defer close(m.finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
			v, err := sum()
			if err != nil {
				m.err = err
				return
			}
			m.peak = max(m.peak, v)
		}
	}()
	return m, nil
}

// stop ends the sampling and returns the peak and the baseline.
func (m *memSampler) stop() (peak, base float64, err error) {
	m.once.Do(func() { close(m.done) })
	<-m.finished
	return m.peak, m.base, m.err
}

// natsMem reads a NATS server's memory (its RSS, bytes) from its monitoring endpoint.
func natsMem(ctx context.Context, client *http.Client, monitor string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(monitor, "/")+"/varz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("nats /varz: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("nats %s/varz: %s", monitor, resp.Status)
	}
	var v struct {
		Mem *int64 `json:"mem"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("nats %s/varz: %w", monitor, err)
	}
	if v.Mem == nil {
		return 0, fmt.Errorf("nats %s/varz: no mem", monitor)
	}
	return float64(*v.Mem), nil
}

// collector hears the results of the fleet's events.
type collector struct {
	sub  *nats.Subscription
	want map[string]*fleetEvent

	mu        sync.Mutex
	published map[string]time.Time
	heard     map[string]time.Time      // when the first message of each event's result was heard
	results   map[string]*events.Result // that message
	originals map[string]int            // the messages heard that are no replay
	replays   map[string][]*events.Result
	bad       []string // results that do not decode
	last      time.Time
	all       chan struct{}
}

// collect subscribes to the results (kafkamender.results.*: every head) before anything
// is published.
func (f *fleet) collect(evs []fleetEvent) (*collector, error) {
	c := &collector{want: map[string]*fleetEvent{}, published: map[string]time.Time{}, heard: map[string]time.Time{},
		results: map[string]*events.Result{}, originals: map[string]int{}, replays: map[string][]*events.Result{}, all: make(chan struct{})}
	for i := range evs {
		c.want[evs[i].id] = &evs[i]
	}
	sub, err := f.nc.Subscribe(events.ResultsSubjectPrefix+".*", func(m *nats.Msg) {
		now := time.Now()
		id := strings.TrimPrefix(m.Subject, events.ResultsSubjectPrefix+".")
		if c.want[id] == nil {
			return // another scenario's, or another user's
		}
		var res events.Result
		err := json.Unmarshal(m.Data, &res)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.bad = append(c.bad, fmt.Sprintf("%s: %v", id, err))
			return
		}
		if res.Replayed {
			c.replays[id] = append(c.replays[id], &res)
		} else {
			c.originals[id]++
		}
		if c.results[id] == nil {
			c.results[id], c.heard[id], c.last = &res, now, now
			if len(c.results) == len(c.want) {
				close(c.all)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	c.sub = sub
	// Results come faster than a slow handler: none may be dropped.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	if err := f.nc.Flush(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *collector) close() { _ = c.sub.Unsubscribe() }

// wait waits for every result, logging progress every 10 seconds.
func (c *collector) wait(ctx context.Context, died <-chan struct{}, timeout time.Duration, progress func(int)) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.all:
			return nil
		case <-tick.C:
			c.mu.Lock()
			n := len(c.results)
			c.mu.Unlock()
			progress(n)
		case <-died:
			return errors.New("a worker exited while the events ran")
		case <-deadline:
			return fmt.Errorf("results missing after %s: %w", timeout, c.missing())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// missing names the events without a result.
func (c *collector) missing() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.want {
		if c.results[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return fmt.Errorf("%d of %d events have no result (first: %s)", len(ids), len(c.want), strings.Join(ids[:min(5, len(ids))], ", "))
}

// check is verdict once the subscription has handled every message the server sent it.
func (c *collector) check(replaysOK bool) (int, error) {
	closed := c.sub.StatusChanged(nats.SubscriptionClosed)
	if err := c.sub.Drain(); err != nil {
		return 0, fmt.Errorf("drain the results subscription: %w", err)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		return 0, errors.New("the results subscription not drained within a minute")
	}
	return c.verdict(replaysOK)
}

// latencies are each event's publish → result times, to the first message heard of its
// result.
func (c *collector) latencies() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(c.heard))
	for id, at := range c.heard {
		out = append(out, at.Sub(c.published[id]))
	}
	return out
}

// verdict reads what was heard: each event must have exactly one result, with the status
// it must have. A result published twice is a duplicate, a replay too (the stored result
// announced again, marked replayed, when the event was delivered again after its result
// was stored), unless replaysOK: then replays are counted, and must say what the result
// said. It returns the number of replays.
func (c *collector) verdict(replaysOK bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if len(c.bad) > 0 {
		errs = append(errs, fmt.Errorf("%d results do not decode: %s", len(c.bad), strings.Join(c.bad[:min(5, len(c.bad))], "; ")))
	}
	var dups, replayed, wrong []string
	replays := 0
	byStatus := map[string]int{}
	for id, ev := range c.want {
		res := c.results[id]
		if res == nil {
			continue // missing: wait said so already
		}
		if c.originals[id] != 1 {
			dups = append(dups, fmt.Sprintf("%s (%d results)", id, c.originals[id]))
		}
		for _, r := range c.replays[id] {
			replays++
			if !replaysOK || r.Status != res.Status {
				replayed = append(replayed, fmt.Sprintf("%s (%s, replayed as %s)", id, res.Status, r.Status))
			}
		}
		byStatus[fmt.Sprintf("%s %s", ev.typ, res.Status)]++
		if err := checkFleetResult(ev, res); err != nil {
			wrong = append(wrong, err.Error())
		}
	}
	for _, list := range [][]string{dups, replayed, wrong} {
		slices.Sort(list)
	}
	if len(dups) > 0 {
		errs = append(errs, fmt.Errorf("%d events have other than one result heard: %s", len(dups), strings.Join(dups[:min(5, len(dups))], ", ")))
	}
	if len(replayed) > 0 {
		errs = append(errs, fmt.Errorf("%d events had their result published again as a replay (delivered again after their result was stored; "+
			"-fleet-replays-ok counts them instead, when they say what the result said): %s", len(replayed), strings.Join(replayed[:min(5, len(replayed))], ", ")))
	}
	if len(wrong) > 0 {
		errs = append(errs, fmt.Errorf("%d results are not as they must be (results by type and status: %v); the first: %s", len(wrong), byStatus, strings.Join(wrong[:min(5, len(wrong))], "; ")))
	}
	return replays, errors.Join(errs...)
}

// stored checks the audit trail: the results stream holds exactly one result of each
// event (its first and last message on the event's result subject are one), with the
// status heard.
func (f *fleet) stored(ctx context.Context, c *collector) error {
	stream, err := f.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	ids := slices.Sorted(maps.Keys(c.want))
	var (
		mu   sync.Mutex
		bad  []string
		wg   sync.WaitGroup
		next = make(chan string)
	)
	one := func(id string) string {
		subject := events.ResultSubject(id)
		last, err := stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return id + ": none stored"
		}
		if err != nil {
			return fmt.Sprintf("%s: %v", id, err)
		}
		first, err := stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return fmt.Sprintf("%s: %v", id, err)
		}
		if first.Sequence != last.Sequence {
			return fmt.Sprintf("%s: stored more than once (sequences %d and %d)", id, first.Sequence, last.Sequence)
		}
		var res events.Result
		if err := json.Unmarshal(last.Data, &res); err != nil {
			return fmt.Sprintf("%s: %v", id, err)
		}
		c.mu.Lock()
		heard := c.results[id]
		c.mu.Unlock()
		if heard == nil || res.Status != heard.Status || res.Replayed {
			return fmt.Sprintf("%s: stored %s (replayed %v), heard %v", id, res.Status, res.Replayed, heard)
		}
		return ""
	}
	for range 16 {
		wg.Go(func() {
			for id := range next {
				if why := one(id); why != "" {
					mu.Lock()
					bad = append(bad, why)
					mu.Unlock()
				}
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%d events have not exactly one stored result as heard: %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
	return nil
}

// publish publishes the events in order, asynchronously (as fast as one connection can),
// each with its id as the JetStream message id; it returns when the first was published,
// once the stream has acknowledged them all.
func (f *fleet) publish(ctx context.Context, evs []fleetEvent, bodies [][]byte, c *collector) (time.Time, error) {
	futures := make([]jetstream.PubAckFuture, len(evs))
	first := time.Now()
	for i, ev := range evs {
		msg := &nats.Msg{Subject: events.Subject(ev.cluster, ev.typ), Data: bodies[i], Header: nats.Header{}}
		msg.Header.Set("Content-Type", events.ContentTypeCloudEventsJSON)
		c.mu.Lock()
		c.published[ev.id] = time.Now()
		c.mu.Unlock()
		// With as many unacknowledged as the client allows, the next waits for room.
		fut, err := f.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.id), jetstream.WithExpectStream(events.EventsStream),
			jetstream.WithStallWait(time.Minute))
		if err != nil {
			return first, fmt.Errorf("publish %s: %w", ev.id, err)
		}
		futures[i] = fut
	}
	select {
	case <-f.js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return first, fmt.Errorf("%d publishes not acknowledged within 2 minutes", f.js.PublishAsyncPending())
	case <-ctx.Done():
		return first, ctx.Err()
	}
	for i, fut := range futures {
		select {
		case err := <-fut.Err():
			return first, fmt.Errorf("publish %s: %w", evs[i].id, err)
		case ack := <-fut.Ok():
			if ack.Duplicate {
				return first, fmt.Errorf("publish %s: the stream took it for a duplicate", evs[i].id)
			}
		}
	}
	return first, nil
}

// fleetRows adds the scenario's rows: for each size, the rate and latency, each worker's
// CPU and memory, NATS's consumers and memory, per cluster too; then the growth of each
// from the smallest size to each larger one.
func (b *bench) fleetRows(runs map[int][]*fleetRun) {
	sizes := slices.Sorted(maps.Keys(runs))
	total := b.opts.fleetEvents
	type figures struct {
		rate, cpu, cpuTotal, rss, consumers, all, mem, memAdded, replays fsummary
		p50, p99                                                         summary
	}
	fig := map[int]figures{}
	for _, n := range sizes {
		var rate, cpu, cpuTotal, rss, cons, all, mem, added, replays []float64
		var p50, p99 []time.Duration
		for _, r := range runs[n] {
			rate = append(rate, r.rate(total))
			p50, p99 = append(p50, r.p50), append(p99, r.p99)
			cpu, cpuTotal, rss = append(cpu, r.cpu...), append(cpuTotal, r.cpuTotal...), append(rss, r.rss...)
			cons, all = append(cons, float64(r.consumers)), append(all, float64(r.all))
			mem, added = append(mem, r.natsMem), append(added, r.natsMem-r.natsBase)
			replays = append(replays, float64(r.replays))
		}
		g := figures{rate: summarizeF(rate), cpu: summarizeF(cpu), cpuTotal: summarizeF(cpuTotal), rss: summarizeF(rss),
			consumers: summarizeF(cons), all: summarizeF(all), mem: summarizeF(mem), memAdded: summarizeF(added),
			replays: summarizeF(replays), p50: summarize(p50), p99: summarize(p99)}
		fig[n] = g
		// in is s in unit, per is the same per Kafka cluster.
		in := func(s fsummary, unit float64) fsummary {
			return fsummary{n: s.n, median: s.median / unit, min: s.min / unit, max: s.max / unit}
		}
		per := func(s fsummary, unit float64) fsummary { return in(s, unit*float64(n)) }
		where := fmt.Sprintf("%d fakes (%d brokers, %d partitions each)", n, fleetShape.Racks*fleetShape.PerRack, fleetShape.Partitions)
		b.rows = append(b.rows,
			[]string{fmt.Sprintf("fleet: %s events over %d clusters, %d worker processes", thousands(total), n, b.opts.fleetWorkers), where,
				fmt.Sprintf("%s events/s; publish → result p50 %s, p99 %s; results replayed: %s", g.rate.format("%.0f"), g.p50, g.p99, g.replays.format("%.0f")),
				"", "", "", "", ""},
			[]string{fmt.Sprintf("fleet, %d clusters: each worker", n), where,
				fmt.Sprintf("CPU %s s while the events ran, %s s per cluster (%s s since its start); peak RSS %s MB, %s MB per cluster",
					g.cpu.format("%.1f"), per(g.cpu, 1).format("%.3f"), g.cpuTotal.format("%.1f"),
					in(g.rss, 1<<20).format("%.0f"), per(g.rss, 1<<20).format("%.2f")),
				"", "", "", "", ""},
			[]string{fmt.Sprintf("fleet, %d clusters: NATS (%d nodes)", n, len(b.opts.fleetMonitor)), where,
				fmt.Sprintf("the fleet's consumers on %s: %s, %s per cluster (all on the stream: %s); memory (the nodes' sum, peak): %s MB, %s MB per cluster; added while the fleet ran: %s MB, %s MB per cluster",
					events.EventsStream, g.consumers.format("%.0f"), per(g.consumers, 1).format("%.2f"), g.all.format("%.0f"),
					in(g.mem, 1<<20).format("%.0f"), per(g.mem, 1<<20).format("%.2f"),
					in(g.memAdded, 1<<20).format("%.0f"), per(g.memAdded, 1<<20).format("%.2f")),
				"", "", "", "", ""})
	}
	for _, n := range sizes[1:] {
		lo, hi := fig[sizes[0]], fig[n]
		grow := func(a, b float64) string {
			if a <= 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f×", b/a)
		}
		b.rows = append(b.rows, []string{fmt.Sprintf("fleet: growth %d ÷ %d clusters (medians)", n, sizes[0]), "",
			fmt.Sprintf("events/s %s; p50 %s, p99 %s; per worker: CPU %s, peak RSS %s; consumers %s; NATS memory %s (added while the fleet ran: %s)",
				grow(lo.rate.median, hi.rate.median), grow(float64(lo.p50.median), float64(hi.p50.median)), grow(float64(lo.p99.median), float64(hi.p99.median)),
				grow(lo.cpu.median, hi.cpu.median), grow(lo.rss.median, hi.rss.median), grow(lo.consumers.median, hi.consumers.median),
				grow(lo.mem.median, hi.mem.median), grow(lo.memAdded.median, hi.memAdded.median)),
			"", "", "", "", ""})
	}
	b.notes = append(b.notes, fmt.Sprintf("fleet: %d worker processes (./cmd/worker, built once, each with its own configuration) serve every cluster, "+
		"locks in NATS key-value; each cluster is an in-process placement fake (internal/scale) in the bench process, which shares the machine with them. "+
		"Per cluster: one broker-overloaded alert that sheds broker %d, then in turn the same alert again (noop: its cool-down), and dry runs of a preferred leader, "+
		"a raise of %q to %d replicas and a shed of broker %d (planned); every result checked. Rate and latency: first publish to last result; "+
		"results replayed: results published again (replayed: true) for an event delivered again after its result was stored, each event's result stored once (with -fleet-replays-ok=false a replay fails the run); "+
		"CPU: /proc/<pid>/stat utime+stime, from the first publish to the last result; peak RSS: VmHWM; each worker of each run counts once in the median and range; "+
		"NATS memory: the sum of each node's /varz mem, at its peak from before the workers started to the last result, and that peak less the sum before they started.",
		b.opts.fleetWorkers, fleetShedBroker, scale.BigTopic, fleetRaise, fleetDryBroker))
}

// thousands writes n with commas: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
