package main

// The demo's Kafka topics, what it shows of them, and the ZooKeeper-mode controller.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/stack"
)

// piledAssignment is the assignment of a topic of 8 partitions, 3 replicas each, whose
// preferred leader is broker b in 6 of them; the other brokers of brokers (three) each
// have one partition's worth of candidates more than they need, so that a shed of b can
// be balanced.
func piledAssignment(b int32, brokers []int32) [][]int32 {
	o := slices.DeleteFunc(slices.Clone(brokers), func(id int32) bool { return id == b })
	return [][]int32{
		{b, o[0], o[1]}, {b, o[1], o[2]}, {b, o[2], o[0]},
		{b, o[0], o[2]}, {b, o[1], o[0]}, {b, o[2], o[1]},
		{o[0], o[1], b}, {o[1], o[2], b},
	}
}

// countHeads is how many partitions of assignment broker b heads.
func countHeads(assignment [][]int32, b int32) int {
	n := 0
	for _, r := range assignment {
		if r[0] == b {
			n++
		}
	}
	return n
}

// createTopic creates topic with assignment and waits until each partition is led by
// the head of its replicas with all of them in sync. A topic of the same name still
// being deleted is waited for.
func createTopic(ctx context.Context, cl *kgo.Client, topic string, assignment [][]int32) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := kafka.CreateTopic(ctx, cl, topic, assignment, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		if err := pause(ctx, 300*time.Millisecond); err != nil {
			return fmt.Errorf("create %s: an earlier %s is still being deleted: %w", topic, topic, err)
		}
	}
	for {
		ps, err := partitions(ctx, cl, topic)
		if err == nil && placed(ps, assignment) {
			return nil
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("%s: not every partition led by its first replica with all in sync: %w", topic, err)
		}
	}
}

// placed reports whether partitions ps are as assignment says, led by the first replica,
// with every replica in sync.
func placed(ps []model.Partition, assignment [][]int32) bool {
	if len(ps) != len(assignment) {
		return false
	}
	for i, p := range ps {
		if !slices.Equal(p.Replicas, assignment[i]) || p.Leader != assignment[i][0] || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return true
}

// deleteTopics deletes those of names that exist, waits until they are gone, and
// returns them.
func deleteTopics(ctx context.Context, adm *kadm.Client, names ...string) ([]string, error) {
	existing := func() ([]string, error) {
		td, err := adm.ListTopics(ctx, names...)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, n := range names {
			if t, ok := td[n]; ok && t.Err == nil {
				out = append(out, n)
			}
		}
		return out, nil
	}
	there, err := existing()
	if err != nil || len(there) == 0 {
		return nil, err
	}
	resp, err := adm.DeleteTopics(ctx, there...)
	if err != nil {
		return nil, err
	}
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("delete %s: %w", r.Topic, r.Err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		left, err := existing()
		if err == nil && len(left) == 0 {
			return there, nil
		}
		if err := pause(wctx, 200*time.Millisecond); err != nil {
			return nil, fmt.Errorf("deleting %s: still there: %w", strings.Join(left, ", "), err)
		}
	}
}

// partitions reads topic's partitions, in partition order.
func partitions(ctx context.Context, cl *kgo.Client, topic string) ([]model.Partition, error) {
	snap, err := kafka.ReadSnapshot(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	if err := snap.Missing[topic]; err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	return snap.Topics[topic], nil
}

// leaderCounts is how many partitions of topic each broker leads.
func leaderCounts(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int, error) {
	ps, err := partitions(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	n := map[int32]int{}
	for _, p := range ps {
		n[p.Leader]++
	}
	return n, nil
}

// printLeaders prints leader counts as a table, a column per broker and a row per count:
//
//	broker        1  2  3  4
//	leads before  1  1  6  0
func printLeaders(brokers []int32, names []string, rows ...map[int32]int) error {
	width := len("broker")
	for _, n := range names {
		width = max(width, len(n))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-*s", width, "broker")
	for _, id := range brokers {
		fmt.Fprintf(&b, "%4d", id)
	}
	b.WriteString("\n")
	for i, row := range rows {
		fmt.Fprintf(&b, "  %-*s", width, names[i])
		for _, id := range brokers {
			fmt.Fprintf(&b, "%4d", row[id])
		}
		b.WriteString("\n")
	}
	_, err := fmt.Print(b.String())
	return err
}

// produce writes bytes of incompressible records to each of the first n partitions of
// topic.
func produce(ctx context.Context, c stack.Cluster, topic string, n, bytes int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := make([]byte, 64<<10)
	_, _ = rand.Read(value)
	var records []*kgo.Record
	for p := range int32(n) {
		for range bytes / len(value) {
			records = append(records, &kgo.Record{Partition: p, Value: value})
		}
	}
	return cl.ProduceSync(ctx, records...).FirstErr()
}

// connectZK connects to the stack's ZooKeeper, quietly.
func connectZK() (*zk.Conn, error) {
	conn, _, err := zk.Connect([]string{stack.ZooKeeperAddr}, 10*time.Second,
		zk.WithLogInfo(false), zk.WithLogger(log.New(io.Discard, "", 0)))
	return conn, err
}

// controller names the controller of the ZooKeeper-mode cluster and its epoch, which
// every new controller increments.
func controller(ctx context.Context, conn *zk.Conn) (string, error) {
	for {
		c, err := kafka.ReadController(conn, stack.KafkaChroot)
		if err == nil {
			epoch, _, err := conn.Get(stack.KafkaChroot + "/controller_epoch")
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("broker %d, controller epoch %s", c.BrokerID, epoch), nil
		}
		if !errors.Is(err, kafka.ErrNoController) {
			return "", err
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return "", fmt.Errorf("no controller: %w", err)
		}
	}
}

// pause waits d, or returns ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// join writes broker ids as "1,2,3".
func join(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// formatMiB writes a size in MiB.
func formatMiB(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
