package kafka_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// recordingWriter is a FencedWriter that records the transactions it is given.
type recordingWriter struct {
	mu  sync.Mutex
	ops []any
}

func (w *recordingWriter) Multi(_ context.Context, ops ...any) ([]zk.MultiResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, ops...)
	return make([]zk.MultiResponse, len(ops)), nil
}

func (w *recordingWriter) created() []*zk.CreateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*zk.CreateRequest
	for _, op := range w.ops {
		if c, ok := op.(*zk.CreateRequest); ok {
			out = append(out, c)
		}
	}
	return out
}

// The admin znodes the ZooKeeper strategies create get the ACL of /admin, as Kafka gives
// them: its controller rewrites and deletes them, whatever identity the worker has.
func TestAdminZnodesTakeTheParentsACL(t *testing.T) {
	fake := testenv.StartFakeZooKeeper(t)
	kafkaACL := []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: "kafka"}, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}
	fake.SetACL("/secured/admin", kafkaACL)
	fake.SetACL("/open/admin", zk.WorldACL(zk.PermAll))
	for _, chroot := range []string{"/secured", "/open", "/missing"} { // a ZooKeeper controller is in charge
		fake.SetData(chroot+"/controller", []byte(`{"version":2,"brokerid":1,"timestamp":"1","kraftControllerEpoch":-1}`))
	}
	conn, _, err := zk.Connect([]string{fake.Addr}, 3*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	targets := map[kafka.TopicPartition][]int32{{Topic: "orders", Partition: 0}: {2, 1}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	tests := []struct {
		name, chroot, want string
		submit             func(w kafka.FencedWriter, chroot string) error
	}{
		{"reassignment, secured", "/secured", "sasl:kafka:cdrwa, world:anyone:r", func(w kafka.FencedWriter, chroot string) error {
			return kafka.SubmitZKReassignment(ctx, conn, chroot, w, targets)
		}},
		{"reassignment, open", "/open", "world:anyone:cdrwa", func(w kafka.FencedWriter, chroot string) error {
			return kafka.SubmitZKReassignment(ctx, conn, chroot, w, targets)
		}},
		{"preferred election, secured", "/secured", "sasl:kafka:cdrwa, world:anyone:r", func(w kafka.FencedWriter, chroot string) error {
			b, err := kafka.NewZKBackend(kafka.StrategyZKReassign, kafka.ZKConfig{Conn: conn, Chroot: chroot, Writer: w, Client: cl})
			if err != nil {
				return err
			}
			_, err = b.ElectPreferred(ctx, []kafka.TopicPartition{{Topic: "orders", Partition: 0}})
			return err // the election's outcome is read from znodes the fake does not have
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &recordingWriter{}
			if err := tt.submit(w, tt.chroot); err != nil {
				t.Fatal(err)
			}
			created := w.created()
			if len(created) != 1 || !strings.HasPrefix(created[0].Path, tt.chroot+"/admin/") {
				t.Fatalf("created %+v", created)
			}
			if got := testenv.FormatACL(created[0].Acl); got != tt.want {
				t.Errorf("%s created with ACL %s, want %s", created[0].Path, got, tt.want)
			}
		})
	}

	err = kafka.SubmitZKReassignment(ctx, conn, "/missing", &recordingWriter{}, targets)
	if err == nil || !strings.Contains(err.Error(), "read the ACL of /missing/admin") {
		t.Errorf("without /admin: %v", err)
	}
}
