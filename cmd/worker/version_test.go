package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A release build stamps its version at link time (the Dockerfile's VERSION): --version
// prints it, as kafkamender_build_info carries it.
func TestVersionStampedAtLinkTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the worker")
	}
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X github.com/kafkamender/kafkamender/internal/version.Version=9.8.7-test", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("worker --version: %v\n%s", err, out)
	}
	if want := "kafkamender worker 9.8.7-test (" + runtime.Version() + ")\n"; string(out) != want {
		t.Errorf("worker --version printed %q, want %q", out, want)
	}
	if strings.Contains(string(out), "(devel)") {
		t.Error("a stamped build says (devel)")
	}
}
