package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
)

// streamResults is Results on the stream KAFKAMENDER_RESULTS.
type streamResults struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

var _ Results = (*streamResults)(nil)

// NewResults returns the Results kept in the stream KAFKAMENDER_RESULTS, reached through
// nc. The stream must exist (Pipeline.Setup creates it).
func NewResults(ctx context.Context, nc *nats.Conn) (Results, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, events.ResultsStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	return &streamResults{js: js, stream: stream}, nil
}

// Earlier implements Results.
func (r *streamResults) Earlier(ctx context.Context, id string) (*events.Result, bool, error) {
	res, _, ok, err := r.lookup(ctx, id)
	return res, ok, err
}

func (r *streamResults) lookup(ctx context.Context, id string) (*events.Result, []byte, bool, error) {
	if !events.ValidToken(id) {
		return nil, nil, false, nil
	}
	msg, err := r.stream.GetLastMsgForSubject(ctx, events.ResultSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("look up result of %s: %w", id, err)
	}
	var res events.Result
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		return nil, nil, false, fmt.Errorf("decode stored result of %s: %w", id, err)
	}
	return &res, msg.Data, true, nil
}

// Publish implements Results: a publish that expects no message on the result's subject
// yet, so that of concurrent publishers exactly one stores its result.
func (r *streamResults) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if !events.ValidToken(res.ID) {
		return nil, false, fmt.Errorf("publish result: id %q is not a valid subject token", res.ID)
	}
	complete(res)
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, false, fmt.Errorf("encode result of %s: %w", res.ID, err)
	}
	_, err = r.js.Publish(ctx, events.ResultSubject(res.ID), raw, jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		return res, true, nil
	}
	if !wrongLastSequence(err) {
		return nil, false, fmt.Errorf("publish result of %s: %w", res.ID, err)
	}
	// A result is stored already. Read it; a replica serving direct gets may lag the
	// leader that refused us for a moment, hence the few tries.
	for try := 0; ; try++ {
		stored, storedRaw, ok, err := r.lookup(ctx, res.ID)
		if err != nil {
			return nil, false, err
		}
		if ok {
			// Our own result, stored by an earlier try whose acknowledgement was lost.
			return stored, bytes.Equal(storedRaw, raw), nil
		}
		if try == 5 {
			return nil, false, fmt.Errorf("publish result of %s: refused as stored already, but none is found", res.ID)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// complete fills what the result format requires of every stored result.
func complete(res *events.Result) {
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now()
	}
	if res.Changes == nil {
		res.Changes = []events.Change{}
	}
	if res.Skipped == nil {
		res.Skipped = []events.Skip{}
	}
}

// wrongLastSequence reports whether err is JetStream refusing a publish whose expected last
// subject sequence did not match.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
