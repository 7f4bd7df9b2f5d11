package worker

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/config"
	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// Two workers whose configurations disagree about where a cluster's lock lives: the first
// records its location, the second refuses (permanently, naming both locations) at
// start-up and on every lock; a third that agrees goes ahead.
func TestLockLocationsMustAgree(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(yaml string) *config.Config {
		cfg, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	onNATS := parse("nats: {url: nats://127.0.0.1:4222}\nlock: {backend: nats}\nclusters:\n  kraft:\n    bootstrap_servers: [127.0.0.1:19192]\n")
	onZK := parse("nats: {url: nats://127.0.0.1:4222}\nlock: {zookeeper: 127.0.0.1:2181}\nclusters:\n  kraft:\n    bootstrap_servers: [127.0.0.1:19192]\n")
	first := &agreedBackend{records: lockBackends(js), cluster: "kraft", location: lockLocation(onNATS, "kraft")}
	if err := agreedAtStart(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	second := &agreedBackend{records: lockBackends(js), cluster: "kraft", location: lockLocation(onZK, "kraft")}
	err = agreedAtStart(t.Context(), second)
	if !errors.Is(err, errLockMismatch) || retry.IsTransient(err) {
		t.Fatalf("a worker keeping the lock elsewhere: %v, want a permanent mismatch", err)
	}
	for _, want := range []string{`"zookeeper 127.0.0.1:2181 /kafkamender/locks"`, `"nats kv KAFKAMENDER_LOCKS"`, "nats kv del KAFKAMENDER_LOCK_BACKENDS kraft"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("mismatch error %q lacks %q", err, want)
		}
	}
	if _, err := second.Acquire(t.Context(), "kraft", "ev-1"); !errors.Is(err, errLockMismatch) {
		t.Errorf("Acquire with a mismatched location: %v, want the mismatch", err)
	}
	third := &agreedBackend{records: lockBackends(js), cluster: "kraft", location: lockLocation(onNATS, "kraft")}
	if err := third.check(t.Context()); err != nil {
		t.Errorf("a worker that agrees: %v", err)
	}
}
