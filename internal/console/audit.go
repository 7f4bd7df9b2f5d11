package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
)

// How many of the latest messages a search reads: the audit trail's results, the
// clusters page's last results, the dead letters. A search says how many it read.
const (
	auditWindow       = 5000
	lastResultsWindow = 1000
	deadWindow        = 1000
	// maxShown bounds the rows of a search.
	maxShown = 200
	// fetchBatch is how many messages one fetch of a scan asks for.
	fetchBatch = 500
)

// auditQuery is a search of the audit trail; empty fields match everything.
type auditQuery struct {
	Cluster string
	Type    string
	Status  string
	ID      string
	// Since: results finished at or after it; SinceText as typed.
	Since     time.Time
	SinceText string
}

// parseAuditQuery reads a search from the page's query string, bounding every value.
func parseAuditQuery(v url.Values, now time.Time) (auditQuery, error) {
	q := auditQuery{Cluster: v.Get("cluster"), Type: v.Get("type"), Status: v.Get("status"), ID: v.Get("id"), SinceText: v.Get("since")}
	var errs []error
	if q.Cluster != "" && !events.ValidClusterName(q.Cluster) {
		errs = append(errs, fmt.Errorf("cluster %q: not a cluster name", clip(q.Cluster)))
		q.Cluster = ""
	}
	if q.Type != "" && !events.KnownType(q.Type) {
		errs = append(errs, fmt.Errorf("type %q: not an event type", clip(q.Type)))
		q.Type = ""
	}
	if q.Status != "" && !slices.Contains(statuses, events.Status(q.Status)) {
		errs = append(errs, fmt.Errorf("status %q: not a result status", clip(q.Status)))
		q.Status = ""
	}
	if q.ID != "" && events.CheckID(q.ID) != nil {
		errs = append(errs, fmt.Errorf("id %q: not an event id", clip(q.ID)))
		q.ID = ""
	}
	if q.SinceText != "" {
		if t, err := time.Parse(time.RFC3339, q.SinceText); err == nil {
			q.Since = t
		} else if d, err := time.ParseDuration(q.SinceText); err == nil && d > 0 {
			q.Since = now.Add(-d)
		} else {
			errs = append(errs, fmt.Errorf("since %q: want a duration (2h) or an RFC 3339 time", clip(q.SinceText)))
			q.SinceText = ""
		}
	}
	return q, errors.Join(errs...)
}

// statuses are the final statuses a stored result can have.
var statuses = []events.Status{events.StatusSucceeded, events.StatusNoop, events.StatusPlanned, events.StatusPartial,
	events.StatusRejected, events.StatusExpired, events.StatusCancelled, events.StatusFailed, events.StatusDenied}

func (q auditQuery) matches(r *events.Result) bool {
	return (q.Cluster == "" || r.Cluster == q.Cluster) && (q.Type == "" || r.Type == q.Type) &&
		(q.Status == "" || string(r.Status) == q.Status) && (q.ID == "" || r.ID == q.ID) &&
		(q.Since.IsZero() || !r.FinishedAt.Before(q.Since))
}

// clip bounds a value quoted back in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// scanResults reads the latest window results of the results stream (the heads stored on
// kafkamender.results.<id>; not their parts) and returns those q matches, newest first, at
// most maxShown, with how many it read. A search by id reads that result alone.
func (s *Server) scanResults(ctx context.Context, q auditQuery, window int) ([]*events.Result, int, error) {
	stream, err := s.js.Stream(ctx, events.ResultsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", events.ResultsStream, err)
	}
	if q.ID != "" {
		msg, err := stream.GetLastMsgForSubject(ctx, events.ResultSubject(q.ID))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("result of %s: %w", q.ID, err)
		}
		var r events.Result
		if err := json.Unmarshal(msg.Data, &r); err != nil || !q.matches(&r) {
			return nil, 1, nil
		}
		return []*events.Result{&r}, 1, nil
	}
	var found []*events.Result
	n, err := scan(ctx, stream, events.ResultsSubjectPrefix+".*", window, func(m jetstream.Msg) {
		var r events.Result
		if json.Unmarshal(m.Data(), &r) == nil && q.matches(&r) {
			found = append(found, &r)
		}
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read stream %s: %w", events.ResultsStream, err)
	}
	slices.Reverse(found)
	return found[:min(len(found), maxShown)], n, nil
}

// scan reads the last window messages of stream on filter, oldest first, with an ordered
// consumer (ephemeral: nothing is left on the stream), and returns how many it read. On a
// NATS cluster, the consumer just made can answer no pull yet from the node this
// connection is on ("no responders": its interest has not reached it): the scan starts
// again, a few times, a moment later.
func scan(ctx context.Context, stream jetstream.Stream, filter string, window int, each func(jetstream.Msg)) (int, error) {
	for pace := 50 * time.Millisecond; ; pace *= 2 {
		var got []jetstream.Msg
		n, err := scanOnce(ctx, stream, filter, window, func(m jetstream.Msg) { got = append(got, m) })
		if err == nil {
			for _, m := range got {
				each(m)
			}
			return n, nil
		}
		if !errors.Is(err, nats.ErrNoResponders) || pace > time.Second {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(pace):
		}
	}
}

func scanOnce(ctx context.Context, stream jetstream.Stream, filter string, window int, each func(jetstream.Msg)) (int, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	st := info.State
	if st.Msgs == 0 {
		return 0, nil
	}
	start := uint64(1)
	if st.LastSeq > uint64(window) {
		start = st.LastSeq - uint64(window) + 1
	}
	start = max(start, st.FirstSeq)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		batch, err := cons.FetchNoWait(fetchBatch)
		if err != nil {
			return n, err
		}
		got, last := 0, uint64(0)
		for m := range batch.Messages() {
			got++
			n++
			each(m)
			if md, err := m.Metadata(); err == nil {
				last = md.Sequence.Stream
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, err
		}
		if got == 0 || last >= st.LastSeq {
			return n, nil
		}
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
	}
}

// deadLetter is a message of the dead-letter stream.
type deadLetter struct {
	At         time.Time
	Subject    string // its event subject
	Event      string
	Reason     string
	Deliveries string
	Body       string // the event as received, cut to 4 KiB
}

// scanDead reads the latest window dead letters, newest first (those of event id only,
// when id is set), with how many it read.
func (s *Server) scanDead(ctx context.Context, id string, window int) ([]deadLetter, int, error) {
	stream, err := s.js.Stream(ctx, events.DeadStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", events.DeadStream, err)
	}
	var out []deadLetter
	n, err := scan(ctx, stream, events.DeadSubjects, window, func(m jetstream.Msg) {
		h := m.Headers()
		d := deadLetter{Subject: h.Get(events.HeaderOriginalSubject), Event: h.Get(events.HeaderEventID),
			Reason: h.Get(events.HeaderReason), Deliveries: h.Get(events.HeaderDeliveries)}
		if id != "" && d.Event != id {
			return
		}
		if md, err := m.Metadata(); err == nil {
			d.At = md.Timestamp
		}
		body := m.Data()
		d.Body = strings.ToValidUTF8(string(body[:min(len(body), 4<<10)]), "?")
		out = append(out, d)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read stream %s: %w", events.DeadStream, err)
	}
	slices.Reverse(out)
	return out[:min(len(out), maxShown)], n, nil
}
