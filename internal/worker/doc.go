// Package worker is the kafkamender worker runtime: it owns the process's
// connections and serves its health and metrics.
//
// A [Worker] is built from a validated configuration, a logger and a
// Prometheus registry by [New], which does no I/O. [Worker.Run] then
//
//   - binds the HTTP listener (a busy port fails Run at once),
//   - connects to NATS, to every configured Kafka cluster (a franz-go client
//     and its admin requests), to each cluster's own ZooKeeper when one is
//     configured, and to the ZooKeeper that holds kafkamender's locks,
//   - probes every Kafka cluster once, then builds the event pipeline (package
//     pipeline) with the operation engine (package operation) and its tasks
//     (package handlers), each cluster's lock, the journal and the results, and
//     runs it: the worker consumes events (events.go),
//   - probes every dependency at once and then every 10s, and
//   - serves /healthz, /readyz, /metrics and the Alertmanager webhook
//     (package alertmanager) until its context is cancelled, then stops
//     taking events, lets those in hand stop before their next write, shuts
//     down and returns nil.
//
// Only configuration mistakes fail Run at startup: a server that is down is
// not one. The NATS client retries its first connection and reconnects for
// ever, the Kafka clients dial on first use, and the ZooKeeper clients keep
// trying in the background; until a dependency answers, the worker is simply
// not ready.
//
// Readiness (/readyz answers 200, else 503) means: NATS is connected, every
// Kafka cluster answered its last metadata probe, the lock ZooKeeper has a
// session, and so does the ZooKeeper of every cluster whose strategy cannot
// work without it (zk-reassign, zk-nudge). A cluster ZooKeeper that is only
// optional is probed and reported but does not gate readiness. /readyz always
// returns a JSON body that lists each dependency's state, the detail of its
// last good probe and its last error; /healthz answers 200 for as long as the
// process is of use. What ends that for good, the NATS connection closed by nats.go (a
// protocol error, credentials refused twice) or the event pipeline stopped, turns
// /healthz to 503 with the reason and ends Run with an error, so that the orchestrator
// starts the worker again: a worker that can take no event must not look alive.
//
// Metrics: every metric of the worker is defined by package metrics and registered on
// the registry given to New, each series of a known label value at zero from the start
// (docs/metrics.md lists them). The worker itself sets kafkamender_build_info,
// kafkamender_ready (what /readyz says) and kafkamender_dependency_up{kind, name}: kind
// is kafka, zookeeper or nats; name is the cluster name for kafka and for a cluster's
// ZooKeeper, "@lock" for the lock ZooKeeper ('@' cannot occur in a cluster name), and
// "nats" or "jetstream" for NATS.
//
// Shutdown, when the context given to Run is cancelled: /readyz turns 503, the
// pipeline stops taking events and the operations in hand leave their events for
// redelivery (package operation), the prober stops, the HTTP server gets a
// deadline to finish its requests,
// then the Kafka and ZooKeeper clients are closed and the NATS connection is
// drained, and Run logs "stopped".
package worker
