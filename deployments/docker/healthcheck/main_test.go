package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			http.Error(w, `{"ready":false,"nats":"disconnected"}`, http.StatusServiceUnavailable)
		case "/healthz":
			_, _ = w.Write([]byte("ok\n"))
		case "/slow":
			time.Sleep(time.Second)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	// An address nothing listens on: a listener closed at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()

	for _, tc := range []struct {
		name string
		args []string
		want int
		says string // in stderr
	}{
		{"live", []string{srv.URL + "/healthz"}, 0, ""},
		{"not ready shows why", []string{srv.URL + "/readyz"}, 1, "nats"},
		{"not found", []string{srv.URL + "/nothing"}, 1, "404"},
		{"nobody listens", []string{closed}, 1, "connect"},
		{"too slow", []string{"--timeout", "100ms", srv.URL + "/slow"}, 1, "deadline"},
		{"not a URL", []string{"127.0.0.1:8080/readyz"}, 2, "want an http"},
		{"two URLs", []string{srv.URL, srv.URL}, 2, "Usage"},
		{"bad timeout", []string{"--timeout", "0s", srv.URL}, 2, "positive"},
		{"unknown flag", []string{"--port", "8080"}, 2, "not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(tc.args, &stderr); got != tc.want {
				t.Fatalf("run(%q) = %d, want %d; stderr:\n%s", tc.args, got, tc.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr does not say %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}
