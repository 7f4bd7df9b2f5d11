package main

// Scenario failed: broker 4 of cluster local lost for good (stopped, its copy of the
// topic deleted) under a topic with data; its replicas re-created on brokers 1-3 with the
// same throttle by kafkamender (a broker-failed event) and by Kafka's CLI (--generate over
// brokers 1,2,3, --execute --throttle, --verify until done): time, and bytes copied
// against the minimum. A third setup of each run measures how soon kafkamender starts
// copying after the alert that production sends it: Alertmanager's webhook POST of a
// firing KafkaBrokerDown alert.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/stack"
)

const (
	// failedBroker is the broker the scenario loses (rack r2, with broker 3).
	failedBroker int32 = 4
	// alerted is the third setup of each run: kafkamender from the webhook's alert, for
	// the time from the alert to its first copy.
	alerted = "kafkamender (alert)"
	// firstCopyPoll is how often the alerted run reads the topic's metadata for its
	// first new replica.
	firstCopyPoll = 50 * time.Millisecond
)

// minimumCopy is the least a repair of broker failed copies: each partition that listed
// it needs one new replica, a copy of its size.
func minimumCopy(sizes map[int32]int64, before map[int32][]int32, failed int32) int64 {
	var n int64
	for p, r := range before {
		if slices.Contains(r, failed) {
			n += sizes[p]
		}
	}
	return n
}

// proposedAssignment parses the output of kafka-reassign-partitions --generate: the JSON
// on the line after "Proposed partition reassignment configuration", the replicas of
// each partition of topic.
func proposedAssignment(out, topic string) (map[int32][]int32, error) {
	const head = "Proposed partition reassignment configuration"
	i := strings.Index(out, head)
	if i < 0 {
		return nil, fmt.Errorf("--generate printed no %q:\n%s", head, lastLines(out, 10))
	}
	var doc struct {
		Partitions []struct {
			Topic     string  `json:"topic"`
			Partition int32   `json:"partition"`
			Replicas  []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	rest := strings.TrimSpace(out[i+len(head):])
	line, _, _ := strings.Cut(rest, "\n")
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		return nil, fmt.Errorf("--generate's proposal %q: %w", line, err)
	}
	a := map[int32][]int32{}
	for _, p := range doc.Partitions {
		if p.Topic != topic {
			return nil, fmt.Errorf("--generate proposes %s-%d, not of topic %s", p.Topic, p.Partition, topic)
		}
		a[p.Partition] = p.Replicas
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("--generate proposes no partition of %s", topic)
	}
	return a, nil
}

// isPartitionDir reports whether name is the log directory of a partition of topic
// ("<topic>-<partition>").
func isPartitionDir(name, topic string) bool {
	p, ok := strings.CutPrefix(name, topic+"-")
	if !ok {
		return false
	}
	_, err := strconv.ParseUint(p, 10, 31)
	return err == nil
}

// brokerDown tracks the lost broker, so that it is started again whatever happens.
type brokerDown struct {
	st   *stack.Stack
	c    *cluster
	down bool
}

// lose stops the broker through the stack (SIGTERM: a controlled shutdown), deletes its
// copy of topic (its partitions' directories in the broker's log dirs, as a lost disk
// would) and waits until the cluster's metadata no longer lists it and every partition of
// topic is led by a live broker, on every live broker.
func (d *brokerDown) lose(ctx context.Context, topic string) error {
	dirs, err := d.st.LogDirs(d.c.Name, failedBroker)
	if err != nil {
		return err
	}
	d.down = true
	if err := d.st.Stop(ctx, d.c.ServerName(failedBroker)); err != nil {
		return fmt.Errorf("stop %s: %w", d.c.ServerName(failedBroker), err)
	}
	removed := 0
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() && isPartitionDir(e.Name(), topic) {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
				removed++
			}
		}
	}
	if removed == 0 {
		return fmt.Errorf("broker %d held no directory of %s in %v", failedBroker, topic, dirs)
	}
	live := slices.DeleteFunc(d.c.brokerIDs(), func(id int32) bool { return id == failedBroker })
	return until(ctx, 2*time.Minute, fmt.Sprintf("broker %d gone from the metadata", failedBroker), func(ctx context.Context) error {
		// Asked of a broker, not kadm's (franz-go's cached metadata).
		md, err := kafka.BrokerMetadata(ctx, d.c.cl)
		if err != nil {
			return err
		}
		for _, br := range md.Brokers {
			if br.NodeID == failedBroker {
				return fmt.Errorf("the metadata lists broker %d", failedBroker)
			}
		}
		for _, id := range live {
			ps, err := d.c.readFrom(ctx, id, topic)
			if err != nil {
				return fmt.Errorf("broker %d: %w", id, err)
			}
			for p, pl := range ps {
				if pl.leader < 0 || pl.leader == failedBroker || slices.Contains(pl.isr, failedBroker) {
					return fmt.Errorf("broker %d: partition %d led by %d, isr %v", id, p, pl.leader, pl.isr)
				}
			}
		}
		return nil
	})
}

// back starts the broker again (its copy of the topic is gone; the topic no longer lists
// it) and waits until the cluster's metadata lists every broker.
func (d *brokerDown) back(ctx context.Context) error {
	if !d.down {
		return nil
	}
	if err := d.st.Start(ctx, d.c.ServerName(failedBroker)); err != nil {
		return fmt.Errorf("start %s: %w", d.c.ServerName(failedBroker), err)
	}
	if err := until(ctx, 3*time.Minute, "every broker listed", func(ctx context.Context) error {
		return stack.BrokersListed(ctx, d.c.Cluster)
	}); err != nil {
		return err
	}
	d.down = false
	return nil
}

// failedRun is what one setup of the failed scenario gives.
type failedRun struct {
	topic  string
	sizes  map[int32]int64
	before map[int32][]int32
}

// failed: 8 partitions at factor 2 round robin over brokers 1-4 (broker 4 holds 4
// replicas) with rf-mb MiB; broker 4 lost; its replicas re-created on 1-3.
func (b *bench) failed(ctx context.Context, c *cluster) (err error) {
	d := &brokerDown{st: b.st, c: c}
	var current string  // the topic of the setup under way
	cliTouched := false // a CLI run under way: throttles of its may be left
	probe := ""         // what --execute --throttle did, once
	var byHand []time.Duration
	defer func() {
		if err == nil {
			return
		}
		// Whatever happened, the stack is left with every broker running and without the
		// run's topic.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		if d.down {
			b.logf("failed: starting %s again after: %v", c.ServerName(failedBroker), err)
			if berr := d.back(rctx); berr != nil {
				err = errors.Join(err, berr)
			}
		}
		if cliTouched && current != "" {
			if terr := c.clearThrottles(rctx, current, c.brokerIDs()); terr != nil {
				b.logf("failed: throttles of the CLI run may be left: %v", terr)
			}
		}
		if current != "" {
			if derr := c.deleteTopic(rctx, current); derr != nil {
				b.logf("failed: topic %s left: %v", current, derr)
			}
		}
	}()
	who := []string{kafkamender, cli, alerted}
	times := map[string][]time.Duration{}
	share := map[string][]float64{} // bytes copied ÷ the minimum
	held := 0                       // partitions that listed the lost broker
	var minimum, firstCopy, alertResult []float64
	var alertCopied []float64
	var skipped []string
	for r := range b.opts.runs {
		for _, contender := range order(r, who) {
			topic := fmt.Sprintf("bench-failed-%s-%s-%d-%s", c.Name, failedTag(contender), r, b.stamp)
			if contender == alerted {
				// The alert names no topic: the worker repairs every partition of the
				// cluster that lists the broker. It is sent only when no other topic
				// does, so that it copies the run's topic alone.
				others, err := c.othersListing(ctx, topic, failedBroker)
				if err != nil {
					return err
				}
				if len(others) > 0 {
					skipped = append(skipped, fmt.Sprintf("run %d: %s", r+1, strings.Join(others, ", ")))
					b.logf("failed %s %-19s run %d: skipped: other topics list broker %d: %s", c.Name, contender, r+1, failedBroker, strings.Join(others, ", "))
					continue
				}
			}
			current = topic
			run, err := b.failedSetup(ctx, c, d, topic)
			if err != nil {
				return err
			}
			held = 0
			for _, a := range run.before {
				if slices.Contains(a, failedBroker) {
					held++
				}
			}
			var dur time.Duration
			var after map[int32][]int32
			switch contender {
			case kafkamender:
				id := fmt.Sprintf("failed-%s-%d-%s", c.Name, r, b.stamp)
				b.w.rec.reset()
				start := time.Now()
				res, heard, err := b.nats.event(ctx, c.Name, events.TypeBrokerFailed, id, map[string]any{
					"broker": failedBroker, "topics": []string{topic}, "throttle_bytes_per_sec": b.opts.throttle, "reason": "bench"})
				dur = time.Since(start)
				if err != nil {
					return err
				}
				if after, err = repaired(res, run.before); err != nil {
					return fmt.Errorf("failed %s: %w", id, err)
				}
				if b.opts.trace {
					if err := b.writeTrace(id, start, res.StartedAt, heard); err != nil {
						return err
					}
				}
			case cli:
				cliTouched = true
				if probe == "" {
					// Once, untimed: what --execute --throttle does with the lost broker listed.
					if probe, err = b.probeExecuteThrottle(ctx, c, run); err != nil {
						return fmt.Errorf("failed %s, %s: %w", topic, cli, err)
					}
				}
				// The operator's way around it: the throttle --execute --throttle would set,
				// on the live brokers, by hand with kafka-configs, then --execute without
				// --throttle, then --verify until done (which removes the throttle).
				start := time.Now()
				after, err = cliGenerate(ctx, c, b.dir, topic, c.liveIDs())
				if err == nil {
					t0 := time.Now()
					err = cliThrottle(ctx, c, topic, run.before, after, b.opts.throttle)
					byHand = append(byHand, time.Since(t0))
				}
				if err == nil {
					err = cliAssign(ctx, c, b.dir, topic, after, 0)
				}
				dur = time.Since(start)
				if err != nil {
					return fmt.Errorf("failed %s, %s: %w", topic, cli, err)
				}
				cliTouched = false
			case alerted:
				b.w.rec.reset()
				first, sent, res, heard, err := b.alert(ctx, c, run)
				if err != nil {
					return fmt.Errorf("failed %s, %s: %w", topic, alerted, err)
				}
				if after, err = repaired(res, run.before); err != nil {
					return fmt.Errorf("failed %s, alert %s: %w", topic, res.ID, err)
				}
				if b.opts.trace {
					if err := b.writeTrace(res.ID, sent, res.StartedAt, heard); err != nil {
						return err
					}
				}
				firstCopy = append(firstCopy, float64(first.Sub(sent)))
				alertResult = append(alertResult, float64(heard.Sub(sent)))
				dur = heard.Sub(sent)
			}
			// Every contender: every partition on the replicas it says, none on broker 4,
			// all in sync, no reassignment listed, each new replica as large as the
			// partition (read by the bench, untimed).
			if err := c.repairShows(ctx, topic, run.sizes, after); err != nil {
				return fmt.Errorf("failed %s, %s: %w", topic, contender, err)
			}
			if err := c.noThrottles(ctx, topic); err != nil {
				return fmt.Errorf("failed %s, %s, at its end: %w", topic, contender, err)
			}
			n, least := copied(run.sizes, run.before, after), minimumCopy(run.sizes, run.before, failedBroker)
			if contender == alerted {
				alertCopied = append(alertCopied, float64(n)/float64(least))
				b.logf("failed %s %-19s run %d: first copy %s after the alert, result %s after it, copied %.1f MiB (minimum %.1f MiB)",
					c.Name, contender, r+1, short(time.Duration(firstCopy[len(firstCopy)-1])), short(dur), float64(n)/(1<<20), float64(least)/(1<<20))
			} else {
				times[contender] = append(times[contender], dur)
				share[contender] = append(share[contender], float64(n)/float64(least))
				minimum = append(minimum, float64(least)/(1<<20))
				b.logf("failed %s %-19s run %d: %s, copied %.1f MiB (minimum %.1f MiB)", c.Name, contender, r+1, short(dur), float64(n)/(1<<20), float64(least)/(1<<20))
			}
			if err := d.back(ctx); err != nil {
				return err
			}
			if err := c.deleteTopic(ctx, topic); err != nil {
				return err
			}
			current = ""
		}
	}
	km, cl := summarize(times[kafkamender]), summarize(times[cli])
	kb, cb, m := summarizeF(share[kafkamender]), summarizeF(share[cli]), summarizeF(minimum)
	b.rows = append(b.rows, []string{
		fmt.Sprintf("broker %d lost for good: its replicas of %d of %d partitions (factor 2) re-created, %s MiB to copy at least, throttle %d MiB/s",
			failedBroker, held, rfPartitions, m.format("%.0f"), b.opts.throttle>>20),
		clusterLabel(c),
		fmt.Sprintf("%s; copied %s× the minimum", km, kb.format("%.2f")),
		fmt.Sprintf("%s; copied %s× the minimum", cl, cb.format("%.2f")),
		"", "", ratio(km, cl), ""})
	fc, ar, ab := durations(firstCopy), durations(alertResult), summarizeF(alertCopied)
	b.rows = append(b.rows, []string{
		"kafkamender: KafkaBrokerDown alert (webhook POST) → first copy started",
		clusterLabel(c), fc.String(), "", "", "", "", ""})
	b.notes = append(b.notes, "broker lost: each contender gets its own fresh topic (8 partitions, factor 2, round robin over brokers 1-4), filled, then broker 4 stopped "+
		"through the stack and the topic's directories deleted from its log dirs; the clock starts once the metadata no longer lists broker 4. "+
		"kafkamender: a broker-failed event on NATS naming the run's topic (the same data as the alert's, plus topics and the throttle), "+
		"event sent → result heard; the CLI: --generate --broker-list 1,2,3 (Kafka's fresh assignment of the whole topic), the same throttle "+
		"(set by hand, see below), --execute, --verify until done, from the start of --generate. The minimum is each partition that listed broker 4 copied once; "+
		"bytes copied are partition sizes × replicas added. Each contender's end is checked by the bench: replicas as it says, "+
		"none on broker 4, all in sync, no reassignment listed, each new replica's log as large as the partition.")
	alertNote := fmt.Sprintf("alert → first copy: a third fresh topic each run, the same loss; the bench POSTs an Alertmanager notification of a firing "+
		"KafkaBrokerDown alert (cluster %s, broker_id \"%d\", no topics) to the worker's webhook; the clock runs from the POST to the first read "+
		"(every %s, from each live broker) of the topic's metadata showing a partition with a new replica. The alert repairs every partition "+
		"of the cluster that lists the broker, so it is sent only when no other topic does (checked before each), and the time and "+
		"bytes comparison uses the NATS event limited to the run's topic instead. Its copies run at the worker's default throttle, "+
		"set to the same -throttle. The alerted runs' result came %s after the POST, copying %s× the minimum",
		c.Name, failedBroker, firstCopyPoll, ar, ab.format("%.2f"))
	b.notes = append(b.notes, fmt.Sprintf("broker lost, the CLI: %s So the CLI runs set that throttle by hand instead "+
		"(kafka-configs: the rate on each live broker of the move, the topic's leader and follower throttled replicas as --execute computes them; "+
		"taking %s of each run), then --execute without --throttle; the failed attempt (once, untimed) is not in their time.", probe, summarize(byHand)))
	if len(skipped) > 0 {
		alertNote += fmt.Sprintf("; skipped because other topics listed broker %d: %s", failedBroker, strings.Join(skipped, "; "))
	}
	b.notes = append(b.notes, alertNote+".")
	return nil
}

func failedTag(contender string) string {
	if contender == alerted {
		return "alert"
	}
	return tag(contender)
}

// durations summarizes durations kept as float64 nanoseconds.
func durations(vs []float64) summary {
	ds := make([]time.Duration, len(vs))
	for i, v := range vs {
		ds[i] = time.Duration(v)
	}
	return summarize(ds)
}

// failedSetup creates topic, fills it, reads its sizes and replicas, then loses the
// broker.
func (b *bench) failedSetup(ctx context.Context, c *cluster, d *brokerDown, topic string) (failedRun, error) {
	run := failedRun{topic: topic}
	if err := c.createTopic(ctx, topic, rfAssignment(c.brokerIDs())); err != nil {
		return run, err
	}
	if err := c.fill(ctx, topic, rfPartitions, b.opts.rfMB); err != nil {
		return run, err
	}
	var err error
	if run.sizes, err = c.sizes(ctx, topic); err != nil {
		return run, err
	}
	if run.before, err = c.assignment(ctx, topic); err != nil {
		return run, err
	}
	if minimumCopy(run.sizes, run.before, failedBroker) == 0 {
		return run, fmt.Errorf("%s: broker %d holds none of it: %v", topic, failedBroker, run.before)
	}
	return run, d.lose(ctx, topic)
}

// liveIDs are the brokers of the cluster but the failed one.
func (c *cluster) liveIDs() []int32 {
	return slices.DeleteFunc(c.brokerIDs(), func(id int32) bool { return id == failedBroker })
}

// othersListing names the partitions of topics other than topic that list broker id,
// from the metadata of every topic, asked of a broker.
func (c *cluster) othersListing(ctx context.Context, topic string, id int32) ([]string, error) {
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.cl) // Topics nil: every topic
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range md.Topics {
		if t.Topic == nil || *t.Topic == topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", *t.Topic, err)
		}
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, id) {
				out = append(out, fmt.Sprintf("%s-%d", *t.Topic, p.Partition))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// repaired checks a broker-failed result (succeeded, nothing skipped, every partition
// that listed the failed broker changed, no other) and returns the replicas it leaves.
func repaired(res *events.Result, before map[int32][]int32) (map[int32][]int32, error) {
	if res.Status != events.StatusSucceeded || len(res.Skipped) > 0 {
		return nil, fmt.Errorf("result %s: %s %s, %d skipped", res.ID, res.Status, res.Error, len(res.Skipped))
	}
	after := map[int32][]int32{}
	for p, a := range before {
		after[p] = a
	}
	changed := 0
	for _, ch := range res.Changes {
		if _, ok := before[ch.Partition]; !ok {
			return nil, fmt.Errorf("result %s: changes %s, not of the run's topic", res.ID, ch.TopicPartition)
		}
		after[ch.Partition] = ch.ReplicasAfter
		changed++
	}
	for p, a := range before {
		if slices.Contains(a, failedBroker) != slices.ContainsFunc(res.Changes, func(ch events.Change) bool { return ch.Partition == p }) {
			return nil, fmt.Errorf("result %s: partition %d (replicas %v) changed or not, %d changes", res.ID, p, a, changed)
		}
	}
	return after, nil
}

// repairShows waits until topic's partitions have the replicas of after, none on the
// failed broker, all in sync, none under reassignment, and each new replica's log as
// large as the partition was.
func (c *cluster) repairShows(ctx context.Context, topic string, sizes map[int32]int64, after map[int32][]int32) error {
	return until(ctx, time.Minute, "the repair shows", func(ctx context.Context) error {
		ps, err := c.read(ctx, topic)
		if err != nil {
			return err
		}
		for p, a := range after {
			got := ps[p]
			if len(a) != 2 || slices.Contains(a, failedBroker) || !slices.Equal(got.replicas, a) {
				return fmt.Errorf("partition %d has %v, want %v (2 replicas, none on broker %d)", p, got.replicas, a, failedBroker)
			}
			if !sameSet(got.isr, a) {
				return fmt.Errorf("partition %d: isr %v of replicas %v", p, got.isr, a)
			}
		}
		if n, err := c.reassigning(ctx, partitionsOf(topic)); err != nil || n > 0 {
			return fmt.Errorf("reassignments still listed (%d) or unreadable: %v", n, err)
		}
		all, err := c.adm.DescribeAllLogDirs(ctx, partitionsOf(topic))
		if err != nil {
			return err
		}
		have := map[int32]map[int32]int64{} // partition → broker → size
		for broker, ds := range all {
			ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == topic {
					if have[p.Partition] == nil {
						have[p.Partition] = map[int32]int64{}
					}
					have[p.Partition][broker] = p.Size
				}
			})
		}
		for p, a := range after {
			for _, r := range a {
				if s, ok := have[p][r]; !ok || s < sizes[p] {
					return fmt.Errorf("partition %d: broker %d holds %d bytes of it (listed %v), the partition has %d", p, r, s, ok, sizes[p])
				}
			}
		}
		return nil
	})
}

func sameSet(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x int32) bool { return !slices.Contains(b, x) })
}

// cliGenerate asks kafka-reassign-partitions --generate for a fresh assignment of topic
// over brokers, as an operator replacing a lost broker would.
func cliGenerate(ctx context.Context, c *cluster, dir, topic string, brokers []int32) (map[int32][]int32, error) {
	f := filepath.Join(dir, topic+"-move.json")
	if err := writeJSON(f, map[string]any{"version": 1, "topics": []map[string]string{{"topic": topic}}}); err != nil {
		return nil, err
	}
	ids := make([]string, len(brokers))
	for i, id := range brokers {
		ids[i] = strconv.Itoa(int(id))
	}
	out, err := c.java(ctx, reassignClass, "--bootstrap-server", strings.Join(c.Bootstrap(), ","),
		"--topics-to-move-json-file", f, "--broker-list", strings.Join(ids, ","), "--generate")
	if err != nil {
		return nil, err
	}
	return proposedAssignment(out, topic)
}

// alert posts a firing KafkaBrokerDown alert for the failed broker to the worker's
// webhook as Alertmanager would, and watches the run's topic for its first new replica.
// It returns when that was seen, when the POST was sent, and the result of the alert's
// event and when it was heard.
func (b *bench) alert(ctx context.Context, c *cluster, run failedRun) (first, sent time.Time, res *events.Result, heard time.Time, err error) {
	labels := map[string]string{"alertname": "KafkaBrokerDown", "cluster": c.Name, "broker_id": strconv.Itoa(int(failedBroker))}
	a := alertmanager.Alert{Status: "firing", Labels: labels,
		Annotations: map[string]string{"summary": fmt.Sprintf("broker %d of %s is down (bench)", failedBroker, c.Name)},
		StartsAt:    time.Now().UTC(), Fingerprint: alertmanager.Fingerprint(labels)}
	body, err := json.Marshal(alertmanager.Notification{Version: "4", GroupKey: `{}:{alertname="KafkaBrokerDown"}`,
		Status: "firing", Receiver: "kafkamender", Alerts: []alertmanager.Alert{a}})
	if err != nil {
		return
	}
	id := alertmanager.ID(a)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	seen := make(chan time.Time, 1)
	go func() { seen <- c.firstNewReplica(wctx, run) }()

	res, heard, err = b.nats.await(ctx, id, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+b.w.addr+alertmanager.Path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		sent = time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var ans alertmanager.Response
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("webhook: %s: %s", resp.Status, raw)
		}
		if err := json.Unmarshal(raw, &ans); err != nil {
			return fmt.Errorf("webhook's answer %q: %w", raw, err)
		}
		if len(ans.Published) != 1 || ans.Published[0].ID != id || ans.Published[0].Duplicate {
			return fmt.Errorf("webhook: published %+v, want one new event %s (answer %s)", ans.Published, id, raw)
		}
		return nil
	})
	if err != nil {
		return
	}
	stop()
	first = <-seen
	if first.IsZero() {
		err = fmt.Errorf("alert %s: no new replica of %s seen before the result", id, run.topic)
	}
	return
}

// firstNewReplica reads run's topic from each live broker every firstCopyPoll until one
// shows a partition with a replica it did not have, and returns when that read was
// answered; zero when ctx ends first.
func (c *cluster) firstNewReplica(ctx context.Context, run failedRun) time.Time {
	tick := time.NewTicker(firstCopyPoll)
	defer tick.Stop()
	for {
		for _, id := range c.liveIDs() {
			ps, err := c.readFrom(ctx, id, run.topic)
			if err != nil {
				continue
			}
			at := time.Now()
			for p, pl := range ps {
				for _, r := range pl.replicas {
					if !slices.Contains(run.before[p], r) {
						return at
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-tick.C:
		}
	}
}

// reassignThrottles is the throttle kafka-reassign-partitions --execute --throttle sets
// for moving topic from current to proposed: the brokers whose rate it sets (the sources
// and destinations of every partition; lost left out, as it cannot be configured), and
// the topic's leader and follower throttled replicas ("partition:broker", each
// partition's current replicas as leaders, its new ones as followers).
func reassignThrottles(current, proposed map[int32][]int32, lost int32) (brokers []int32, leaders, followers string) {
	var ls, fs []string
	for p, to := range proposed {
		from := current[p]
		for _, r := range from {
			ls = append(ls, fmt.Sprintf("%d:%d", p, r))
		}
		for _, r := range to {
			if !slices.Contains(from, r) {
				fs = append(fs, fmt.Sprintf("%d:%d", p, r))
			}
		}
		for _, r := range append(slices.Clone(from), to...) {
			if r != lost && !slices.Contains(brokers, r) {
				brokers = append(brokers, r)
			}
		}
	}
	slices.Sort(ls)
	slices.Sort(fs)
	slices.Sort(brokers)
	return brokers, strings.Join(ls, ","), strings.Join(fs, ",")
}

const (
	configClass      = "kafka.admin.ConfigCommand"
	leaderRate       = "leader.replication.throttled.rate"
	followerRate     = "follower.replication.throttled.rate"
	leaderReplicas   = "leader.replication.throttled.replicas"
	followerReplicas = "follower.replication.throttled.replicas"
)

// cliThrottle sets with kafka-configs, one command per entity, the throttle --execute
// --throttle would set for moving topic from current to proposed, except on the lost
// broker.
func cliThrottle(ctx context.Context, c *cluster, topic string, current, proposed map[int32][]int32, rate int64) error {
	brokers, leaders, followers := reassignThrottles(current, proposed, failedBroker)
	boot := strings.Join(c.Bootstrap(), ",")
	for _, id := range brokers {
		if _, err := c.java(ctx, configClass, "--bootstrap-server", boot, "--entity-type", "brokers", "--entity-name", strconv.Itoa(int(id)),
			"--alter", "--add-config", fmt.Sprintf("%s=%d,%s=%d", leaderRate, rate, followerRate, rate)); err != nil {
			return err
		}
	}
	_, err := c.java(ctx, configClass, "--bootstrap-server", boot, "--entity-type", "topics", "--entity-name", topic,
		"--alter", "--add-config", fmt.Sprintf("%s=[%s],%s=[%s]", leaderReplicas, leaders, followerReplicas, followers))
	return err
}

// probeExecuteThrottle runs, untimed, what the brief's operator runs first: --generate
// over the live brokers, then --execute --throttle. With the lost broker among the
// current replicas, Kafka 3.9's tool sets the topic's throttled replicas, then the rate on
// every broker of the move, the lost one included: that request waits for a broker that
// is not there until the admin client's timeout, and the tool exits before it submits
// any reassignment. It returns what happened, having checked that nothing was submitted
// and removed the throttles the attempt left.
func (b *bench) probeExecuteThrottle(ctx context.Context, c *cluster, run failedRun) (string, error) {
	target, err := cliGenerate(ctx, c, b.dir, run.topic, c.liveIDs())
	if err != nil {
		return "", err
	}
	f, err := writeReassignment(b.dir, run.topic+"-probe", run.topic, target)
	if err != nil {
		return "", err
	}
	start := time.Now()
	out, err := c.java(ctx, reassignClass, "--bootstrap-server", strings.Join(c.Bootstrap(), ","), "--reassignment-json-file", f,
		"--execute", "--throttle", fmt.Sprint(b.opts.throttle))
	d := time.Since(start)
	if err == nil {
		return "", fmt.Errorf("--execute --throttle with broker %d lost succeeded (the bench expects Kafka %s's tool to fail there; "+
			"time it as the CLI's way instead):\n%s", failedBroker, c.Version, lastLines(out, 10))
	}
	why := "failed"
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, "Error: ") {
			why = strings.TrimPrefix(line, "Error: ")
			break
		}
	}
	b.logf("failed %s %-19s: --execute --throttle with broker %d lost: %s after %s", c.Name, cli, failedBroker, why, short(d))
	now, err := c.assignment(ctx, run.topic)
	if err != nil {
		return "", err
	}
	for p, a := range run.before {
		if !slices.Equal(now[p], a) {
			return "", fmt.Errorf("the failed --execute --throttle changed partition %d: %v → %v", p, a, now[p])
		}
	}
	if n, err := c.reassigning(ctx, partitionsOf(run.topic)); err != nil || n > 0 {
		return "", fmt.Errorf("the failed --execute --throttle left %d reassignments (or unreadable: %v)", n, err)
	}
	if err := c.clearThrottles(ctx, run.topic, c.liveIDs()); err != nil {
		return "", err
	}
	return fmt.Sprintf("kafka-reassign-partitions --execute --throttle, with broker %d lost and listed among the topic's replicas, fails after %s "+
		"without submitting anything (%q): it sets the throttle rate on every broker of the move, the lost one included, and that request waits "+
		"for broker %d until the admin client's timeout (it had set the topic's throttled replicas and the live brokers' rates already; "+
		"the bench removed them).", failedBroker, short(d), why, failedBroker), nil
}

// clearThrottles deletes the replication throttle from topic and brokers (what a CLI
// run's --verify would have removed), leaving other configurations alone.
func (c *cluster) clearThrottles(ctx context.Context, topic string, brokers []int32) error {
	del := func(names ...string) []kadm.AlterConfig {
		var out []kadm.AlterConfig
		for _, n := range names {
			out = append(out, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: n})
		}
		return out
	}
	tr, err := c.adm.AlterTopicConfigs(ctx, del(leaderReplicas, followerReplicas), topic)
	for _, r := range tr {
		err = errors.Join(err, r.Err)
	}
	br, berr := c.adm.AlterBrokerConfigs(ctx, del(leaderRate, followerRate), brokers...)
	err = errors.Join(err, berr)
	for _, r := range br {
		err = errors.Join(err, r.Err)
	}
	return err
}

// noThrottles checks that neither topic nor any broker keeps a replication throttle.
func (c *cluster) noThrottles(ctx context.Context, topic string) error {
	var left []string
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return err
	}
	for _, rc := range rcs {
		for _, cf := range rc.Configs {
			if (cf.Key == leaderReplicas || cf.Key == followerReplicas) && cf.MaybeValue() != "" && cf.Source == kmsg.ConfigSourceDynamicTopicConfig {
				left = append(left, fmt.Sprintf("%s %s=%s", topic, cf.Key, cf.MaybeValue()))
			}
		}
	}
	bcs, err := c.adm.DescribeBrokerConfigs(ctx, c.liveIDs()...)
	if err != nil {
		return err
	}
	for _, rc := range bcs {
		for _, cf := range rc.Configs {
			if (cf.Key == leaderRate || cf.Key == followerRate) && cf.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				left = append(left, fmt.Sprintf("broker %s %s=%s", rc.Name, cf.Key, cf.MaybeValue()))
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("throttles left: %s", strings.Join(left, "; "))
	}
	return nil
}
