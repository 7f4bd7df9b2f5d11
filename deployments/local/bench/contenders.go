package main

// The three ways to make a reorder-and-elect change (a demotion, a preferred leader):
// kafkamender (an event on NATS, its verified result), Kafka's CLIs from the jars the
// stack runs, and the floor (franz-go's kadm, the fewest requests that do it).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/plan"
)

const (
	kafkamender = "kafkamender"
	cli         = "Kafka CLIs"
	floor       = "floor (kadm)"
)

// floorReorder applies p with one AlterPartitionReassignments of every reorder, waits
// until no reassignment of the topic is listed, elects the preferred leaders in one
// ElectLeaders, and waits until the metadata agrees.
func floorReorder(ctx context.Context, c *cluster, topic string, p plan.Plan) error {
	req := kadm.AlterPartitionAssignmentsReq{}
	for tp, r := range p.Reorders() {
		req.Assign(tp.Topic, tp.Partition, r)
	}
	if len(req) > 0 {
		resp, err := c.adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return err
		}
		if err := resp.Error(); err != nil {
			return err
		}
		set := kadm.TopicsSet{}
		for tp := range p.Reorders() {
			set.Add(tp.Topic, tp.Partition)
		}
		if err := until(ctx, 5*time.Minute, "no reassignment listed", func(ctx context.Context) error {
			n, err := c.reassigning(ctx, set)
			if err == nil && n > 0 {
				err = fmt.Errorf("%d reassignments listed", n)
			}
			return err
		}); err != nil {
			return err
		}
	}
	if el := p.Elections(); len(el) > 0 {
		set := kadm.TopicsSet{}
		for _, tp := range el {
			set.Add(tp.Topic, tp.Partition)
		}
		res, err := c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return err
		}
		for _, ps := range res {
			for _, r := range ps {
				if r.Err != nil && r.Err != kerr.ElectionNotNeeded {
					return fmt.Errorf("elect %s-%d: %w", r.Topic, r.Partition, r.Err)
				}
			}
		}
	}
	return c.waitShows(ctx, topic, p)
}

// cliReorder makes the change as an operator would with Kafka's own tools, each a JVM
// started as kafka-run-class.sh starts it: kafka-reassign-partitions --execute with the
// planned replica lists, --verify until it says every partition is complete,
// kafka-leader-election --election-type PREFERRED for the partitions whose leader moves,
// then the same wait as the floor's for the metadata to agree.
func cliReorder(ctx context.Context, c *cluster, dir, topic string, p plan.Plan) error {
	type part struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas,omitempty"`
	}
	var reassign, elect []part
	for _, ch := range p.Changes {
		if ch.Reordered() {
			reassign = append(reassign, part{ch.Topic, ch.Partition, ch.ReplicasAfter})
		}
	}
	for _, tp := range p.Elections() {
		elect = append(elect, part{Topic: tp.Topic, Partition: tp.Partition})
	}
	rf := filepath.Join(dir, topic+"-reassign.json")
	ef := filepath.Join(dir, topic+"-elect.json")
	if err := writeJSON(rf, map[string]any{"version": 1, "partitions": reassign}); err != nil {
		return err
	}
	if err := writeJSON(ef, map[string]any{"partitions": elect}); err != nil {
		return err
	}
	boot := strings.Join(c.Bootstrap(), ",")
	if len(reassign) > 0 {
		if _, err := c.java(ctx, reassignClass, "--bootstrap-server", boot, "--reassignment-json-file", rf, "--execute"); err != nil {
			return err
		}
		deadline := time.Now().Add(verifyTimeout)
		for {
			out, err := c.java(ctx, reassignClass, "--bootstrap-server", boot, "--reassignment-json-file", rf, "--verify")
			if err != nil {
				return err
			}
			if reassignmentDone(out) {
				break
			}
			// "There is no active reassignment of partition …, but replica set is … rather than
			// …": on KRaft the controller finishes a reorder at once, and the broker --verify
			// describes the topic on may not show it yet. An operator runs --verify again.
			if time.Now().After(deadline) {
				return fmt.Errorf("--verify: not complete within %s:\n%s", verifyTimeout, lastLines(out, 10))
			}
		}
	}
	if len(elect) > 0 {
		if _, err := c.java(ctx, electClass, "--bootstrap-server", boot, "--election-type", "PREFERRED", "--path-to-json-file", ef); err != nil {
			return err
		}
	}
	return c.waitShows(ctx, topic, p)
}

// reassigning counts the partitions of set under reassignment.
func (c *cluster) reassigning(ctx context.Context, set kadm.TopicsSet) (int, error) {
	l, err := c.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ps := range l { // Kafka lists only the partitions under reassignment
		n += len(ps)
	}
	return n, nil
}

// verifyTimeout bounds the --verify loop of the CLI workflow.
const verifyTimeout = 5 * time.Minute

const (
	reassignClass = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	electClass    = "org.apache.kafka.tools.LeaderElectionCommand"
)

// java runs one of Kafka's tools with the JVM options kafka-run-class.sh gives it, from
// the cluster's classpath, and returns its standard output.
func (c *cluster) java(ctx context.Context, class string, args ...string) (string, error) {
	argv := append([]string{"-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
		"-cp", c.classpath, class}, args...)
	cmd := exec.CommandContext(ctx, javaBinary(), argv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s%s", class, strings.Join(args, " "), err, out, lastLines(stderr.String(), 20))
	}
	return string(out), nil
}

func javaBinary() string {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return filepath.Join(home, "bin", "java")
	}
	return "java"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func writeJSON(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// nats is the bench's connection to the stack's NATS, as an alerting system has it.
type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// event publishes an event of type typ with data about cluster and waits for its result:
// kafkamender's whole path, as the caller sees it. It returns the result and when it was
// heard (a core NATS subscription on the result subject, made before publishing).
func (n *natsConn) event(ctx context.Context, clusterName, typ, id string, data any) (*events.Result, time.Time, error) {
	body, err := eventBody(typ, id, "bench", data)
	if err != nil {
		return nil, time.Time{}, err
	}
	return n.await(ctx, id, func() error {
		msg := &nats.Msg{Subject: events.Subject(clusterName, typ), Data: body, Header: nats.Header{}}
		msg.Header.Set("Content-Type", events.ContentTypeCloudEventsJSON)
		if _, err := n.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(events.EventsStream)); err != nil {
			return fmt.Errorf("publish %s: %w", id, err)
		}
		return nil
	})
}

// eventBody is an event of type typ with data, as a publisher sends it: a CloudEvents 1.0
// JSON envelope (structured mode).
func eventBody(typ, id, source string, data any) ([]byte, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	env := events.Envelope{SpecVersion: events.SpecVersion, ID: id, Source: source, Type: typ,
		Time: time.Now().UTC(), DataContentType: events.ContentTypeJSON, Data: raw}
	return json.Marshal(env)
}

// await subscribes to the result of event id, calls send (which makes the event: a
// publication on NATS, or an alert the worker's webhook turns into it), and waits for the
// result. It returns the result and when it was heard.
func (n *natsConn) await(ctx context.Context, id string, send func() error) (*events.Result, time.Time, error) {
	sub, err := n.nc.SubscribeSync(events.ResultSubject(id))
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := n.nc.Flush(); err != nil {
		return nil, time.Time{}, err
	}
	if err := send(); err != nil {
		return nil, time.Time{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	m, err := sub.NextMsgWithContext(wctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("result of %s: %w", id, err)
	}
	heard := time.Now()
	var res events.Result
	if err := json.Unmarshal(m.Data, &res); err != nil {
		return nil, time.Time{}, fmt.Errorf("result of %s: %w", id, err)
	}
	if res.Truncated == nil {
		return &res, heard, nil
	}
	// Too large for one message, the result came as its head; it is whole in the stream.
	stream, err := n.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("result of %s: %w", id, err)
	}
	whole, _, err := pipeline.ReadWhole(ctx, stream, m.Data)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("result of %s: %w", id, err)
	}
	return whole, heard, nil
}

// didPlan checks that kafkamender's result says it made exactly the change p plans.
func didPlan(res *events.Result, p plan.Plan) error {
	if res.Status != events.StatusSucceeded {
		return fmt.Errorf("result %s: %s %s", res.ID, res.Status, res.Error)
	}
	got := plan.Plan{Changes: res.Changes}
	if !sameTarget(targetOf(got), targetOf(p)) || len(res.Skipped) > 0 {
		return fmt.Errorf("result %s: %d changes, %d skipped; not the %d planned (first planned %v)", res.ID, len(res.Changes), len(res.Skipped), len(p.Changes), first(p))
	}
	return nil
}

func first(p plan.Plan) any {
	if len(p.Changes) == 0 {
		return nil
	}
	return p.Changes[0]
}
