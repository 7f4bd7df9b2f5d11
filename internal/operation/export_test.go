package operation

import (
	"context"

	"github.com/kafkamender/kafkamender/internal/events"
)

// For the tests of package operation_test, which run the engine on the fakes of package
// operationtest (which imports this package): the engine's entry points with any Delivery.

func (e *Engine) HandleDelivery(ctx context.Context, d Delivery) (*events.Result, error) {
	return e.handle(ctx, d)
}

func (e *Engine) ReplayedDelivery(ctx context.Context, d Delivery) error { return e.replayed(ctx, d) }

func (e *Engine) AbandonDelivery(ctx context.Context, d Delivery, reason string) (*events.Result, error) {
	return e.abandon(ctx, d, reason)
}

// PrefetchLockWait is how long the lock may take for a prefetched read to be kept.
const PrefetchLockWait = prefetchLockWait
