// Command worker runs a kafkamender worker: it consumes kafkamender events
// from NATS JetStream and repairs Kafka partition placement.
//
// Usage:
//
//	worker --config worker.yaml
//	worker logdir inspect|move|recover ...
//
// It serves /healthz, /readyz, /metrics and the Alertmanager webhook
// (/v1/alertmanager) on the configured http.listen, and stops cleanly on
// SIGINT or SIGTERM: the operations in hand stop before their next write and
// leave their events to the next worker. Exit status: 0 after a clean stop, 2
// for a usage or configuration error, 1 for any other failure.
//
// "worker logdir" is the offline log-directory tool for stopped brokers
// (package internal/logdir, docs/logdir-offline.md); it connects to nothing.
//
// This file only wires things together; the runtime is package
// internal/worker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/version"
	"github.com/kafkamender/kafkamender/internal/worker"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "logdir" {
		return logdirCommand(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "path of the worker configuration `file` (YAML; required)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: worker --config FILE
       worker logdir inspect|move|recover ...   (offline; see worker logdir --help)

Runs a kafkamender worker: it consumes events from NATS JetStream and repairs
Kafka partition placement. It serves /healthz, /readyz, /metrics and the
Alertmanager webhook (/v1/alertmanager) on the configured http.listen address,
and stops on SIGINT or SIGTERM, leaving the operations in hand to the next
worker.

Flags:
  --config FILE
        path of the worker configuration file (YAML; required)
  --version
        print the version (the one kafkamender_build_info carries) and exit

Exit status: 0 after a clean stop, 2 for a usage or configuration error,
1 for any other failure.
`)
	}
	if helpAsked(args) {
		// Asked for: the usage on stdout, exit 0 (a usage error prints it on stderr).
		fs.SetOutput(stdout)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "kafkamender worker %s (%s)\n", version.String(), runtime.Version())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "worker: unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "worker: --config is required")
		fs.Usage()
		return 2
	}

	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}

	logger, err := worker.NewLogger(cfg.Log)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	defer func() { _ = logger.Sync() }()

	registry := prometheus.NewRegistry()
	registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	w, err := worker.New(cfg, logger, registry)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()

	if err := w.Run(ctx); err != nil {
		logger.Error("worker failed", zap.Error(err))
		return 1
	}
	return 0
}

// helpAsked reports whether args ask for help (-h, -help, --help) among the flags.
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "--h", "-help", "--help":
			return true
		}
	}
	return false
}
