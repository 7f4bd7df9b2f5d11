package stack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/stack"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// Assignments whose order is not the ascending one Kafka would pick, so that a reader
// that sorts, or a creator that ignores the order, is caught.
var assignments = map[string][][]int32{
	"local":  {{3, 1, 2}, {2, 4, 1}, {4, 3, 2}, {1, 2, 3}, {2, 1, 4}},
	"kraft":  {{3, 1, 2}, {2, 3, 1}, {1, 3, 2}},
	"legacy": {{3, 1, 2}, {2, 3, 1}, {1, 3, 2}},
}

func TestTopicAssignmentRoundTrip(t *testing.T) {
	env := testenv.Get(t)
	for _, cluster := range []string{"local", "kraft", "legacy"} {
		t.Run(cluster, func(t *testing.T) {
			cl := env.Kafka(t, cluster)
			topic := testenv.Name(t, "smoke")
			want := assignments[cluster]
			testenv.CreateTopic(t, cl, topic, want, nil)

			got := testenv.Assignment(t, env.Admin(t, cluster), topic)
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("metadata assignment = %v, want %v (order kept)", got, want)
			}
			c := env.Cluster(t, cluster)
			if c.Mode != stack.ModeZooKeeper {
				return
			}
			raw, _, err := env.ZooKeeper(t).Get(c.Chroot + "/brokers/topics/" + topic)
			if err != nil {
				t.Fatalf("read topic znode: %v", err)
			}
			var znode struct {
				Version    int                `json:"version"`
				TopicID    string             `json:"topic_id"`
				Partitions map[string][]int32 `json:"partitions"`
			}
			if err := json.Unmarshal(raw, &znode); err != nil {
				t.Fatalf("decode topic znode %s: %v", raw, err)
			}
			if hasID := znode.TopicID != ""; hasID != (cluster == "local") { // topic ids came in 2.8
				t.Errorf("Kafka %s wrote topic_id %q: %s", c.Version, znode.TopicID, raw)
			}
			if len(znode.Partitions) != len(want) {
				t.Fatalf("topic znode has %d partitions, want %d: %s", len(znode.Partitions), len(want), raw)
			}
			for p, replicas := range want {
				if zr := znode.Partitions[fmt.Sprint(p)]; !slices.Equal(zr, replicas) {
					t.Errorf("znode partition %d = %v, want %v", p, zr, replicas)
				}
			}
		})
	}
}

func TestProduceConsume(t *testing.T) {
	env := testenv.Get(t)
	for _, cluster := range []string{"local", "kraft", "legacy"} {
		t.Run(cluster, func(t *testing.T) {
			topic := testenv.Name(t, "smoke")
			testenv.CreateTopic(t, env.Kafka(t, cluster), topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})

			producer := env.Kafka(t, cluster, kgo.RequiredAcks(kgo.AllISRAcks()))
			rec := &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("hello " + cluster)}
			if err := producer.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			consumer := env.Kafka(t, cluster, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			fetches := consumer.PollRecords(ctx, 1)
			if errs := fetches.Errors(); len(errs) > 0 {
				t.Fatalf("consume: %v", errs)
			}
			recs := fetches.Records()
			if len(recs) != 1 || string(recs[0].Value) != "hello "+cluster || recs[0].Offset != rec.Offset {
				t.Fatalf("consumed %v, want the produced record at offset %d", recs, rec.Offset)
			}
		})
	}
}

func TestJetStreamPublishConsume(t *testing.T) {
	env := testenv.Get(t)
	js, err := jetstream.New(env.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name(t, "SMOKE")
	subject := name + ".events"
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

	ack, err := js.Publish(t.Context(), subject, []byte("ping"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	cons, err := stream.CreateOrUpdateConsumer(t.Context(), jetstream.ConsumerConfig{Durable: "smoke", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	// A pull right after the consumer's creation can end at once with a status (its
	// leader on the NATS cluster not placed yet): pull again until the message comes.
	var got []string
	testenv.Eventually(t, 20*time.Second, func() error {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			if md.Sequence.Stream != ack.Sequence {
				t.Errorf("message stream sequence %d, publish ack said %d", md.Sequence.Stream, ack.Sequence)
			}
			got = append(got, string(m.Data()))
			if err := m.DoubleAck(t.Context()); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		if len(got) == 0 {
			return fmt.Errorf("no message pulled (%v)", batch.Error())
		}
		return nil
	})
	if len(got) != 1 || got[0] != "ping" {
		t.Fatalf("consumed %q, want [ping]", got)
	}
	// Work-queue retention: the acknowledged message is gone from the stream.
	testenv.Eventually(t, 5*time.Second, func() error {
		info, err := stream.Info(t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("stream still holds %d messages after the ack", info.State.Msgs)
		}
		return nil
	})
}

func TestUpTwiceIsHarmless(t *testing.T) {
	env := testenv.Get(t)
	before, err := env.Stack.Running()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != len(stack.ServerNames()) {
		t.Fatalf("running %v, want every server of %v", before, stack.ServerNames())
	}
	if err := env.Stack.Up(t.Context()); err != nil {
		t.Fatalf("second up: %v", err)
	}
	after, err := env.Stack.Running()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Fatalf("up restarted servers: pids before %v, after %v", before, after)
	}
}

func TestStopStartBroker(t *testing.T) {
	env := testenv.GetExclusive(t)
	for _, tc := range []struct {
		cluster string
		id      int32
	}{{"local", 4}, {"kraft", 3}} {
		t.Run(tc.cluster, func(t *testing.T) {
			c := env.Cluster(t, tc.cluster)
			topic := testenv.Name(t, "smoke")
			cl := env.Kafka(t, tc.cluster)
			assignment := [][]int32{{tc.id, 1, 2}}
			testenv.CreateTopic(t, cl, topic, assignment, nil)
			adm := env.Admin(t, tc.cluster)

			env.StopBroker(t, tc.cluster, tc.id) // waits until metadata drops the broker
			testenv.Eventually(t, 30*time.Second, func() error {
				md, err := adm.Metadata(t.Context(), topic)
				if err != nil {
					return err
				}
				p := md.Topics[topic].Partitions[0]
				if p.Leader == tc.id || slices.Contains(p.ISR, tc.id) {
					return fmt.Errorf("after stopping broker %d: leader %d, isr %v", tc.id, p.Leader, p.ISR)
				}
				return nil
			})
			if err := stack.BrokersListed(t.Context(), c); err == nil {
				t.Fatalf("metadata still lists every broker of %s after stopping %d", tc.cluster, tc.id)
			}

			env.StartBroker(t, tc.cluster, tc.id) // waits until metadata lists it again
			if err := stack.BrokersListed(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 60*time.Second, func() error {
				md, err := adm.Metadata(t.Context(), topic)
				if err != nil {
					return err
				}
				if p := md.Topics[topic].Partitions[0]; !slices.Contains(p.ISR, tc.id) {
					return fmt.Errorf("broker %d not back in the ISR %v", tc.id, p.ISR)
				}
				return nil
			})
		})
	}
}

func TestRestartNATSKeepsStreams(t *testing.T) {
	env := testenv.GetExclusive(t)
	nc := env.NATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name(t, "SMOKE")
	stream, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	if _, err := js.Publish(t.Context(), name+".x", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	env.RestartNATS(t)
	testenv.Eventually(t, 30*time.Second, func() error {
		msg, err := stream.GetLastMsgForSubject(t.Context(), name+".x")
		if err != nil {
			return err
		}
		if string(msg.Data) != "kept" {
			return fmt.Errorf("message %q after restart", msg.Data)
		}
		return nil
	})
	if !nc.IsConnected() {
		t.Fatalf("client did not reconnect: %v", nc.Status())
	}
}

func TestExpireZooKeeperSession(t *testing.T) {
	env := testenv.Get(t) // the proxy only partitions this test's own connection
	proxy := testenv.NewZKProxy(t)
	conn, events, err := zk.Connect([]string{proxy.Addr()}, 2*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	expired := make(chan struct{})
	go func() {
		for ev := range events {
			if ev.State == zk.StateExpired {
				close(expired)
				return
			}
		}
	}()
	testenv.Eventually(t, 10*time.Second, func() error {
		if conn.State() != zk.StateHasSession {
			return fmt.Errorf("state %v", conn.State())
		}
		return nil
	})
	path := "/" + testenv.Name(t, "ephemeral")
	if _, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	observer := env.ZooKeeper(t)
	if ok, _, err := observer.Exists(path); err != nil || !ok {
		t.Fatalf("ephemeral node not visible: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := proxy.ExpireSession(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := observer.Exists(path); err != nil || ok {
		t.Fatalf("ephemeral node of the expired session still exists (%v, %v)", ok, err)
	}
	select {
	case <-expired:
	case <-time.After(20 * time.Second):
		t.Fatalf("client was not told its session expired (state %v)", conn.State())
	}
}

// The legacy cluster is what the ZooKeeper strategies exist for: Kafka 2.3, which has
// ElectLeaders and IncrementalAlterConfigs but no AlterPartitionReassignments (2.4).
func TestLegacyClusterIsPre24(t *testing.T) {
	env := testenv.Get(t)
	versions, err := env.Admin(t, "legacy").ApiVersions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 3 {
		t.Fatalf("%d brokers answered ApiVersions, want 3", len(versions))
	}
	for _, b := range versions {
		if b.Err != nil {
			t.Fatalf("broker %d: %v", b.NodeID, b.Err)
		}
		if _, ok := b.KeyMaxVersion(45); ok {
			t.Errorf("broker %d supports AlterPartitionReassignments: not a pre-2.4 broker", b.NodeID)
		}
		for key, name := range map[int16]string{43: "ElectLeaders", 44: "IncrementalAlterConfigs"} {
			if _, ok := b.KeyMaxVersion(key); !ok {
				t.Errorf("broker %d lacks %s (Kafka 2.3 has it)", b.NodeID, name)
			}
		}
	}
}

// The stack's NATS is a three-node JetStream cluster: a stream of three replicas keeps its
// messages and takes publishes when the node leading it is killed, and the node catches up
// when it is back.
func TestNATSClusterLosesANode(t *testing.T) {
	env := testenv.GetExclusive(t)
	for _, n := range stack.NATSNodes() {
		var varz struct {
			Name    string `json:"server_name"`
			Cluster struct {
				Name string   `json:"name"`
				URLs []string `json:"urls"`
			} `json:"cluster"`
			JetStream struct {
				Meta struct {
					Size int `json:"cluster_size"`
				} `json:"meta"`
			} `json:"jetstream"`
		}
		getJSON(t, n.MonitorURL+"/varz", &varz)
		if varz.Name != n.Name || varz.Cluster.Name != stack.NATSClusterName || varz.JetStream.Meta.Size != 3 {
			t.Errorf("%s /varz: server %q, cluster %q, JetStream meta cluster of %d; want %q, %q, 3",
				n.MonitorURL, varz.Name, varz.Cluster.Name, varz.JetStream.Meta.Size, n.Name, stack.NATSClusterName)
		}
	}

	js, err := jetstream.New(env.NATS(t))
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Name(t, "R3")
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	if _, err := js.Publish(t.Context(), name+".a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	leader := testenv.StreamLeader(t, js, name)
	env.KillNATSNode(t, leader)
	next := testenv.WaitStreamLeaderNot(t, js, name, leader)
	t.Logf("stream %s: leader %s killed, %s leads", name, leader, next)
	testenv.Eventually(t, 30*time.Second, func() error {
		_, err := js.Publish(t.Context(), name+".b", []byte("after"))
		return err
	})
	env.StartNATSNode(t, leader)
	testenv.StreamLeader(t, js, name) // every replica current again, the restarted one too
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	for subj, want := range map[string]string{name + ".a": "before", name + ".b": "after"} {
		msg, err := s.GetLastMsgForSubject(t.Context(), subj)
		if err != nil || string(msg.Data) != want {
			t.Errorf("%s after the leader's loss: %v %v, want %q", subj, msg, err, want)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}
