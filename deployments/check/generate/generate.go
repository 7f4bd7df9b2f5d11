// Package generate makes the deployment files that are derived rather than written: the
// Grafana dashboard (deployments/grafana/kafkamender.json), from the Go model in
// dashboard.go, and the Kubernetes PrometheusRule (deployments/kubernetes/
// prometheusrule.yaml), from the plain Prometheus rule file. `go run ./cmd/generate` in
// deployments/check writes them; a test fails when the committed files differ.
package generate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Paths of the generated files and of their sources, from the repository root.
const (
	DashboardFile      = "deployments/grafana/kafkamender.json"
	RulesFile          = "deployments/prometheus/kafkamender-rules.yaml"
	PrometheusRuleFile = "deployments/kubernetes/prometheusrule.yaml"
)

// Files returns every generated file's content, by its path from the repository root.
func Files(root string) (map[string][]byte, error) {
	dash, err := DashboardJSON()
	if err != nil {
		return nil, err
	}
	rules, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(RulesFile)))
	if err != nil {
		return nil, err
	}
	pr, err := PrometheusRule(rules)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{DashboardFile: dash, PrometheusRuleFile: pr}, nil
}

// PrometheusRule wraps the groups of a plain Prometheus rule file in a prometheus-operator
// PrometheusRule: the file's leading comment is left out, the rest is indented under
// spec, as it is (comments included).
func PrometheusRule(rules []byte) ([]byte, error) {
	lines := strings.Split(strings.TrimRight(string(rules), "\n"), "\n")
	start := 0
	for start < len(lines) && (strings.HasPrefix(lines[start], "#") || strings.TrimSpace(lines[start]) == "") {
		start++
	}
	if start == len(lines) || !strings.HasPrefix(lines[start], "groups:") {
		return nil, fmt.Errorf("%s: want groups: at the top level after the leading comment", RulesFile)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Generated from %s by go run ./cmd/generate in deployments/check:
# edit that file, not this one. The alerting rules on the kafkamender workers, for
# prometheus-operator (docs/deployment.md).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kafkamender
  labels:
    app.kubernetes.io/name: kafkamender
    app.kubernetes.io/component: worker
spec:
`, RulesFile)
	for _, l := range lines[start:] {
		if strings.ContainsRune(l, '\t') {
			return nil, fmt.Errorf("%s: a tab in %q: YAML indents with spaces", RulesFile, l)
		}
		if l != "" {
			b.WriteString("  ")
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}
