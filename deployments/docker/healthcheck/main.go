// Command healthcheck asks a kafkamender worker over HTTP whether it is live or ready, for
// container runtimes that run their health checks inside the container: the worker image
// is distroless, with neither a shell nor curl, so Docker Compose's healthcheck runs this
// binary, which the image ships beside the worker.
//
// Usage:
//
//	healthcheck [--timeout 3s] [URL]
//
// URL defaults to http://127.0.0.1:8080/readyz (the worker's default port; use /healthz
// for liveness). Exit status: 0 when a GET of URL answers 2xx within the timeout, 1 when it
// answers anything else or not at all, 2 for a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// DefaultURL is the readiness endpoint of a worker on its default port.
const DefaultURL = "http://127.0.0.1:8080/readyz"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: healthcheck [--timeout 3s] [URL]   (default %s)\n", DefaultURL)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	target := DefaultURL
	switch fs.NArg() {
	case 0:
	case 1:
		target = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "healthcheck: %q: want an http:// or https:// URL\n", target)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "healthcheck: --timeout %s: must be positive\n", *timeout)
		return 2
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// /readyz says which dependency is down, and why: show it in the runtime's log.
		fmt.Fprintf(stderr, "healthcheck: %s: %s\n%s\n", target, resp.Status, body)
		return 1
	}
	return 0
}
