package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Help and the version go to stdout, with exit 0: a script can read them.
func TestHelpAndVersionOnStdout(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Usage: worker --config FILE"},
		{[]string{"-h"}, "Usage: worker --config FILE"},
		{[]string{"--version"}, "kafkamender worker "},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tt.want) || stderr.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, code, stdout.String(), stderr.String())
		}
	}
}

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
		{"no config", nil, 2, "--config is required"},
		{"unknown flag", []string{"--conf", "x"}, 2, "flag provided but not defined: -conf"},
		{"extra argument", []string{"--config", bad, "more"}, 2, `unexpected arguments: ["more"]`},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, 2, "read config: open "},
		{"bad config", []string{"--config", bad}, 2, `nats.url: "http://x": unsupported scheme "http"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}
