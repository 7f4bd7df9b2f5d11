package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// The second worker's configuration is the first's with only http.listen changed, and
// keeps its comments.
func TestDeriveConfig(t *testing.T) {
	src := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(src, testenv.LocalWorkerYAML(t), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "worker-2.yaml")
	if err := deriveConfig(src, dst, "127.0.0.1:8081"); err != nil {
		t.Fatal(err)
	}
	want, err := config.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	if got.HTTP.Listen != "127.0.0.1:8081" {
		t.Errorf("http.listen = %q, want 127.0.0.1:8081", got.HTTP.Listen)
	}
	got.HTTP.Listen = want.HTTP.Listen
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the derived configuration differs in more than http.listen:\n got %+v\nwant %+v", got, want)
	}
	raw, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "# /healthz, /readyz, /metrics") {
		t.Errorf("the comments of %s are gone:\n%s", src, raw)
	}
}

func TestDeriveConfigWithoutHTTPListen(t *testing.T) {
	src := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(src, []byte("log:\n  level: info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := deriveConfig(src, filepath.Join(t.TempDir(), "out.yaml"), "127.0.0.1:8081")
	if err == nil || !strings.Contains(err.Error(), "no http") {
		t.Fatalf("err = %v, want one saying there is no http", err)
	}
}
