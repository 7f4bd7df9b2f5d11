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

// flakyNudgeJournal is a NudgeJournal that keeps copies, as a durable journal does (a
// failed Record changes nothing), and fails the Record numbered failAt (1-based). It also
// refuses to record a failover, so that a test reaches no controller failover.
type flakyNudgeJournal struct {
	failAt int
	calls  int
	st     *kafka.NudgeState
}

func copyNudge(st *kafka.NudgeState) *kafka.NudgeState {
	if st == nil {
		return nil
	}
	c := *st
	c.Znodes = slices.Clone(st.Znodes)
	return &c
}

func (j *flakyNudgeJournal) State() *kafka.NudgeState { return copyNudge(j.st) }

func (j *flakyNudgeJournal) Record(_ context.Context, st *kafka.NudgeState) error {
	j.calls++
	switch {
	case j.calls == j.failAt:
		return errors.New("journal write failed (test)")
	case st.FailoverStarted:
		return errors.New("journal refuses the failover (test)")
	}
	j.st = copyNudge(st)
	return nil
}

// reorderWhenFree runs b.Reorder, again while it refuses because a reassignment runs on the
// cluster (another test's: zk-nudge refuses then, before it records or writes anything),
// and returns its error.
func reorderWhenFree(t *testing.T, b kafka.Reorderer, orders map[kafka.TopicPartition][]int32) error {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		err := b.Reorder(t.Context(), orders)
		if !errors.Is(err, kafka.ErrReassignmentInProgress) || time.Now().After(deadline) {
			return err
		}
		if i == 0 {
			t.Logf("waiting for a reassignment to end: %v", err)
		}
		time.Sleep(kafka.PollDelay(i)) // a condition only another test's progress changes
	}
}

// replicasOf decodes a topic znode's data and returns partition p's replicas.
func replicasOf(t *testing.T, data string, p int32) []int32 {
	t.Helper()
	z, err := kafka.DecodeTopicZnode([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	r, err := z.Replicas(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Failure path 6: the topic znode write succeeds but recording it (the Record after the
// write) fails. A retry must keep the journaled order before (the znode now holds ours),
// and a rollback must put the original back: by content, since no version was recorded.
func TestNudgeRecordFailsAfterWrite(t *testing.T) {
	env := testenv.Get(t)
	cl := env.Kafka(t, "local")
	zkc := env.ZooKeeper(t)
	caps, err := kafka.Probe(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, retryFirst := range []bool{true, false} {
		name := "rollback"
		if retryFirst {
			name = "retry then rollback"
		}
		t.Run(name, func(t *testing.T) {
			topic := testenv.Name(t, "nudge")
			testenv.CreateTopic(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}}, nil)
			orig, err := kafka.ReadTopicZnode(zkc, stack.KafkaChroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			// Record 1 (before the write) succeeds, record 2 (after it) fails.
			j := &flakyNudgeJournal{failAt: 2}
			sess, held := lockFor(t)
			b, err := kafka.NewZKBackend(kafka.StrategyZKNudge, kafka.ZKConfig{Conn: sess.Conn(), Chroot: stack.KafkaChroot, Writer: held,
				Client: cl, Caps: caps, Nudge: j})
			if err != nil {
				t.Fatal(err)
			}
			orders := map[kafka.TopicPartition][]int32{{Topic: topic, Partition: 0}: {3, 2, 1}}
			if err := reorderWhenFree(t, b, orders); err == nil || !strings.Contains(err.Error(), "journal write failed") {
				t.Fatalf("first attempt = %v, want the failed record", err)
			}
			z, err := kafka.ReadTopicZnode(zkc, stack.KafkaChroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := z.Replicas(0); !slices.Equal(r, []int32{3, 2, 1}) {
				t.Fatalf("the first attempt did not write the znode: %v", r)
			}
			if j.st == nil || len(j.st.Znodes) != 1 || j.st.Znodes[0].Version != 0 {
				t.Fatalf("journal after the first attempt: %+v, want the znode with no version", j.st)
			}
			if retryFirst {
				// The retry stops at recording the failover (this journal refuses it).
				if err := reorderWhenFree(t, b, orders); err == nil || !strings.Contains(err.Error(), "refuses the failover") {
					t.Fatalf("retry = %v, want it to stop at the failover record", err)
				}
				if b.ControllerFailover() {
					t.Fatal("the retry failed the controller over")
				}
			}
			st := j.State()
			if len(st.Znodes) != 1 || st.Znodes[0].Path != orig.Path {
				t.Fatalf("journal: %+v", st)
			}
			if got := replicasOf(t, st.Znodes[0].Before, 0); !slices.Equal(got, []int32{1, 2, 3}) {
				t.Errorf("journaled order before = %v, want the original [1 2 3]", got)
			}
			// Rollback (as the handlers' rollback does it, from the journal).
			done, err := b.RestoreNudgeZnodes(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(done.PutBack, []string{orig.Path}) || len(done.Kept) > 0 || len(done.Unchanged) > 0 {
				t.Errorf("restore: %+v, want %s put back", done, orig.Path)
			}
			if got := done.String(); got != "topic znodes put back: "+orig.Path {
				t.Errorf("restore says %q", got)
			}
			back, err := kafka.ReadTopicZnode(zkc, stack.KafkaChroot, topic)
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range [][]int32{{1, 2, 3}, {2, 3, 1}} {
				if r, _ := back.Replicas(int32(p)); !slices.Equal(r, want) {
					t.Errorf("after the rollback partition %d = %v, want %v", p, r, want)
				}
			}
			if back.Field("topic_id") != orig.Field("topic_id") {
				t.Errorf("topic_id %v, was %v", back.Field("topic_id"), orig.Field("topic_id"))
			}
			if !j.State().Restored {
				t.Error("the journal does not say restored")
			}
			// Again: nothing is ours any more, and nothing claims to be put back.
			again, err := b.RestoreNudgeZnodes(t.Context(), j.State())
			if err != nil || len(again.Kept) > 0 || len(again.PutBack) > 0 {
				t.Fatalf("second restore: %+v, %v", again, err)
			}
			if done, err := b.RestoreNudgeZnodes(t.Context(), j.State()); err != nil || len(done.PutBack) > 0 || !slices.Equal(done.Unchanged, []string{orig.Path}) {
				t.Errorf("third restore: %+v, %v: want %s unchanged", done, err, orig.Path)
			} else if strings.Contains(done.String(), "put back:") {
				t.Errorf("third restore says %q", done.String())
			}
		})
	}
}
