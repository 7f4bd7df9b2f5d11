package kafka_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// nudgeLog is a NudgeJournal in memory that counts its records.
type nudgeLog struct {
	st      *kafka.NudgeState
	records int
}

func (n *nudgeLog) State() *kafka.NudgeState { return n.st }
func (n *nudgeLog) Record(_ context.Context, st *kafka.NudgeState) error {
	n.st = st
	n.records++
	return nil
}

// An event whose one controller failover already happened never deletes /controller
// again: when the order is not applied, the topic znode is put back (version-checked) and
// the reorder fails with ErrNudgeNotApplied, permanently.
func TestNudgeNeverFailsOverTwice(t *testing.T) {
	env := testenv.Get(t)
	cl := env.Kafka(t, "local")
	zk := env.ZooKeeper(t)
	topic := testenv.Name(t, "nudge")
	testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}}, nil)
	z, err := kafka.ReadTopicZnode(zk, stack.KafkaChroot, topic)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := z.Encode()
	ctrl, err := kafka.ReadController(zk, stack.KafkaChroot)
	if err != nil {
		t.Fatal(err)
	}
	// An earlier attempt of the event wrote the znode and (the journal says) failed the
	// controller over; the controller did not take the order (here: no failover happened
	// since the write, so it ignores it).
	z.SetReplicas(0, []int32{3, 2, 1})
	ours, _ := z.Encode()
	stat, err := zk.Set(z.Path, ours, z.Stat.Version)
	if err != nil {
		t.Fatal(err)
	}
	epoch := controllerEpoch(t, zk)
	j := &nudgeLog{st: &kafka.NudgeState{ControllerEpoch: epoch - 1, FailoverStarted: true,
		Znodes: []kafka.NudgeZnode{{Path: z.Path, Before: string(before), After: string(ours), Version: stat.Version}}}}
	sess, held := lockFor(t)
	caps, err := kafka.Probe(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kafka.NewZKBackend(kafka.StrategyZKNudge, kafka.ZKConfig{Conn: sess.Conn(), Chroot: stack.KafkaChroot, Writer: held,
		Client: cl, Caps: caps, Nudge: j, NudgeApplyWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Reorder(t.Context(), map[kafka.TopicPartition][]int32{{Topic: topic, Partition: 0}: {3, 2, 1}})
	if !errors.Is(err, kafka.ErrNudgeNotApplied) || retry.IsTransient(err) {
		t.Fatalf("reorder after the failover: %v, want ErrNudgeNotApplied (permanent)", err)
	}
	after, err := kafka.ReadController(zk, stack.KafkaChroot)
	if err != nil {
		t.Fatal(err)
	}
	if after.Stat.Czxid != ctrl.Stat.Czxid || controllerEpoch(t, zk) != epoch {
		t.Fatalf("/controller was deleted again (epoch %d -> %d)", epoch, controllerEpoch(t, zk))
	}
	if !b.ControllerFailover() || !j.st.Restored {
		t.Errorf("failover %v, restored %v", b.ControllerFailover(), j.st.Restored)
	}
	z2, err := kafka.ReadTopicZnode(zk, stack.KafkaChroot, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := z2.Replicas(0); !slices.Equal(r, []int32{1, 2, 3}) || z2.Field("topic_id") != z.Field("topic_id") {
		t.Fatalf("topic znode after: %v (topic_id %v)", r, z2.Field("topic_id"))
	}
}

func controllerEpoch(t *testing.T, conn *zk.Conn) int64 {
	t.Helper()
	data, _, err := conn.Get(stack.KafkaChroot + "/controller_epoch")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
