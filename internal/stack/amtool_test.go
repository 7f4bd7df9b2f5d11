package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Alertmanager configuration the repository gives (the snippets of
// docs/alertmanager.md, the Compose stack's, the local stack's) passes amtool
// check-config of the Alertmanager release the stack runs.
func TestAlertmanagerConfigsCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds amtool (cached with the stack's Alertmanager)")
	}
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Root: root, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.buildAlertmanager(t.Context()); err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{"the local stack's": alertmanagerConfig()}
	compose, err := os.ReadFile(filepath.Join(root, "deployments", "compose", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	configs["deployments/compose/alertmanager.yml"] = string(compose)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "alertmanager.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range regexp.MustCompile("(?s)```yaml\n(# alertmanager.yml\n.*?)```").FindAllStringSubmatch(string(doc), -1) {
		configs["docs/alertmanager.md, alertmanager.yml snippet "+string(rune('1'+i))] = b[1]
	}
	if len(configs) < 3 {
		t.Fatalf("docs/alertmanager.md has no alertmanager.yml snippet")
	}
	dir := t.TempDir()
	for name, text := range configs {
		path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_", "'", "", ",", "").Replace(name)+".yml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(s.AmtoolBinary(), "check-config", path).CombinedOutput(); err != nil {
			t.Errorf("%s: amtool check-config: %v\n%s", name, err, out)
		}
	}
}
