package main

// Scenario rf: a topic with data raised from 2 to 3 replicas, the same throttle for both
// contenders; time, and bytes copied against the minimum.

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/events"
)

// rfPartitions is the partition count of the replication-factor scenario's topic.
const rfPartitions = 8

// rfAssignment spreads rfPartitions partitions of 2 replicas over brokers, round robin.
func rfAssignment(brokers []int32) [][]int32 {
	out := make([][]int32, rfPartitions)
	for i := range out {
		out[i] = []int32{brokers[i%len(brokers)], brokers[(i+1)%len(brokers)]}
	}
	return out
}

// copied is the bytes a change of replica lists copies: each partition's size once for
// each replica it gains.
func copied(sizes map[int32]int64, before, after map[int32][]int32) int64 {
	var n int64
	for p, a := range after {
		for _, r := range a {
			if !slices.Contains(before[p], r) {
				n += sizes[p]
			}
		}
	}
	return n
}

// fill writes mb MiB of incompressible records spread evenly over the topic's partitions.
func (c *cluster) fill(ctx context.Context, topic string, partitions, mb int) error {
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer pcl.Close()
	const size = 64 << 10
	var recs []*kgo.Record
	for i := range mb << 20 / size {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: v})
		if len(recs) == 64 {
			if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
	return pcl.ProduceSync(ctx, recs...).FirstErr()
}

// partitionsOf is every partition of the scenario's topic.
func partitionsOf(topic string) kadm.TopicsSet {
	set := kadm.TopicsSet{}
	for p := range int32(rfPartitions) {
		set.Add(topic, p)
	}
	return set
}

// sizes returns each partition's size, the largest of its replicas'.
func (c *cluster) sizes(ctx context.Context, topic string) (map[int32]int64, error) {
	all, err := c.adm.DescribeAllLogDirs(ctx, partitionsOf(topic))
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, ds := range all {
		if err := ds.Error(); err != nil {
			return nil, err
		}
		ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				out[p.Partition] = max(out[p.Partition], p.Size)
			}
		})
	}
	return out, nil
}

// assignment reads topic's replica lists.
func (c *cluster) assignment(ctx context.Context, topic string) (map[int32][]int32, error) {
	ps, err := c.read(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32][]int32{}
	for p, pl := range ps {
		out[p] = pl.replicas
	}
	return out, nil
}

// kafkaAssignment is the assignment Kafka's controller gives a new topic of partitions
// partitions at factor rf: a scratch topic is created, read and deleted. Kafka's
// --generate keeps a topic's factor, so this is how its own assignment code is asked for
// a fresh assignment at the new factor.
func (c *cluster) kafkaAssignment(ctx context.Context, scratch string, partitions int32, rf int16) (map[int32][]int32, error) {
	if _, err := c.adm.CreateTopic(ctx, partitions, rf, nil, scratch); err != nil {
		return nil, fmt.Errorf("scratch topic %s: %w", scratch, err)
	}
	var out map[int32][]int32
	err := until(ctx, time.Minute, "scratch topic listed", func(ctx context.Context) error {
		a, err := c.assignment(ctx, scratch)
		if err == nil && len(a) != int(partitions) {
			err = fmt.Errorf("%d of %d partitions", len(a), partitions)
		}
		out = a
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, c.deleteTopic(ctx, scratch)
}

// raise: rf-mb MiB in a topic of 8 partitions at factor 2 on cluster c, raised to 3.
func (b *bench) raise(ctx context.Context, c *cluster) error {
	who := []string{kafkamender, cli}
	times := map[string][]time.Duration{}
	bytes := map[string][]float64{}
	var minimum []float64
	for r := range b.opts.runs {
		for _, contender := range order(r, who) {
			topic := fmt.Sprintf("bench-rf-%s-%s-%d-%s", c.Name, tag(contender), r, b.stamp)
			start0 := rfAssignment(c.brokerIDs())
			if err := c.createTopic(ctx, topic, start0); err != nil {
				return err
			}
			if err := c.fill(ctx, topic, rfPartitions, b.opts.rfMB); err != nil {
				return err
			}
			sizes, err := c.sizes(ctx, topic)
			if err != nil {
				return err
			}
			before, err := c.assignment(ctx, topic)
			if err != nil {
				return err
			}
			var total int64
			for _, s := range sizes {
				total += s
			}
			var d time.Duration
			after := map[int32][]int32{}
			switch contender {
			case kafkamender:
				id := fmt.Sprintf("rf-%s-%d-%s", c.Name, r, b.stamp)
				start := time.Now()
				res, _, err := b.nats.event(ctx, c.Name, events.TypeReplicaChangeRequested, id, map[string]any{
					"topic": topic, "replication_factor": 3, "throttle_bytes_per_sec": b.opts.throttle, "reason": "bench"})
				d = time.Since(start)
				if err != nil {
					return err
				}
				if res.Status != events.StatusSucceeded {
					return fmt.Errorf("rf %s: %s %s", id, res.Status, res.Error)
				}
				for p, a := range before {
					after[p] = a
				}
				for _, ch := range res.Changes {
					after[ch.Partition] = ch.ReplicasAfter
				}
			case cli:
				target, err := c.kafkaAssignment(ctx, fmt.Sprintf("bench-rfscratch-%s-%d-%s", c.Name, r, b.stamp), rfPartitions, 3)
				if err != nil {
					return err
				}
				after = target
				start := time.Now()
				err = cliAssign(ctx, c, b.dir, topic, target, b.opts.throttle)
				d = time.Since(start)
				if err != nil {
					return err
				}
			}
			// Both: every partition at 3 replicas, as the contender says, none reassigning.
			now, err := c.assignment(ctx, topic)
			if err != nil {
				return err
			}
			for p, a := range after {
				if len(a) != 3 || !slices.Equal(now[p], a) {
					return fmt.Errorf("rf %s, %s: partition %d has %v, want %v (3 replicas)", topic, contender, p, now[p], a)
				}
			}
			if n, err := c.reassigning(ctx, partitionsOf(topic)); err != nil || n > 0 {
				return fmt.Errorf("rf %s, %s: reassignments still listed (%d) or unreadable: %v", topic, contender, n, err)
			}
			n := copied(sizes, before, after)
			times[contender] = append(times[contender], d)
			bytes[contender] = append(bytes[contender], float64(n)/float64(total))
			minimum = append(minimum, float64(total)/(1<<20))
			b.logf("rf %s %-13s run %d: %s, copied %.1f MiB (minimum %.1f MiB)", c.Name, contender, r+1, short(d), float64(n)/(1<<20), float64(total)/(1<<20))
			if err := c.deleteTopic(ctx, topic); err != nil {
				return err
			}
		}
	}
	km, cl := summarize(times[kafkamender]), summarize(times[cli])
	kb, cb, m := summarizeF(bytes[kafkamender]), summarizeF(bytes[cli]), summarizeF(minimum)
	b.rows = append(b.rows, []string{
		fmt.Sprintf("replication factor 2 → 3, %d partitions, %s MiB of data, throttle %d MiB/s", rfPartitions, m.format("%.0f"), b.opts.throttle>>20),
		clusterLabel(c),
		fmt.Sprintf("%s; copied %s× the minimum", km, kb.format("%.2f")),
		fmt.Sprintf("%s; copied %s× the minimum", cl, cb.format("%.2f")),
		"", "", ratio(km, cl), ""})
	b.notes = append(b.notes, "replication factor: the CLI executes (with --throttle, then --verify until done) the assignment Kafka's controller "+
		"gave a scratch topic of the same partition count at factor 3 (created, read, deleted before the clock starts), since --generate keeps the current factor; "+
		"the minimum is each partition's size once (one new replica each); bytes copied are partition sizes × replicas added.")
	return nil
}

// cliAssign executes assignment on topic with kafka-reassign-partitions --execute
// --throttle (without --throttle when throttle is 0), then --verify until it says every
// partition is complete (which also removes the throttle).
func cliAssign(ctx context.Context, c *cluster, dir, topic string, assignment map[int32][]int32, throttle int64) error {
	f, err := writeReassignment(dir, topic+"-reassign", topic, assignment)
	if err != nil {
		return err
	}
	boot := strings.Join(c.Bootstrap(), ",")
	args := []string{"--bootstrap-server", boot, "--reassignment-json-file", f, "--execute"}
	if throttle > 0 {
		args = append(args, "--throttle", fmt.Sprint(throttle))
	}
	if _, err := c.java(ctx, reassignClass, args...); err != nil {
		return err
	}
	deadline := time.Now().Add(verifyTimeout)
	for {
		out, err := c.java(ctx, reassignClass, "--bootstrap-server", boot, "--reassignment-json-file", f, "--verify")
		if err != nil {
			return err
		}
		if reassignmentDone(out) {
			return nil
		}
		// As in cliReorder: a broker's metadata may lag the controller; run --verify again.
		if time.Now().After(deadline) {
			return fmt.Errorf("--verify: not complete within %s:\n%s", verifyTimeout, lastLines(out, 10))
		}
	}
}

// writeReassignment writes assignment of topic as a --reassignment-json-file, dir/name.json.
func writeReassignment(dir, name, topic string, assignment map[int32][]int32) (string, error) {
	type part struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	}
	var parts []part
	for p, r := range assignment {
		parts = append(parts, part{topic, p, r})
	}
	slices.SortFunc(parts, func(a, b part) int { return int(a.Partition - b.Partition) })
	f := filepath.Join(dir, name+".json")
	return f, writeJSON(f, map[string]any{"version": 1, "partitions": parts})
}
