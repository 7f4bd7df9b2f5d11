package check

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kafkamender/kafkamender/deployments/check/generate"
	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// monitoredSeries returns every series the alerting rules and the dashboard query.
func monitoredSeries(t testing.TB) []string {
	t.Helper()
	var names []string
	for _, g := range parseRules(t, readRepoFile(t, generate.RulesFile)).Groups {
		for _, r := range g.Rules {
			e, err := ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("rule %s: %v", r.Alert, err)
			}
			names = append(names, QueriedSeries(e)...)
		}
	}
	for _, e := range dashboardQueries(t) {
		names = append(names, QueriedSeries(e)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestMonitoredMetricsExistInARunningWorker starts a worker (built from the work tree)
// with deployments/local/worker.yaml against the local stack, and checks that every
// metric the alerting rules and the dashboard query is in its /metrics, with the type and
// labels they assume, before any event ran: a query of a metric the worker does not
// export would show "no data" and an alert on it would never fire. Skipped under -short.
func TestMonitoredMetricsExistInARunningWorker(t *testing.T) {
	env := testenv.Get(t) // skips under -short; starts the local stack when it is not running
	if _, err := os.Stat(filepath.Join(repoRoot(t), "internal", "metrics")); err != nil {
		// The metrics the rules and the dashboard query are defined by package
		// internal/metrics, written at the same time as these files; until it is merged
		// most of them do not exist. Once it is, this test runs (and can fail).
		t.Skip("internal/metrics is not in this tree yet: the worker does not export the metrics the rules and the dashboard query")
	}
	env.FreeEventsStream(t)
	queried := monitoredSeries(t)
	bin := buildWorker(t)

	// deployments/local/worker.yaml on a free port, with a consumer and subjects of its own,
	// so that it takes no event of another test (or of a worker run by hand) and does not
	// block their consumers on the work-queue stream.
	addr := testenv.FreeAddr(t)
	consumer := testenv.Name(t, "deploy")
	t.Cleanup(func() {
		js := testenv.JetStream(t, env.NATS(t))
		testenv.DeleteConsumers(context.Background(), js, consumer)
	})
	cfg := derivedConfig(t, testenv.LocalWorkerYAML(t), map[string]any{
		"http.listen":   addr,
		"nats.consumer": consumer,
		"nats.subjects": []string{"kafkamender.events." + consumer + ".>"},
	})
	cfgPath := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Env = config.WithoutOverrides(os.Environ())
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	})

	get := func(path string) (int, []byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return 0, nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	testenv.Eventually(t, 90*time.Second, func() error {
		select {
		case err := <-exited:
			t.Fatalf("worker exited before it was ready: %v", err)
		default:
		}
		code, body, err := get("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	code, page, err := get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	errs, err := CheckExposition(bytes.NewReader(page), queried)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
	t.Logf("%d series queried by the rules and the dashboard, %d problems", len(queried), len(errs))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("worker exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("worker did not exit within 30s of SIGTERM")
	}
}

// derivedConfig returns a worker configuration with some keys set, by their dotted YAML
// paths; each must exist already. Comments and the rest of the file are kept.
func derivedConfig(t testing.TB, data []byte, set map[string]any) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for path, value := range set {
		node := &doc
		if node.Kind == yaml.DocumentNode {
			node = node.Content[0]
		}
		for _, key := range strings.Split(path, ".") {
			node = mappingValue(node, key)
			if node == nil {
				t.Fatalf("derived config: no key %s", path)
			}
		}
		var v yaml.Node
		if err := v.Encode(value); err != nil {
			t.Fatal(err)
		}
		*node = v
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mappingValue returns the value of key in a mapping node, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
