package faults_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/alertmanager"
	"github.com/kafkamender/kafkamender/internal/certs"
	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The webhook as it runs beyond loopback: on a listener of its own, over TLS, behind a
// bearer token. A real Alertmanager, configured as docs/alertmanager.md says
// (http_config.authorization with credentials_file, tls_config with the CA), reaches it
// and the broker is shed once; a request without the token gets 401 and publishes nothing.
func TestAlertmanagerWithCredentialsToWorker(t *testing.T) {
	env := testenv.Get(t)
	f := newFleet(t, env)
	dir := t.TempDir()
	ca, err := certs.NewCA("webhook test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("kafkamender webhook", []string{"127.0.0.1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile, tokenFile := filepath.Join(dir, "webhook.pem"), filepath.Join(dir, "webhook-key.pem"),
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "token")
	if err := server.WritePEM(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	token := testenv.Name(t, "tok")
	for path, data := range map[string][]byte{caFile: ca.CertPEM, tokenFile: []byte(token + "\n")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webhook := testenv.FreeAddr(t)
	cfg := strings.Replace(f.config("a", testenv.FreeAddr(t)), "alertmanager:\n  rules:", fmt.Sprintf(
		"alertmanager:\n  listen: %s\n  tls: {cert_file: %s, key_file: %s}\n  bearer_token_file: %s\n  rules:",
		webhook, certFile, keyFile, tokenFile), 1)
	startProc(t, "a", cfg)

	// Alertmanager, as docs/alertmanager.md configures it.
	amAddr := testenv.FreeAddr(t)
	amConfig := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(amConfig, fmt.Appendf(nil, `route:
  receiver: kafkamender
  group_by: [alertname, cluster, broker_id]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: kafkamender
    webhook_configs:
      - url: https://%s/v1/alertmanager
        send_resolved: false
        max_alerts: 1000
        http_config:
          authorization:
            credentials_file: %s
          tls_config:
            ca_file: %s
`, webhook, tokenFile, caFile), 0o600); err != nil {
		t.Fatal(err)
	}
	am := exec.Command(env.Stack.AlertmanagerBinary(), "--config.file="+amConfig, "--storage.path="+filepath.Join(dir, "am"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=warn")
	amLog, err := os.Create(filepath.Join(dir, "alertmanager.log"))
	if err != nil {
		t.Fatal(err)
	}
	am.Stdout, am.Stderr = amLog, amLog
	if err := am.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = am.Process.Kill()
		_ = am.Wait()
		amLog.Close()
		if t.Failed() {
			out, _ := os.ReadFile(amLog.Name())
			t.Logf("alertmanager's log:\n%s", out)
		}
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + amAddr + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("alertmanager: %s", resp.Status)
		}
		return nil
	})

	// Without the token: 401, nothing published.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}, Timeout: 10 * time.Second}
	topic := f.local.topic("amtls", [][]int32{{2, 1, 3}, {2, 3, 4}}, 0, nil)
	labels := map[string]string{"alertname": "KafkaBrokerOverloaded", "cluster": f.local.alias, "broker_id": "2", "topic": topic}
	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	body, _ := json.Marshal(map[string]any{"version": "4", "status": "firing", "alerts": []map[string]any{{"status": "firing", "labels": labels,
		"startsAt": startsAt.Add(-time.Hour).Format(time.RFC3339Nano), "fingerprint": alertmanager.Fingerprint(labels)}}})
	testenv.Eventually(t, 30*time.Second, func() error { // the worker's listener is up
		resp, err := client.Post("https://"+webhook+alertmanager.Path, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without the token: %s, want 401", resp.Status)
		}
		return nil
	})
	before := f.local.partitions(topic)

	// Through Alertmanager: published, the broker shed.
	postToAlertmanagerAt(t, "http://"+amAddr, []map[string]any{{"labels": labels, "startsAt": startsAt.Format(time.RFC3339Nano)}})
	id := alertmanager.ID(alertmanager.Alert{Fingerprint: alertmanager.Fingerprint(labels), StartsAt: startsAt})
	res := f.local.storedWithin(id, 2*time.Minute)
	if res.Status != events.StatusSucceeded || len(res.Changes) != 2 {
		t.Fatalf("result of the alert's event: %s (%s), %d changes", res.Status, res.Error, len(res.Changes))
	}
	f.local.shedFrom(topic, 2)
	f.local.oneStored(id)
	// The request without the token changed nothing: the only change is the event's.
	if len(before) != 2 || before[0].Leader != 2 || before[1].Leader != 2 {
		t.Errorf("the refused request changed %s: %v", topic, before)
	}
	f.local.noLeftovers([]string{topic}, nil)
}
