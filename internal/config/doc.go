// Package config loads and checks the worker's YAML configuration.
//
// A configuration names the worker, says where to log and serve health and
// metrics, which NATS server carries the events, which ZooKeeper holds
// kafkamender's own locks, and the Kafka clusters the worker may change. The
// keys of clusters are the cluster names used in event subjects
// (kafkamender.events.<cluster>.<type>), so they are restricted to one NATS
// subject token.
//
// [Load] and [Parse] decode strictly: an unknown or duplicated key is an error,
// not something silently ignored, because a misspelled key in a tool that
// moves partitions would otherwise quietly fall back to a default. Decoding
// problems and validation problems name the field path they concern (for
// example clusters.local.bootstrap_servers[1]) and all of them are reported at
// once, joined with [errors.Join].
//
// [Load] then applies the process's environment variables ([ParseEnv]): KAFKAMENDER_A_B_C
// sets the field at YAML path a.b.c, so that secrets can come from a Kubernetes Secret
// rather than the file. A KAFKAMENDER_ variable that names no such field is an error, as
// an unknown key is; no error shows a variable's value. [Parse] reads no environment.
//
// Passwords and tokens are of type [Secret]: never read from the file (a value there is
// an error), only from their variable or from the file their _file field names, read at
// load; they print as [redacted]. TLS files are loaded at load too, so that a missing or
// unreadable one stops the worker before it connects.
//
// Defaults are applied after decoding (and the environment) and before validation; a [Config] that
// [Parse] returns is complete and valid. [Config.Validate] may be called again
// on a Config changed by hand.
package config
