package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kafkamender/kafkamender/internal/certs"
)

const docPath = "../../docs/configuration.md"

// docRow is a row of a table of docs/configuration.md's Settings section.
type docRow struct {
	line                 int
	path, kind, def, env string // the cells, path without its backticks
}

// readDoc returns the lines of docs/configuration.md.
func readDoc(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// docSection returns the lines from the heading "## title" to the next "## " heading,
// and the number of the first.
func docSection(t *testing.T, lines []string, title string) ([]string, int) {
	t.Helper()
	for i, l := range lines {
		if l != "## "+title {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "## ") {
			end++
		}
		return lines[i:end], i + 1
	}
	t.Fatalf("%s: no section %q", docPath, title)
	return nil, 0
}

// docRows returns the rows of the tables of the Settings section, those whose first cell
// is a field in backticks.
func docRows(t *testing.T, lines []string) []docRow {
	t.Helper()
	section, first := docSection(t, lines, "Settings")
	var rows []docRow
	for i, l := range section {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) != 4 {
			t.Errorf("%s:%d: want 4 cells (key, type, default, environment variable): %s", docPath, first+i, l)
			continue
		}
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, docRow{line: first + i, path: strings.Trim(cells[0], "`"), kind: cells[1], def: cells[2], env: cells[3]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows in Settings", docPath)
	}
	return rows
}

// schemaPath turns the path of a configuration's field into the path the reference
// writes: clusters.<name>.field, alertmanager.rules[].field.
func schemaPath(path string) string {
	path = regexp.MustCompile(`^clusters\.[^.]+\.`).ReplaceAllString(path, "clusters.<name>.")
	return regexp.MustCompile(`\[\d+\]`).ReplaceAllString(path, "[]")
}

// Every field of Config is in the reference, with its type and environment variable, and
// every field the reference lists exists.
func TestDocListsEveryField(t *testing.T) {
	lines := readDoc(t)
	schema := map[string]setting{}
	for _, s := range schemaSettings() {
		schema[s.path] = s
	}
	listed := map[string]bool{}
	for _, r := range docRows(t, lines) {
		s, ok := schema[r.path]
		if !ok {
			t.Errorf("%s:%d: `%s` is not a field of the configuration", docPath, r.line, r.path)
			continue
		}
		if listed[r.path] {
			t.Errorf("%s:%d: `%s` listed twice", docPath, r.line, r.path)
		}
		listed[r.path] = true
		if r.kind != s.kind {
			t.Errorf("%s:%d: `%s` has type %q, want %q", docPath, r.line, r.path, r.kind, s.kind)
		}
		want := "—"
		if s.settable {
			want = "`" + s.env + "`"
		}
		if r.env != want {
			t.Errorf("%s:%d: `%s` has environment variable %s, want %s", docPath, r.line, r.path, r.env, want)
		}
	}
	text := strings.Join(lines, "\n")
	for _, s := range schemaSettings() {
		if !listed[s.path] {
			t.Errorf("%s: no table row for `%s`", docPath, s.path)
		}
		if !strings.Contains(text, "\n- **`"+s.path+"`**: ") {
			t.Errorf("%s: no description of `%s` (a line starting - **`%s`**: )", docPath, s.path, s.path)
		}
	}
}

// The defaults the reference states, where they are values in backticks, are those
// setDefaults gives.
func TestDocDefaults(t *testing.T) {
	// minimal sets only what is required.
	const minimal = `
nats: {url: "nats://127.0.0.1:4222"}
lock: {zookeeper: "127.0.0.1:2181"}
clusters: {c: {bootstrap_servers: ["127.0.0.1:9092"]}}
alertmanager: {rules: [{alertname: A, type: broker-overloaded}]}
`
	// skip: set by minimal, or computed per process.
	skip := map[string]bool{
		"worker.id": true,
		"nats.url":  true, "lock.zookeeper": true, "clusters": true, "clusters.<name>.bootstrap_servers": true,
		"alertmanager.rules": true, "alertmanager.rules[].alertname": true, "alertmanager.rules[].type": true,
	}
	cfg, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]reflect.Value{}
	for _, s := range configSettings(cfg) {
		got[schemaPath(s.path)] = s.v
	}
	for _, r := range docRows(t, readDoc(t)) {
		v, ok := got[r.path]
		if !ok {
			continue // TestDocListsEveryField says so
		}
		stated, isValue := strings.CutPrefix(r.def, "`")
		switch {
		case skip[r.path]:
		case isValue:
			stated, _, _ = strings.Cut(stated, "`")
			want := reflect.New(v.Type())
			if err := yaml.Unmarshal([]byte(stated), want.Interface()); err != nil {
				t.Errorf("%s:%d: `%s`: default %s: %v", docPath, r.line, r.path, r.def, err)
				continue
			}
			if !reflect.DeepEqual(want.Elem().Interface(), v.Interface()) {
				t.Errorf("%s:%d: `%s`: the reference says default %s, setDefaults gives %v", docPath, r.line, r.path, r.def, v.Interface())
			}
		default: // words: "none", "that of `lock.backend`"
			if !v.IsZero() {
				t.Errorf("%s:%d: `%s`: the reference says default %q, setDefaults gives %v", docPath, r.line, r.path, r.def, v.Interface())
			}
		}
	}
}

// yamlBlocks returns the YAML code blocks of lines, with the number of each one's first
// line.
func yamlBlocks(lines []string, first int) (blocks []string, at []int) {
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```yaml" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		blocks = append(blocks, strings.Join(lines[start:i], "\n")+"\n")
		at = append(at, first+start)
	}
	return blocks, at
}

// The complete example parses (its files unread) and has every field; every other configuration snippet
// decodes (Kubernetes manifests aside).
func TestDocExamples(t *testing.T) {
	lines := readDoc(t)
	section, first := docSection(t, lines, "A complete example")
	blocks, _ := yamlBlocks(section, first)
	if len(blocks) != 1 {
		t.Fatalf("%s: A complete example has %d YAML blocks, want 1", docPath, len(blocks))
	}
	// The files it names are those of a production host: decoded and validated, not read.
	if _, err := parse([]byte(blocks[0]), nil, false); err != nil {
		t.Errorf("%s: the complete example: %v", docPath, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(blocks[0]), &doc); err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, r := range indexNodes(doc.Content[0]).refs {
		if r.key != "" {
			has[schemaPath(joinKey(r.path, r.key))] = true
		}
	}
	for _, s := range schemaSettings() {
		if !has[s.path] {
			t.Errorf("%s: the complete example lacks `%s`", docPath, s.path)
		}
	}

	blocks, at := yamlBlocks(lines, 1)
	for i, b := range blocks {
		if strings.Contains(b, "\napiVersion:") || strings.HasPrefix(b, "apiVersion:") {
			continue
		}
		var cfg Config
		if err := decodeStrict([]byte(b), &cfg); err != nil {
			t.Errorf("%s:%d: YAML block: %v", docPath, at[i], err)
		}
	}
}

// The examples of variable names in the Environment variables section follow the rule.
func TestDocEnvExamples(t *testing.T) {
	section, first := docSection(t, readDoc(t), "Environment variables")
	settable := map[string]bool{}
	for _, s := range schemaSettings() {
		settable[s.path] = s.settable
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| `(KAFKAMENDER_[A-Z0-9_]+)` \\|$")
	n := 0
	for i, l := range section {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		if !settable[schemaPath(m[1])] {
			t.Errorf("%s:%d: `%s` is not a field the environment can set", docPath, first+i, m[1])
		}
		if want := envName(m[1]); m[2] != want {
			t.Errorf("%s:%d: `%s` is set by %s, not %s", docPath, first+i, m[1], want, m[2])
		}
	}
	if n == 0 {
		t.Errorf("%s: no examples of variable names", docPath)
	}
}

func TestLocalWorkerConfigParses(t *testing.T) {
	data, err := os.ReadFile("../../deployments/local/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The console's tokens, which the stack writes under .state/stack/secure/ (made here
	// in a directory of the test's, the working directory the relative paths resolve
	// against).
	dir := t.TempDir()
	for name, value := range map[string]string{"console-operator-token": "operator-token-0123456789", "console-viewer-token": "viewer-token-0123456789"} {
		if err := certs.WriteFile(filepath.Join(dir, ".state", "stack", "secure", name), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("deployments/local/worker.yaml: %v", err)
	}
	if !cfg.Console.Enabled || cfg.Console.OperatorToken.Reveal() != "operator-token-0123456789" || cfg.Console.ViewerToken.Reveal() != "viewer-token-0123456789" {
		t.Errorf("deployments/local/worker.yaml: the console is not on with the stack's tokens")
	}
}

// deployments/local/worker-secure.yaml parses once the stack's secured servers have written
// their CA and credentials under .state/stack/secure/ (made here in a directory of the
// test's, the working directory the relative paths resolve against), and uses them.
func TestLocalSecureWorkerConfigParses(t *testing.T) {
	data, err := os.ReadFile("../../deployments/local/worker-secure.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, err := certs.NewCA("stack CA")
	if err != nil {
		t.Fatal(err)
	}
	secure := filepath.Join(dir, ".state", "stack", "secure")
	if err := ca.WritePEM(filepath.Join(secure, "ca.pem"), ""); err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"nats-user": "worker", "nats-password": "nats-pw",
		"kafka-user": "kafkamender", "kafka-password": "kafka-pw",
		"zookeeper-user": "kafkamender", "zookeeper-password": "zk-pw",
	} {
		if err := certs.WriteFile(filepath.Join(secure, name), []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Parse(data); err == nil {
		t.Error("parsed without the stack's files (run from elsewhere)")
	}
	t.Chdir(dir)
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("deployments/local/worker-secure.yaml: %v", err)
	}
	local := cfg.Clusters["local"]
	got := []string{cfg.NATS.URL.Reveal(), cfg.NATS.User, cfg.NATS.Password.Reveal(), local.SASL.Mechanism, local.SASL.Username,
		local.SASL.Password.Reveal(), cfg.Lock.ZooKeeperAuth.User, cfg.Lock.ZooKeeperAuth.Password.Reveal(), cfg.HTTP.Listen}
	want := []string{"tls://127.0.0.1:4223", "worker", "nats-pw", "SCRAM-SHA-512", "kafkamender",
		"kafka-pw", "kafkamender", "zk-pw", "127.0.0.1:8090"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if !local.TLS.On() || !cfg.NATS.TLS.On() || len(local.BootstrapServers) != 4 {
		t.Errorf("TLS: kafka %v, nats %v; brokers %v", local.TLS.On(), cfg.NATS.TLS.On(), local.BootstrapServers)
	}
}
