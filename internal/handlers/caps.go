package handlers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

// capsTTL is how long a cluster's capabilities, once probed (ApiVersions of every broker),
// are taken as they are; until capsMaxAge they are still used, and probed again in the
// background, so that an event does not wait for the probe (three round trips on a
// three-broker cluster, in every event's plan when events come more than capsTTL apart).
// They change only in a rolling upgrade or downgrade of the brokers: a strategy chosen from
// capabilities that much out of date still works (zk-reassign on a cluster upgraded to
// 2.4), or fails transiently and is chosen again. A rollback asks again anyway: it must
// know whether the cluster can cancel a copy now.
const (
	capsTTL    = 30 * time.Second
	capsMaxAge = 10 * time.Minute
)

// capsProbeTimeout bounds a probe in the background.
const capsProbeTimeout = 30 * time.Second

// capsCache is one cluster's capabilities, as last probed.
type capsCache struct {
	mu      sync.Mutex
	at      time.Time
	caps    kafka.Capabilities
	probing bool // a probe runs in the background
}

// capabilities returns what cluster c can do, probed at most capsMaxAge ago; older than
// capsTTL, they are probed again in the background.
func (h *Handlers) capabilities(ctx context.Context, c *Cluster) (kafka.Capabilities, error) {
	cc := h.caps[c.Name]
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if age := time.Since(cc.at); !cc.at.IsZero() && age < capsMaxAge {
		if age >= capsTTL && !cc.probing {
			cc.probing = true
			go h.probeInBackground(c, cc)
		}
		return cc.caps, nil
	}
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return kafka.Capabilities{}, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	cc.caps, cc.at = caps, time.Now()
	return caps, nil
}

// probeInBackground probes c's capabilities into cc; a probe that fails leaves them as they
// were, to be probed again by the next use.
func (h *Handlers) probeInBackground(c *Cluster, cc *capsCache) {
	ctx, cancel := context.WithTimeout(context.Background(), capsProbeTimeout)
	defer cancel()
	caps, err := kafka.Probe(ctx, c.Client)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.probing = false
	if err != nil {
		h.log.Debug("probing the cluster's capabilities failed; the last ones stand", zap.String("cluster", c.Name), zap.Error(err))
		return
	}
	cc.caps, cc.at = caps, time.Now()
}
