package handlers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kafkamender/kafkamender/internal/kafka"
)

// capsTTL is how long a cluster's capabilities, once probed (ApiVersions of every broker),
// are taken as they are. They change only in a rolling upgrade or downgrade of the
// brokers: a strategy chosen from capabilities that much out of date still works (zk-reassign
// on a cluster upgraded to 2.4), or fails transiently and is chosen again. A rollback asks
// again anyway: it must know whether the cluster can cancel a copy now.
const capsTTL = 30 * time.Second

// capsCache is one cluster's capabilities, as last probed.
type capsCache struct {
	mu   sync.Mutex
	at   time.Time
	caps kafka.Capabilities
}

// capabilities returns what cluster c can do, probed at most capsTTL ago.
func (h *Handlers) capabilities(ctx context.Context, c *Cluster) (kafka.Capabilities, error) {
	cc := h.caps[c.Name]
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cc.at.IsZero() && time.Since(cc.at) < capsTTL {
		return cc.caps, nil
	}
	caps, err := kafka.Probe(ctx, c.Client)
	if err != nil {
		return kafka.Capabilities{}, transient(fmt.Errorf("cluster %s: %w", c.Name, err))
	}
	cc.caps, cc.at = caps, time.Now()
	return caps, nil
}
