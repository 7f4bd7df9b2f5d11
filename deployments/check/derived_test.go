package check

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// TestDerivedConfig: the configuration the integration test gives its worker is
// deployments/local/worker.yaml with the listener, the consumer and the subjects changed,
// and still valid.
func TestDerivedConfig(t *testing.T) {
	local := testenv.LocalWorkerYAML(t)
	data := derivedConfig(t, local, map[string]any{
		"http.listen":   "127.0.0.1:40123",
		"nats.consumer": "deploy-x",
		"nats.subjects": []string{"kafkamender.events.deploy-x.>"},
	})
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	orig, err := config.Parse(local)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.Listen != "127.0.0.1:40123" || cfg.NATS.Consumer != "deploy-x" || !slices.Equal(cfg.NATS.Subjects, []string{"kafkamender.events.deploy-x.>"}) {
		t.Errorf("derived: listen %s, consumer %s, subjects %v", cfg.HTTP.Listen, cfg.NATS.Consumer, cfg.NATS.Subjects)
	}
	if !slices.Equal(cfg.ClusterNames(), orig.ClusterNames()) || cfg.NATS.URL != orig.NATS.URL {
		t.Errorf("derived: clusters %v, nats %s; want those of worker.yaml", cfg.ClusterNames(), cfg.NATS.URL)
	}
	if !bytes.Contains(data, []byte("# ")) {
		t.Error("derived config lost the comments")
	}
}
