// Command demo shows kafkamender repairing the local stack's ZooKeeper-mode cluster
// "local" (brokers 1-4), in eight steps, each a header line and a few lines of output:
//
//  1. two workers (bin/worker), one with deployments/local/worker.yaml and one with a
//     copy listening on 127.0.0.1:8081, their logs in .state/demo/;
//  2. a topic whose leadership is piled on one broker, and its leader count per broker;
//  3. the alert KafkaBrokerOverloaded for that broker, posted to the local Alertmanager,
//     which sends it to a worker's webhook: the broker is shed, and Alertmanager's repeated
//     notification is the same event, not run again;
//  4. a replication-factor raise, 2 to 3, of a topic with data: the emitter's progress;
//  5. a preferred-leader change by the controller nudge (zk-nudge): the controller moves;
//  6. a replication-factor raise of 120 partitions, over worker.yaml's approval threshold
//     (100): its plan waits, is listed, approved with the emitter, and runs as approved;
//  7. the audit trail: the stored result of each of the demo's events;
//  8. the workers stopped with SIGTERM, the demo's topics deleted.
//
// It runs again as often as wanted: it removes what an earlier run left, and the broker
// it overloads is one not in the cool-down of an earlier run's shed (or, when every
// broker is, it says the alert is a noop and why). `go tool task demo` brings the stack up
// and builds bin/ first.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/kafkamender/kafkamender/internal/approval"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/console"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/stack"
)

const (
	clusterName  = "local"
	workerConfig = "deployments/local/worker.yaml"
	stateDir     = ".state/demo"

	leadersTopic = "demo-leaders" // step 2 and 3
	rfTopic      = "demo-rf"      // step 4
	nudgeTopic   = "demo-nudge"   // step 5
	approveTopic = "demo-approve" // step 6
)

// topics are the demo's topics: deleted when it ends, and when it starts if a run left them.
var topics = []string{leadersTopic, rfTopic, nudgeTopic, approveTopic}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo is what the steps share.
type demo struct {
	cfg     *config.Config // workerConfig
	cluster stack.Cluster
	brokers []int32 // the cluster's broker ids
	cl      *kgo.Client
	adm     *kadm.Client
	js      jetstream.JetStream
	zk      *zk.Conn

	run     string    // this run's name, in its event ids
	step    int       // the step shown last
	workers []*worker // step 1

	overloaded  int32               // step 2: the broker leadership is piled on
	cooling     map[int32]time.Time // brokers an earlier shed left in the cool-down, and until when
	leadsBefore map[int32]int       // step 2: partitions of leadersTopic each broker leads
	eventIDs    []string            // the demo's event ids, in order (step 6)
}

func run(ctx context.Context) error {
	d, err := connect()
	if err != nil {
		return err
	}
	defer d.close()
	steps := []func(context.Context) error{
		d.startWorkers,
		d.pileLeadership,
		d.shedByAlert,
		d.raiseReplicationFactor,
		d.nudgeController,
		d.approveLargeChange,
		d.auditTrail,
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, step := range steps {
		if err := step(sctx); err != nil {
			d.abort()
			return err
		}
	}
	d.holdForConsole(ctx)
	cctx, cancelClean := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancelClean()
	if err := d.cleanUp(cctx); err != nil {
		d.abort()
		return err
	}
	return nil
}

// consoleURL is the web console of the first worker (worker.yaml's console.enabled, on
// its http.listen: http://127.0.0.1:8080/ui/).
func (d *demo) consoleURL() string { return "http://" + d.cfg.HTTP.Listen + console.Prefix }

// holdForConsole keeps the workers running, when the demo runs in a terminal, until Enter
// (or Ctrl-C): the story of the demo stays on the console meanwhile.
func (d *demo) holdForConsole(ctx context.Context) {
	if !d.cfg.Console.Enabled || !term.IsTerminal(int(os.Stdin.Fd())) {
		return
	}
	fmt.Printf("\nThe workers keep running: the demo's story is on the console, %s\n", d.consoleURL())
	fmt.Println("(sign in with the token in .state/stack/secure/console-operator-token). Press Enter to stop them.")
	enter := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(enter)
	}()
	select {
	case <-enter:
	case <-ctx.Done():
	}
}

// connect reads the worker configuration and connects to the cluster, NATS and ZooKeeper.
func connect() (*demo, error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	cfg, err := config.Load(workerConfig)
	if err != nil {
		return nil, err
	}
	c, err := stack.ClusterByName(clusterName)
	if err != nil {
		return nil, err
	}
	d := &demo{cfg: cfg, cluster: c, run: "demo-" + time.Now().UTC().Format("20060102-150405")}
	for _, b := range c.Brokers {
		d.brokers = append(d.brokers, b.ID)
	}
	if d.cl, err = kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...)); err != nil {
		return nil, err
	}
	d.adm = kadm.NewClient(d.cl)
	nc, err := nats.Connect(stack.NATSClusterURL)
	if err != nil {
		d.close()
		return nil, fmt.Errorf("nats (is the stack up? go tool task stack:up): %w", err)
	}
	if d.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		d.close()
		return nil, err
	}
	if d.zk, err = connectZK(); err != nil {
		nc.Close()
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *demo) close() {
	if d.js != nil {
		d.js.Conn().Close()
	}
	if d.zk != nil {
		d.zk.Close()
	}
	d.cl.Close()
}

// header starts the next step's output.
func (d *demo) header(format string, args ...any) {
	d.step++
	fmt.Printf("\n== %d. %s\n", d.step, fmt.Sprintf(format, args...))
}

// 1. Two workers, the second with its own http.listen; both ready.
func (d *demo) startWorkers(ctx context.Context) error {
	d.header("Two workers (bin/worker) against the local stack")
	second := filepath.Join(stateDir, "worker-2.yaml")
	if err := deriveConfig(workerConfig, second, "127.0.0.1:8081"); err != nil {
		return err
	}
	for i, cfg := range []string{workerConfig, second} {
		name := fmt.Sprintf("worker-%d", i+1)
		w, err := startWorker(name, cfg, filepath.Join(stateDir, name+".log"))
		if err != nil {
			return err
		}
		d.workers = append(d.workers, w)
	}
	for _, w := range d.workers {
		if err := w.waitReady(ctx, time.Minute); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, w := range d.workers {
		fmt.Fprintf(tw, "  %s\t%s\tready\tworker id %s\tconfig %s\tlog %s\n", w.name, strings.TrimPrefix(w.base, "http://"), w.id, w.config, w.log)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("  (%s: %s with another http.listen; both take events from stream %s)\n",
		second, workerConfig, events.EventsStream)
	if d.cfg.Console.Enabled {
		fmt.Printf("  Watch it in the web console: %s (token: cat .state/stack/secure/console-operator-token)\n", d.consoleURL())
	}
	return nil
}

// 2. A topic whose leadership is piled on one broker, and who leads what.
func (d *demo) pileLeadership(ctx context.Context) error {
	if err := d.chooseOverloaded(ctx); err != nil {
		return err
	}
	b := d.overloaded
	d.header("Topic %s on cluster %s (ZooKeeper mode, brokers 1-4), its leadership piled on broker %d", leadersTopic, clusterName, b)
	left, err := deleteTopics(ctx, d.adm, topics...)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		fmt.Printf("  (deleted %s, left by an earlier run)\n", strings.Join(left, ", "))
	}
	d.explainChoice()
	assignment := piledAssignment(b, d.brokers)
	if err := createTopic(ctx, d.cl, leadersTopic, assignment); err != nil {
		return err
	}
	if d.leadsBefore, err = leaderCounts(ctx, d.cl, leadersTopic); err != nil {
		return err
	}
	fmt.Printf("  %d partitions, %d replicas each, broker %d first in %d of the assignments; partitions each broker leads:\n",
		len(assignment), len(assignment[0]), b, countHeads(assignment, b))
	return printLeaders(d.brokers, []string{"leads"}, d.leadsBefore)
}

// 3. KafkaBrokerOverloaded through Alertmanager to a worker's webhook: the broker is shed.
func (d *demo) shedByAlert(ctx context.Context) error {
	b := d.overloaded
	d.header("Alert KafkaBrokerOverloaded{cluster=%q, broker_id=\"%d\"} posted to Alertmanager", clusterName, b)
	dupBefore, err := d.workers[0].duplicates()
	if err != nil {
		return err
	}
	a := newAlert(b)
	if err := postAlert(ctx, a); err != nil {
		return err
	}
	id, err := eventID(ctx, a)
	if err != nil {
		return err
	}
	d.eventIDs = append(d.eventIDs, id)
	fmt.Printf("  POST %s/api/v2/alerts -> Alertmanager -> POST %s (%s)\n",
		stack.AlertmanagerURL, stack.WorkerWebhookURL, d.workers[0].name)
	res, err := d.result(ctx, id, time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("  event %s: %s by %s in %s, %s\n", id, res.Status, res.Worker, took(res), leadersMoved(res))
	if res.Note != "" {
		fmt.Printf("  note: %s\n", res.Note)
	}
	after, err := leaderCounts(ctx, d.cl, leadersTopic)
	if err != nil {
		return err
	}
	if err := printLeaders(d.brokers, []string{"leads before", "leads after"}, d.leadsBefore, after); err != nil {
		return err
	}
	if cooling := d.coolingOthers(); len(cooling) > 0 && len(cooling) < len(d.brokers)-1 && res.Status == events.StatusSucceeded {
		fmt.Printf("  (%s, shed less than %s ago, took new leadership only where no other in-sync replica could)\n",
			brokerList(cooling), shortDuration(d.cfg.BrokerOverloaded.CoolDown))
	}
	dup, err := d.workers[0].waitDuplicates(ctx, dupBefore, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("  Alertmanager repeats the notification while the alert fires; %s counts it: %s\n", d.workers[0].name, dup)
	fmt.Println("  (the same event id: JetStream did not store it again, and it did not run again)")
	if err := postAlert(ctx, a.resolved()); err != nil {
		return err
	}
	if res.Status == events.StatusSucceeded {
		fmt.Println("  the alert resolves; the repair stays (resolved alerts are ignored)")
	} else {
		fmt.Println("  the alert resolves (resolved alerts are ignored)")
	}
	return nil
}

// explainChoice says why the overloaded broker is not broker 3, or why step 3's alert
// will be a noop: the cool-down of earlier sheds.
func (d *demo) explainChoice() {
	coolDown := shortDuration(d.cfg.BrokerOverloaded.CoolDown)
	if until, ok := d.cooling[d.overloaded]; ok {
		fmt.Printf("  every broker was shed less than %s ago: step 3's alert will be a noop (broker %d's cool-down ends at %s)\n",
			coolDown, d.overloaded, until.Format(time.TimeOnly))
		return
	}
	cooling := d.coolingOthers()
	if len(cooling) == 0 {
		return
	}
	var until []string
	for _, id := range cooling {
		until = append(until, d.cooling[id].Format(time.TimeOnly))
	}
	were := "were"
	if len(cooling) == 1 {
		were = "was"
	}
	fmt.Printf("  %s %s shed less than %s ago (cool-down until %s): an alert now would be a noop, so broker %d it is\n",
		brokerList(cooling), were, coolDown, strings.Join(until, ", "), d.overloaded)
}

// coolingOthers are the brokers in the cool-down other than the overloaded one.
func (d *demo) coolingOthers() []int32 {
	var ids []int32
	for id := range d.cooling {
		if id != d.overloaded {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// shortDuration writes 10m rather than 10m0s.
func shortDuration(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// brokerList names brokers: "broker 3", "brokers 1 and 3", "brokers 1, 2 and 3".
func brokerList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	if len(s) == 1 {
		return "broker " + s[0]
	}
	return "brokers " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// 4. A replication-factor raise of a topic with data: only the new replicas copy.
func (d *demo) raiseReplicationFactor(ctx context.Context) error {
	const (
		perPartition = 8 << 20
		throttle     = "1MiB"
	)
	d.header("Replication factor 2 -> 3 of topic %s, throttled to %s/s, with the emitter's progress", rfTopic, throttle)
	assignment := [][]int32{{1, 2}, {2, 3}, {3, 4}, {4, 1}}
	if err := createTopic(ctx, d.cl, rfTopic, assignment); err != nil {
		return err
	}
	if err := produce(ctx, d.cluster, rfTopic, len(assignment), perPartition); err != nil {
		return err
	}
	before, err := partitions(ctx, d.cl, rfTopic)
	if err != nil {
		return err
	}
	fmt.Printf("  %d partitions of %s each produced\n", len(assignment), formatMiB(perPartition))
	id := d.run + "-rf"
	d.eventIDs = append(d.eventIDs, id)
	if err := emitter(ctx, "replication-factor", "--cluster", clusterName, "--topic", rfTopic, "--rf", "3",
		"--throttle", throttle, "--id", id, "--reason", "demo: one more copy of every partition", "--wait"); err != nil {
		return err
	}
	after, err := partitions(ctx, d.cl, rfTopic)
	if err != nil {
		return err
	}
	fmt.Println("  a fresh read of the cluster:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tREPLICAS BEFORE\tREPLICAS AFTER\tIN SYNC AFTER\tLEADER")
	for i, p := range after {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\n", p.Partition, join(before[i].Replicas), join(p.Replicas), join(p.ISR), p.Leader)
	}
	return tw.Flush()
}

// 5. A preferred-leader change by the controller nudge: the controller moves.
func (d *demo) nudgeController(ctx context.Context) error {
	d.header("Preferred leader of %s-0 by the controller nudge (--strategy zk-nudge, ZooKeeper mode only)", nudgeTopic)
	if err := createTopic(ctx, d.cl, nudgeTopic, [][]int32{{1, 2, 3}}); err != nil {
		return err
	}
	show := func(when string) (leader int32, err error) {
		ps, err := partitions(ctx, d.cl, nudgeTopic)
		if err != nil {
			return 0, err
		}
		ctrl, err := controller(ctx, d.zk)
		if err != nil {
			return 0, err
		}
		fmt.Printf("  %s replicas %s, leader %d; controller: %s\n", when, join(ps[0].Replicas), ps[0].Leader, ctrl)
		return ps[0].Leader, nil
	}
	leader, err := show("before:")
	if err != nil {
		return err
	}
	target := int32(3)
	if leader == target {
		target = 2
	}
	id := d.run + "-nudge"
	d.eventIDs = append(d.eventIDs, id)
	fmt.Printf("  the worker writes broker %d first in the topic's znode, then fails the controller over: the next one loads it\n", target)
	if err := emitter(ctx, "preferred-leader", "--cluster", clusterName, "--topic", nudgeTopic, "--partition", "0",
		"--broker", fmt.Sprint(target), "--strategy", "zk-nudge", "--id", id,
		"--reason", "demo: the controller nudge", "--wait"); err != nil {
		return err
	}
	if _, err := show("after: "); err != nil {
		return err
	}
	res, err := d.result(ctx, id, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("  the result's controller_failover: %t (strategy %s): a new controller epoch, whichever broker won the election\n",
		res.ControllerFailover, res.Strategy)
	return nil
}

// 6. A change over the approval threshold: the plan waits, is approved, runs as approved.
func (d *demo) approveLargeChange(ctx context.Context) error {
	const count = 120
	d.header("A replication-factor raise of %d partitions waits for approval (worker.yaml: approval over 100), then runs as approved", count)
	assignment := make([][]int32, count)
	for p := range assignment {
		assignment[p] = []int32{d.brokers[p%len(d.brokers)]}
	}
	if err := createTopic(ctx, d.cl, approveTopic, assignment); err != nil {
		return err
	}
	id := d.run + "-approve"
	d.eventIDs = append(d.eventIDs, id)
	if err := emitter(ctx, "replication-factor", "--cluster", clusterName, "--topic", approveTopic, "--rf", "2", "--id", id,
		"--reason", "demo: a second copy of a large topic"); err != nil {
		return err
	}
	planID := approval.PlanID(clusterName, id)
	plans := approval.ReadStore(d.js)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		p, _, err := plans.Get(wctx, clusterName, planID)
		if err == nil && p.State == approval.Awaiting {
			break
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("the plan of %s did not come: %v", id, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	fmt.Println("  the worker planned it under the lock, stored the plan with a fingerprint of what it depends on, and wrote nothing:")
	if err := emitter(ctx, "plans", "--cluster", clusterName); err != nil {
		return err
	}
	approvalID := d.run + "-approval"
	d.eventIDs = append(d.eventIDs, approvalID)
	if err := emitter(ctx, "approve", "--cluster", clusterName, "--id", planID, "--approve-id", approvalID, "--reason", "demo: checked the plan"); err != nil {
		return err
	}
	fmt.Println("  the worker re-reads what the plan depends on and, as nothing changed, runs exactly the stored plan:")
	res, err := d.result(ctx, id, 3*time.Minute)
	if err != nil {
		return err
	}
	after, err := partitions(ctx, d.cl, approveTopic)
	if err != nil {
		return err
	}
	two := 0
	for _, p := range after {
		if len(p.Replicas) == 2 {
			two++
		}
	}
	fmt.Printf("  %s's own result: %s, %d changes (plan %s); a fresh read: %d of %d partitions have 2 replicas\n",
		id, res.Status, len(res.Changes), res.PlanID, two, count)
	return nil
}

// 7. The audit trail: each event's stored result, and that each is stored once.
func (d *demo) auditTrail(ctx context.Context) error {
	d.header("The audit trail (stream %s): the stored result of each of the demo's events", events.ResultsStream)
	s, err := d.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  EVENT\tTYPE\tSTATUS\tCHANGES\tWORKER\tSTORED")
	for _, id := range d.eventIDs {
		res, err := d.result(ctx, id, 10*time.Second)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.ResultSubject(id)))
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%d\n", id, res.Type, res.Status, len(res.Changes), res.Worker,
			info.State.Subjects[events.ResultSubject(id)])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("  (each: bin/emitter result --id EVENT; STORED: results kept for the id, one however often it came)")
	return nil
}

// 8. Stop the workers with SIGTERM, delete the demo's topics.
func (d *demo) cleanUp(ctx context.Context) error {
	d.header("Cleaning up")
	var errs []error
	for _, w := range d.workers {
		took, err := w.stop(30 * time.Second)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Printf("  %s: SIGTERM, exited cleanly in %s (log %s)\n", w.name, took.Round(10*time.Millisecond), w.log)
	}
	deleted, err := deleteTopics(ctx, d.adm, topics...)
	if err != nil {
		errs = append(errs, err)
	} else {
		fmt.Printf("  deleted topics %s\n", strings.Join(deleted, ", "))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println("The stack keeps running: go tool task stack:status | stack:logs | stack:down")
	return nil
}

// abort stops the workers still running after a failed step, and shows the end of
// their logs; the topics stay for a look (the next run deletes them).
func (d *demo) abort() {
	for _, w := range d.workers {
		w.kill()
		fmt.Fprintf(os.Stderr, "\n--- the end of %s's log (%s):\n%s\n", w.name, w.log, stack.Tail(w.log, 20))
	}
}

// emitter runs bin/emitter with args, its output on the demo's (a terminal shows the
// live progress bar of a copy).
func emitter(ctx context.Context, args ...string) error {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " '\"$") {
			shown[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	fmt.Printf("  $ bin/emitter %s\n", strings.Join(shown, " "))
	cmd := exec.CommandContext(ctx, "bin/emitter", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bin/emitter %s: %w", args[0], err)
	}
	return nil
}
