package alertmanager_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/events"
)

// capture keeps what the bridge publishes.
type capture struct{ msgs []*nats.Msg }

func (c *capture) PublishMsg(_ context.Context, m *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	c.msgs = append(c.msgs, m)
	return &jetstream.PubAck{}, nil
}

// Whatever a caller posts, the bridge never panics, and everything it publishes is an
// event the workers take as it is (Decode accepts it, for a configured cluster).
func FuzzBridge(f *testing.F) {
	cfg, err := config.Parse([]byte(`nats: {url: "nats://127.0.0.1:4222"}
lock: {backend: nats}
clusters:
  local: {bootstrap_servers: ["127.0.0.1:19092"]}
alertmanager:
  rules:
    - {alertname: KafkaBrokerOverloaded, type: broker-overloaded, fields: {broker: broker_id, topics: topics}}
    - {alertname: Skew, type: replica-change-requested, fields: {topic: topic, partitions: partitions, preferred_leader: broker_id}}
    - {alertname: Disk, type: logdir-move-requested, fields: {broker: broker_id, from_dir: dir}}
`))
	if err != nil {
		f.Fatal(err)
	}
	clusters := cfg.ClusterNames()
	for _, seed := range []string{
		notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3", "topics": "a,b"}),
		notification("firing", "Skew", map[string]string{"cluster": "local", "topic": "orders", "partitions": "0,2", "broker_id": "2"}),
		notification("firing", "Disk", map[string]string{"cluster": "local", "broker_id": "1", "dir": "/var/lib/kafka/data-0"}),
		notification("firing", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3", "topics": "<&>"}),
		notification("resolved", "KafkaBrokerOverloaded", map[string]string{"cluster": "local", "broker_id": "3"}),
		`{"version":"4","alerts":[{"status":"firing","labels":{"alertname":"Skew","cluster":"local","topic":"a.b","partitions":"-1","broker_id":"99999999999"},"startsAt":"2026-12-01T10:00:00Z","fingerprint":"x"}]}`,
		`{"version":"4"}`, `[]`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := alertmanager.Decode(body)
		if err != nil {
			return
		}
		pub := &capture{}
		b := alertmanager.New(cfg.Alertmanager, clusters, pub, zap.NewNop(), nil)
		if _, err := b.Handle(t.Context(), n); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		for _, m := range pub.msgs {
			if _, err := events.Decode(m.Subject, m.Header, m.Data, events.DecodeOptions{Clusters: clusters}); err != nil {
				t.Fatalf("published an event the workers reject: %v\n%s %s", err, m.Subject, m.Data)
			}
		}
	})
}
