package check

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// MainModule is the module path of the product.
const MainModule = "github.com/kafkamender/kafkamender"

// Root returns the repository root: the directory, at or above dir, whose go.mod is the
// main module's.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module "+MainModule+"\n")) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s at or above the working directory", MainModule)
		}
		dir = parent
	}
}
