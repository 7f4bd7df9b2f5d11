package handlers

import (
	"context"
	"slices"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/kafka"
	"github.com/kafkamender/kafkamender/internal/model"
	"github.com/kafkamender/kafkamender/internal/operation"
)

// Prefetch implements operation.Prefetcher for preferred-leader events: the read their
// plan makes first (the topic's placement and its ongoing reassignments), started while
// the engine takes the lock and reads the journal. Other events' plans read more, or take
// longer than the round trips saved are worth: they start none.
func (h *Handlers) Prefetch(ctx context.Context, ev *events.Event) operation.Prefetch {
	req, ok := ev.Payload.(*events.ReplicaChange)
	c := h.cfg.Clusters[ev.Cluster]
	if !ok || c == nil || req.PreferredLeader == nil || req.ReplicationFactor != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &prefetched{topics: []string{req.Topic}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if p.caps, p.err = h.capabilities(ctx, c); p.err == nil {
			p.snap, p.err = c.reader(p.caps).Snapshot(ctx, p.topics...)
		}
	}()
	return p
}

// prefetched is a Snapshot read of topics, with the capabilities it was read with.
type prefetched struct {
	topics []string
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done closes.
	caps kafka.Capabilities
	snap *model.Snapshot
	err  error
}

// Discard implements operation.Prefetch.
func (p *prefetched) Discard() { p.cancel() }

// take waits for the read and returns it if it is the read of topics made with caps, and
// succeeded; else nil (the caller reads itself).
func (p *prefetched) take(ctx context.Context, caps kafka.Capabilities, topics []string) *model.Snapshot {
	defer p.cancel()
	if !slices.Equal(p.topics, topics) {
		return nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil
	}
	if p.err != nil || p.caps != caps {
		return nil
	}
	return p.snap
}
