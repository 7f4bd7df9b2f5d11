package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
)

// ResultsOn returns the Results kept in the stream KAFKAMENDER_RESULTS, bound on first use
// (the pipeline's Setup creates the stream; a worker builds its handlers before that, and
// NATS may not answer yet).
func ResultsOn(js jetstream.JetStream) Results { return &boundResults{js: js} }

type boundResults struct {
	js jetstream.JetStream

	mu sync.Mutex
	r  *streamResults
}

func (b *boundResults) bind(ctx context.Context) (*streamResults, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r != nil {
		return b.r, nil
	}
	stream, err := b.js.Stream(ctx, events.ResultsStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	b.r = newStreamResults(b.js, stream)
	return b.r, nil
}

// Earlier implements Results.
func (b *boundResults) Earlier(ctx context.Context, id string) (*events.Result, bool, error) {
	r, err := b.bind(ctx)
	if err != nil {
		return nil, false, err
	}
	return r.Earlier(ctx, id)
}

// Publish implements Results.
func (b *boundResults) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	r, err := b.bind(ctx)
	if err != nil {
		return nil, false, err
	}
	return r.Publish(ctx, res)
}
