// Command generate writes the deployment files derived from others: the Grafana dashboard
// and the Kubernetes PrometheusRule (package generate). Run it in deployments/check after
// changing the dashboard model or the Prometheus rule file:
//
//	go run ./cmd/generate
package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/kafkamender/kafkamender/deployments/check"
	"github.com/kafkamender/kafkamender/deployments/check/generate"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := check.Root(".")
	if err != nil {
		return err
	}
	files, err := generate.Files(root)
	if err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, files[rel]) {
			fmt.Printf("%s: unchanged\n", rel)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[rel], 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: written\n", rel)
	}
	return nil
}
