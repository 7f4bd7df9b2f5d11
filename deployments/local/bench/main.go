// Command bench compares kafkamender with Kafka's own tools on the local stack, side by
// side in one run, and prints one table (go tool task bench):
//
//   - demote: move leadership off a broker leading 100 and 1,000 partitions, on the
//     ZooKeeper-mode cluster "local" (Kafka 3.9) and the KRaft cluster "kraft" (Kafka 4.1):
//     kafkamender (a broker-overloaded event on NATS → its verified result) vs Kafka's CLIs
//     (kafka-reassign-partitions --execute, --verify until done, kafka-leader-election
//     --election-type PREFERRED, from the jars the stack runs) vs the floor (kadm: one
//     AlterPartitionReassignments, wait until none is listed, one ElectLeaders, wait until
//     the metadata agrees). Each contender gets a fresh topic with the same assignment, and
//     the target each applies is what internal/plan computes for it (the same for all
//     three; kafkamender's result must list exactly that change);
//   - preferred: one partition's preferred leader, the same three ways; the kafkamender runs
//     also give its own overhead, from its Kafka client's per-request log: event received →
//     first write that changes the cluster, last answer read → result heard;
//   - rf: a topic with data raised from 2 to 3 replicas with the same throttle, kafkamender
//     vs the CLI executing the assignment Kafka's controller gives a scratch topic of the
//     same partition count at factor 3: time, and bytes copied against the minimum;
//   - failed: broker 4 of cluster local lost for good (stopped, its copy of a topic of 8
//     partitions at factor 2 deleted) and its replicas re-created on brokers 1-3 with the
//     same throttle: kafkamender (a broker-failed event naming the topic) vs the CLI
//     (--generate over 1,2,3, --execute --throttle, --verify until done): time, and bytes
//     copied against the minimum; and kafkamender's time from an Alertmanager webhook
//     POST of a firing KafkaBrokerDown alert to its first copy. Broker 4 is started again
//     after each run;
//   - storm and scale: BenchmarkAlertStorm and BenchmarkScale100k (internal/handlers),
//     run as `go test -bench` and parsed;
//   - fleet: scale out (fleet.go): three worker processes serve 100, then 300 Kafka
//     clusters (in-process placement fakes), their locks in NATS, on the stack's NATS
//     cluster; 10,000 events over the clusters, each result checked: events per second,
//     publish → result latency, each worker's CPU and peak RSS, the consumers and memory of
//     NATS, per cluster too, and how each grows from 100 to 300 clusters.
//
// Every scenario runs -runs times (3 by default), the contenders' order rotated each run;
// the table gives the median and the range. The worker runs in this process, configured
// by deployments/local/worker.yaml. The stack must be up (go tool task stack:up).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	runs      int
	sizes     []int
	clusters  []string
	scenarios map[string]bool
	rfMB      int
	throttle  int64
	trace     bool

	// The fleet scenario (fleet.go).
	fleetSizes   []int    // Kafka clusters the fleet serves, one run of each
	fleetEvents  int      // events over them
	fleetWorkers int      // worker processes
	fleetNATS    []string // client URLs of the NATS cluster's nodes
	fleetMonitor []string // monitoring URLs of the same nodes (/varz)
	// fleetReplaysOK counts results replayed (an event delivered again after its result
	// was stored: the stored result announced again) instead of failing on them.
	fleetReplaysOK bool
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	runs := fs.Int("runs", 3, "runs of each scenario (at least 3 for a median worth the name)")
	sizes := fs.String("sizes", "100,1000", "partitions the demoted broker leads, comma-separated")
	clusters := fs.String("clusters", "local,kraft", "clusters of the stack to demote on, comma-separated")
	scen := fs.String("scenarios", "demote,preferred,rf,failed,storm,scale,fleet", "scenarios to run, comma-separated")
	rfMB := fs.Int("rf-mb", 48, "MB written to the topic of the replication-factor and broker-failed scenarios")
	throttle := fs.Int64("throttle", 10<<20, "replication throttle of the replication-factor and broker-failed scenarios, bytes/s (all contenders)")
	trace := fs.Bool("trace", false, "write the worker's Kafka requests of each kafkamender run to .state/bench/<event id>.trace")
	fleetSizes := fs.String("fleet-clusters", "100,300", "fleet scenario: Kafka clusters the fleet serves, comma-separated (one run of each)")
	fleetEvents := fs.Int("fleet-events", 10_000, "fleet scenario: events spread over the clusters")
	fleetWorkers := fs.Int("fleet-workers", 3, "fleet scenario: worker processes")
	fleetNATS := fs.String("fleet-nats", defaultFleetNATS, "fleet scenario: client URLs of the NATS cluster's nodes, comma-separated (the workers' nats.url)")
	fleetMonitor := fs.String("fleet-nats-monitor", defaultFleetMonitor, "fleet scenario: monitoring URLs of the same NATS nodes, comma-separated (their /varz mem is read)")
	fleetReplaysOK := fs.Bool("fleet-replays-ok", true, "fleet scenario: count results published again as replays (an event delivered again after its result was stored: the stored result, announced again) instead of failing on them; a replay that says otherwise than the stored result fails the run either way")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{runs: *runs, clusters: split(*clusters), scenarios: map[string]bool{}, rfMB: *rfMB, throttle: *throttle, trace: *trace,
		fleetEvents: *fleetEvents, fleetWorkers: *fleetWorkers, fleetNATS: split(*fleetNATS), fleetMonitor: split(*fleetMonitor),
		fleetReplaysOK: *fleetReplaysOK}
	for _, s := range split(*fleetSizes) {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 || slices.Contains(o.fleetSizes, n) {
			return o, fmt.Errorf("-fleet-clusters: %q is not a new cluster count", s)
		}
		o.fleetSizes = append(o.fleetSizes, n)
	}
	for _, s := range split(*sizes) {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			return o, fmt.Errorf("-sizes: %q is not a partition count", s)
		}
		o.sizes = append(o.sizes, n)
	}
	for _, s := range split(*scen) {
		switch s {
		case "demote", "preferred", "rf", "failed", "storm", "scale", "fleet":
			o.scenarios[s] = true
		default:
			return o, fmt.Errorf("-scenarios: unknown %q", s)
		}
	}
	if o.runs < 1 {
		return o, fmt.Errorf("-runs %d: want 1 or more", o.runs)
	}
	if o.scenarios["fleet"] {
		switch {
		case len(o.fleetSizes) == 0:
			return o, errors.New("-fleet-clusters: none given")
		case o.fleetEvents < slices.Max(o.fleetSizes):
			return o, fmt.Errorf("-fleet-events %d: want at least one per cluster (%d)", o.fleetEvents, slices.Max(o.fleetSizes))
		case o.fleetWorkers < 1:
			return o, fmt.Errorf("-fleet-workers %d: want 1 or more", o.fleetWorkers)
		case len(o.fleetNATS) == 0 || len(o.fleetMonitor) == 0:
			return o, errors.New("-fleet-nats and -fleet-nats-monitor: want the NATS nodes' URLs")
		}
	}
	return o, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// bench is what the scenarios share.
type bench struct {
	opts     options
	root     string
	st       *stack.Stack // to stop and start a broker (scenario failed)
	dir      string       // .state/bench: the worker's log, the CLIs' JSON files
	stamp    string       // this run's, in topic names and event ids
	clusters map[string]*cluster
	nats     *natsConn
	w        *benchWorker
	rows     [][]string
	notes    []string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, args []string) error {
	opts, err := parseFlags(args)
	if err != nil {
		return err
	}
	root, err := stack.FindRoot(".")
	if err != nil {
		return err
	}
	st, err := stack.New(stack.Options{Root: root})
	if err != nil {
		return err
	}
	b := &bench{opts: opts, root: root, st: st, dir: filepath.Join(root, ".state", "bench"),
		stamp: time.Now().UTC().Format("150405"), clusters: map[string]*cluster{}}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	for _, c := range stack.Clusters() {
		if c.Name == "legacy" {
			continue
		}
		// The floor's client as the worker's: connections kept 5 minutes (a CLI run takes
		// longer than franz-go's default 20 s), and a minute for the controller to answer (a
		// ZooKeeper-mode controller reorders 1,000 partitions in more than kadm's 15 s plus
		// the client's 10 s, and the floor failed with a read timeout).
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.ConnIdleTimeout(5*time.Minute))
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		adm.SetTimeoutMillis(60_000)
		b.clusters[c.Name] = &cluster{Cluster: c, cl: cl, adm: adm, classpath: st.Classpath(c)}
	}
	b.rows = append(b.rows, []string{"scenario", "cluster", kafkamender, cli, floor, "kafkamender ÷ floor", "kafkamender ÷ CLIs", "goal"})
	if opts.scenarios["demote"] || opts.scenarios["preferred"] || opts.scenarios["rf"] || opts.scenarios["failed"] {
		nc, err := nats.Connect(stack.NATSClusterURL)
		if err != nil {
			return fmt.Errorf("nats (is the stack up? go tool task stack:up): %w", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		b.nats = &natsConn{nc: nc, js: js}
		b.logf("starting a worker in this process (log %s)", filepath.Join(b.dir, "worker.log"))
		if b.w, err = startWorker(ctx, root, b.dir, opts.throttle); err != nil {
			return err
		}
		err = b.stackScenarios(ctx)
		if cerr := b.w.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if opts.scenarios["storm"] {
		if err := b.storm(ctx); err != nil {
			return err
		}
	}
	if opts.scenarios["scale"] {
		if err := b.scale(ctx); err != nil {
			return err
		}
	}
	if opts.scenarios["fleet"] {
		if err := b.fleet(ctx); err != nil {
			return err
		}
	}
	fmt.Print(b.machine(ctx))
	fmt.Println()
	fmt.Print(table(b.rows))
	if len(b.notes) > 0 {
		fmt.Println()
		for _, n := range b.notes {
			fmt.Println("- " + n)
		}
	}
	return nil
}

func (b *bench) stackScenarios(ctx context.Context) error {
	if b.opts.scenarios["demote"] {
		for _, name := range b.opts.clusters {
			c, ok := b.clusters[name]
			if !ok {
				return fmt.Errorf("-clusters: no cluster %q (have local, kraft)", name)
			}
			for _, n := range b.opts.sizes {
				if err := b.demote(ctx, c, n); err != nil {
					return err
				}
			}
		}
	}
	if b.opts.scenarios["preferred"] {
		for _, name := range b.opts.clusters {
			if err := b.preferred(ctx, b.clusters[name]); err != nil {
				return err
			}
		}
	}
	if b.opts.scenarios["rf"] {
		if err := b.raise(ctx, b.clusters["local"]); err != nil {
			return err
		}
	}
	if b.opts.scenarios["failed"] {
		if err := b.failed(ctx, b.clusters["local"]); err != nil {
			return err
		}
	}
	return nil
}

// machine describes where the numbers come from.
func (b *bench) machine(ctx context.Context) string {
	cpu := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	javaVersion := "java: unknown"
	if out, err := exec.CommandContext(ctx, javaBinary(), "-version").CombinedOutput(); err == nil {
		javaVersion = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	return fmt.Sprintf("Machine: %s, %d cores (GOMAXPROCS %d), %s/%s; %s; %s\n"+
		"Kafka: %s (cluster local, ZooKeeper mode, 4 brokers), %s (cluster kraft, KRaft, 3 nodes); CLIs from the same jars; runs per scenario: %d, order rotated each run\n",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), javaVersion,
		stack.Kafka39Version, stack.Kafka4Version, b.opts.runs)
}
