package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunUsageAndConfigErrors covers the paths that end before the worker
// starts; the runtime itself is tested in internal/worker.
func TestRunUsageAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nats: {url: \"http://x\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"--help"}, 0, "Usage: worker --config FILE"},
		{"no config", nil, 2, "--config is required"},
		{"unknown flag", []string{"--conf", "x"}, 2, "flag provided but not defined: -conf"},
		{"extra argument", []string{"--config", bad, "more"}, 2, `unexpected arguments: ["more"]`},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, 2, "read config: open "},
		{"bad config", []string{"--config", bad}, 2, `nats.url: "http://x": unsupported scheme "http"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}
