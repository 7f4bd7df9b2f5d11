package handlers

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// Capabilities probed more than capsTTL ago are used as they are and probed again in the
// background: an event does not wait for the probe. Older than capsMaxAge, they are
// probed before use.
func TestCapabilitiesProbedInTheBackground(t *testing.T) {
	env := testenv.Get(t)
	h, _ := guarded(t, testGuardrails)
	c := &Cluster{Name: "kraft", Client: env.Kafka(t, "kraft")}
	h.caps["kraft"] = &capsCache{}
	cc := h.caps["kraft"]
	kraft, err := kafka.Probe(t.Context(), c.Client)
	if err != nil {
		t.Fatal(err)
	}
	none := kafka.Capabilities{}
	if kraft == none {
		t.Fatal("Kafka 4 probed with no capability")
	}

	// Stale, not too old: the cached ones at once, the real ones after the probe.
	cc.caps, cc.at = none, time.Now().Add(-capsTTL-time.Second)
	if got, err := h.capabilities(t.Context(), c); err != nil || got != none {
		t.Fatalf("stale capabilities: %+v, %v; want the cached ones at once", got, err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if cc.caps != kraft || cc.probing || time.Since(cc.at) > capsTTL {
			return fmt.Errorf("cached %+v (probing %v, at %s), want %+v probed now", cc.caps, cc.probing, cc.at, kraft)
		}
		return nil
	})

	// Too old: probed before use.
	cc.mu.Lock()
	cc.caps, cc.at = none, time.Now().Add(-capsMaxAge-time.Second)
	cc.mu.Unlock()
	if got, err := h.capabilities(t.Context(), c); err != nil || got != kraft {
		t.Fatalf("capabilities older than capsMaxAge: %+v, %v; want probed ones %+v", got, err, kraft)
	}
}
