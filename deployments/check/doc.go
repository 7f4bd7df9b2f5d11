// Package check validates the deployment files of kafkamender statically: the Dockerfile,
// the Docker Compose stack (deployments/compose) and its three-node NATS cluster, the
// Kubernetes manifests (deployments/kubernetes) and the Helm values of the NATS chart
// beside them, the Prometheus rules (deployments/prometheus) and the Grafana
// dashboard (deployments/grafana). Nothing here runs a container: no container engine is
// needed, and none was used to write these files.
//
// It is a module of its own (deployments/check/go.mod) so that the libraries it parses
// those files with - Kubernetes' API types, kustomize, prometheus-operator's types,
// Prometheus' rule and PromQL parsers, compose-go, BuildKit's Dockerfile parser,
// Alertmanager's configuration - never enter the product's go.mod (nats-server, whose flag
// parser reads the Compose NATS nodes' command lines, is in it already). Its path lies
// under the main module's, so it may import the main module's internal packages (the
// configuration parser, the test environment); a replace directive points it at the work
// tree.
//
// The tests (go test ./... here; `go tool task test` at the root runs them) check each
// file decodes strictly into its real type, and that the files agree with each other and
// with the worker: ports, probes, flags, configuration paths, metric names. One test,
// skipped under -short, starts a worker against the local stack and checks that every
// metric the rules and the dashboard query exists in its /metrics.
//
// The Grafana dashboard and the Kubernetes PrometheusRule are generated (go run
// ./cmd/generate); a test fails when the committed files are not what it generates.
package check
