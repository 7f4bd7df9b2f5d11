package stack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
)

// The secured nats-server reads its users' passwords from $VARIABLE references, which it
// parses as configuration values: every generated secret must come back as the same
// string. Bare hex failed about one stack in six ("16e1…" is a number).
func TestRandomSecretsParseAsStringsInNATSConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(file, []byte("password: $KAFKAMENDER_TEST_SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, secret := range append([]string{}, fixedSecrets()...) {
		t.Setenv("KAFKAMENDER_TEST_SECRET", secret)
		m, err := conf.ParseFile(file)
		if err != nil {
			t.Fatalf("secret %q: %v", secret, err)
		}
		if got, ok := m["password"].(string); !ok || got != secret {
			t.Fatalf("secret %q parses as %#v", secret, m["password"])
		}
	}
}

// fixedSecrets are the secrets of a thousand fresh stacks, and the shapes that broke bare
// hex, behind randomSecret's prefix.
func fixedSecrets() []string {
	out := []string{"s" + "16e1e9af00", "s" + "6a", "s" + "1e10", "s" + "0x1f"}
	for range 1000 {
		out = append(out, randomSecret())
	}
	return out
}

// Worktrees of one clone share one stack through symbolic links to its state and cache
// folders: the stack names them by their real paths, so that it recognises its servers
// whichever checkout started them.
func TestStateDirThroughASymlink(t *testing.T) {
	real := t.TempDir()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "deployments", "local", "maven"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, ".state")); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(real)
	if s.StateDir() != filepath.Join(want, "stack") {
		t.Fatalf("state dir %s, want %s", s.StateDir(), filepath.Join(want, "stack"))
	}
	if got := realPath("/nonexistent/a/b"); got != "/nonexistent/a/b" {
		t.Fatalf("realPath of a missing path: %s", got)
	}
}
