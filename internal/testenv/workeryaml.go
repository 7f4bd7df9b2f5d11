package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafkamender/kafkamender/internal/stack"
)

// localSecure is how deployments/local/worker.yaml names the stack's secure folder: a
// path relative to the repository root, where the demo and operators start workers.
const localSecure = ".state/stack/secure/"

// LocalWorkerYAML is deployments/local/worker.yaml as a worker started in any directory
// reads it: the files it names under .state/stack/secure/ (the console's tokens) by
// absolute path. They are the stack's when it has written them, else copies with tokens
// of the test's own.
func LocalWorkerYAML(t testing.TB) []byte {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deployments", "local", "worker.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, filepath.FromSlash(localSecure))
	if _, err := os.Stat(filepath.Join(dir, stack.FileConsoleOperatorToken)); err != nil {
		dir = t.TempDir()
		for _, name := range []string{stack.FileConsoleOperatorToken, stack.FileConsoleViewerToken} {
			var b [18]byte
			_, _ = rand.Read(b[:])
			if err := os.WriteFile(filepath.Join(dir, name), []byte(hex.EncodeToString(b[:])), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bytes.ReplaceAll(data, []byte(localSecure), []byte(dir+string(filepath.Separator)))
}
