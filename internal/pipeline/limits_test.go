package pipeline_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/pipeline"
	"github.com/kafkamender/kafkamender/internal/testenv"
)

// Every stream has a size limit. The events stream, full, refuses a publish with an error
// (the publisher knows) and drops nothing it stored: no event goes unanswered silently.
// The results stream, full, drops its oldest results (answered events).
func TestStreamsAreBounded(t *testing.T) {
	_, nc := testenv.InProcessNATS(t)
	const limit = 16 << 20
	p, err := pipeline.New(nc, nil, pipeline.Config{Worker: "w1", Logger: zap.NewNop(), EventsMaxBytes: limit, ResultsMaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name, discard := range map[string]jetstream.DiscardPolicy{events.EventsStream: jetstream.DiscardNew,
		events.ResultsStream: jetstream.DiscardOld, events.DeadStream: jetstream.DiscardOld} {
		s, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxBytes <= 0 || c.Discard != discard {
			t.Errorf("stream %s: max bytes %d, discard %v; want a limit and %v", name, c.MaxBytes, c.Discard, discard)
		}
	}

	body := bytes.Repeat([]byte("x"), 900<<10) // under NATS's max_payload
	stored := 0
	var refused error
	for i := range 64 {
		if _, err := js.Publish(t.Context(), events.Subject("local", events.TypeBrokerOverloaded), body,
			jetstream.WithMsgID(fmt.Sprintf("big-%d", i))); err != nil {
			refused = err
			break
		}
		stored++
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes exceeded") {
		t.Fatalf("after %d events of 900 KiB in a 16 MiB stream: %v, want the publish refused (maximum bytes exceeded)", stored, refused)
	}
	if n := testenv.StreamMsgs(t, js, events.EventsStream); n != uint64(stored) {
		t.Errorf("%d events stored, %d acknowledged: the stream dropped some", n, stored)
	}

	for i := range 24 {
		if _, err := js.Publish(t.Context(), events.ResultSubject(fmt.Sprintf("r-%d", i)), body); err != nil {
			t.Fatalf("result %d: %v, want the oldest dropped instead", i, err)
		}
	}
	rs, err := js.Stream(t.Context(), events.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.GetLastMsgForSubject(t.Context(), events.ResultSubject("r-0")); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("the oldest result: %v, want it dropped", err)
	}
	if _, err := rs.GetLastMsgForSubject(t.Context(), events.ResultSubject("r-23")); err != nil {
		t.Errorf("the newest result: %v", err)
	}
}
