package events_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The wire contract stands alone: package events imports no Kafka, ZooKeeper or NATS
// client, and the emitter binary links no Kafka or ZooKeeper client (it needs NATS). The
// layers above the cluster backends link none either: the placement model and the planner
// (pure), the journal, the event pipeline and the operation engine (NATS only).
func TestContractStandsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"github.com/kafkamender/kafkamender/internal/events", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk", "github.com/nats-io/nats.go"}},
		{"github.com/kafkamender/kafkamender/cmd/emitter", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk"}},
		{"github.com/kafkamender/kafkamender/internal/model", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk", "github.com/nats-io/nats.go"}},
		{"github.com/kafkamender/kafkamender/internal/plan", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk", "github.com/nats-io/nats.go"}},
		{"github.com/kafkamender/kafkamender/internal/journal", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk"}},
		{"github.com/kafkamender/kafkamender/internal/pipeline", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk"}},
		{"github.com/kafkamender/kafkamender/internal/operation", []string{"github.com/twmb/franz-go", "github.com/go-zookeeper/zk"}},
	} {
		out, err := exec.Command("go", "list", "-deps", tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range tc.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", tc.pkg, dep)
				}
			}
		}
	}
}
