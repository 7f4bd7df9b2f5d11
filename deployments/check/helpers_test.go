package check

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// repoRoot returns the repository root (two levels up from this module).
func repoRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() { rootDir, rootErr = Root(".") })
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

// readRepoFile reads a file of the repository, by its slash-separated path from the root.
func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// buildWorker builds cmd/worker from the work tree into a temporary directory.
func buildWorker(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/worker")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/worker: %v\n%s", err, out)
	}
	return bin
}

// flagNames returns the names of the flags in a command line, without dashes or values:
// ["--config", "/x", "-v=1"] gives [config v]. It stops at "--".
func flagNames(args []string) []string {
	var names []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// flagValue returns the value of flag name (--name value, --name=value, -name ...) in a
// command line, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, dashes := range []string{"-", "--"} {
			if a == dashes+name && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, dashes+name+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test reading it.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// pinnedNATSServer returns the nats-server version the product's go.mod pins (without
// its v): the server the local stack and the tests run, and the one the deployments'
// NATS images must run.
func pinnedNATSServer(t testing.TB) string {
	t.Helper()
	for _, line := range strings.Split(string(readRepoFile(t, "go.mod")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/nats-io/nats-server/v2" {
			return strings.TrimPrefix(f[1], "v")
		}
	}
	t.Fatal("go.mod pins no nats-server")
	return ""
}
