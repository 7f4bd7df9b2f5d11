package alertmanager_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The shipped rule for offline partitions (deployments/local/worker.yaml; Compose and
// Kubernetes have the same) maps no field: the controller's alert names only the cluster,
// and its event covers every partition without a leader, with no unclean election.
func TestShippedOfflinePartitionsRule(t *testing.T) {
	shipped, err := config.Parse(testenv.LocalWorkerYAML(t))
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, func(am *config.Alertmanager) { am.Rules = shipped.Alertmanager.Rules })
	code, out := r.post(notification("firing", "KafkaOfflinePartitions", map[string]string{"cluster": "local"}))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, out)
	}
	var resp alertmanager.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Published) != 1 || resp.Published[0].Subject != events.Subject("local", events.TypePartitionOffline) {
		t.Fatalf("response %s", out)
	}
	ev, _ := r.storedEvent(resp.Published[0].Subject)
	p := ev.Payload.(*events.PartitionOffline)
	if p.Topic != "" || p.Partitions != nil || p.AllowUnclean || p.DryRun || p.Reason == "" {
		t.Errorf("payload %+v: want every offline partition, no unclean election, a reason", p)
	}
}
