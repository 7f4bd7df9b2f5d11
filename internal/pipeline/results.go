package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kafkamender/kafkamender/internal/events"
	"github.com/kafkamender/kafkamender/internal/natsjs"
)

// streamResults is Results on the stream KAFKAMENDER_RESULTS.
type streamResults struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

var _ Results = (*streamResults)(nil)

// newStreamResults is Results on stream, the results stream reached through js. Its reads
// go to the stream's leader (natsjs.LeaderReads): a direct get answered by a replica a
// write behind could say that no result is stored for an event whose result was just
// stored (a delivery of it would then run it again; an approval whose plan's event was
// just resolved would reject itself).
func newStreamResults(js jetstream.JetStream, stream jetstream.Stream) *streamResults {
	return &streamResults{js: js, stream: natsjs.LeaderReads(js, stream, events.ResultsStream)}
}

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
	return newStreamResults(js, stream), nil
}

// Earlier implements Results: the stored result, whole.
func (r *streamResults) Earlier(ctx context.Context, id string) (*events.Result, bool, error) {
	res, _, ok, err := r.lookup(ctx, id)
	return res, ok, err
}

// lookup returns the stored result of id, whole, and its encoding whole.
func (r *streamResults) lookup(ctx context.Context, id string) (*events.Result, []byte, bool, error) {
	if !events.ValidID(id) {
		return nil, nil, false, nil
	}
	res, raw, err := ReadResult(ctx, r.stream, id)
	if err != nil || res == nil {
		return nil, nil, false, err
	}
	return res, raw, true, nil
}

// Publish implements Results: a publish that expects no message on the result's subject
// yet, so that of concurrent publishers exactly one stores its result. A result too large
// for one message is stored in parts first, then its head (the atomic publish); see
// ReadResult.
func (r *streamResults) Publish(ctx context.Context, res *events.Result) (*events.Result, bool, error) {
	if err := events.CheckID(res.ID); err != nil {
		return nil, false, fmt.Errorf("publish result: id %.64q: %w", res.ID, err)
	}
	complete(res)
	whole := *res
	whole.Truncated = nil
	raw, err := json.Marshal(whole)
	if err != nil {
		return nil, false, fmt.Errorf("encode result of %s: %w", res.ID, err)
	}
	msg := raw
	var parts *events.Truncated
	if limit := maxResultMessage(r.js.Conn()); len(raw) > limit {
		// Stored already (by an earlier try whose acknowledgement was lost, or by another
		// worker)? Then there are no parts to write.
		if stored, storedRaw, ok, err := r.lookup(ctx, res.ID); err != nil {
			return nil, false, err
		} else if ok {
			return stored, bytes.Equal(storedRaw, raw), nil
		}
		if parts, err = r.putParts(ctx, &whole, raw, limit); err != nil {
			return nil, false, err
		}
		whole.Truncated = parts
		if msg, err = json.Marshal(whole); err != nil { // the head
			return nil, false, fmt.Errorf("encode result of %s: %w", res.ID, err)
		}
		if len(msg) > limit {
			return nil, false, fmt.Errorf("publish result of %s: its head is %d bytes, over the %d a message holds", res.ID, len(msg), limit)
		}
	}
	_, err = r.js.Publish(ctx, events.ResultSubject(res.ID), msg, jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		res.Truncated = parts
		return res, true, nil
	}
	if !wrongLastSequence(err) {
		return nil, false, fmt.Errorf("publish result of %s: %w", res.ID, err)
	}
	// A result is stored already (our parts, if any, stay unreferenced until they age
	// out with the stream's max age: workers may not delete results). Read it; a replica
	// serving direct gets may lag the leader that refused us for a moment, hence the few
	// tries.
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

// putParts stores raw, the encoding of res whole, in parts of at most limit bytes on
// subjects of a new nonce, and returns what the head says of them.
func (r *streamResults) putParts(ctx context.Context, res *events.Result, raw []byte, limit int) (*events.Truncated, error) {
	if n := len(events.ResultPartSubject(res.ID, rand.Text(), len(raw))); n > maxPartSubject {
		// A subject over the server's control-line limit would cost the connection.
		return nil, fmt.Errorf("publish result of %.40s…: its parts' subjects would be %d bytes, over %d", res.ID, n, maxPartSubject)
	}
	sum := sha256.Sum256(raw)
	t := &events.Truncated{Changes: len(res.Changes), Skipped: len(res.Skipped), Noop: len(res.Noop),
		Parts: (len(raw) + limit - 1) / limit, Size: len(raw), SHA256: hex.EncodeToString(sum[:]),
		Subject: events.ResultPartsSubject(res.ID, rand.Text())}
	for i := range t.Parts {
		part := raw[i*limit : min((i+1)*limit, len(raw))]
		if _, err := r.js.Publish(ctx, t.Subject+"."+strconv.Itoa(i), part, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			return nil, fmt.Errorf("publish result of %s: part %d of %d: %w", res.ID, i+1, t.Parts, err)
		}
	}
	return t, nil
}

// maxPartSubject bounds the subject of a part: the server drops a connection whose
// control line (verb, subject, reply, sizes) exceeds 4 KiB. journal.CheckFits refuses
// such an event id at plan time.
const maxPartSubject = 3840

// resultHeadroom is what a result message needs besides its body within the server's
// max_payload: headers (expected last sequence, a replay's expected stream).
const resultHeadroom = 8 << 10

// maxResultMessage is the largest result body one message holds on nc: the server's
// max_payload (as the connection was told) less the headroom, and never less than a head
// needs (a connection not open yet knows no max_payload: its publish fails anyway).
func maxResultMessage(nc *nats.Conn) int {
	return max(int(nc.MaxPayload())-resultHeadroom, events.HeadBytes+32<<10)
}

// ReadResult returns the result of event id stored in the results stream, whole, and its
// encoding as the worker stored it whole; nil and no error when none is stored. It is
// the one way to read a stored result: one too large for one message is stored as a head
// on kafkamender.results.<id> that says where its parts are (events.Truncated), and
// ReadResult joins them (see ReadWhole).
func ReadResult(ctx context.Context, stream jetstream.Stream, id string) (*events.Result, []byte, error) {
	msg, err := stream.GetLastMsgForSubject(ctx, events.ResultSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("look up result of %s: %w", id, err)
	}
	return ReadWhole(ctx, stream, msg.Data)
}

// partTries and partWait bound how long ReadWhole waits for a part: parts are stored
// before their head, but a replica serving direct gets may lag a moment.
const (
	partTries = 20
	partWait  = 100 * time.Millisecond
)

// ReadWhole returns the whole result of which raw is the message on a result subject (as
// stored, or as a waiter on the subject received it, a replay included), and its
// encoding whole: raw itself for a result that fits in one message; else the parts the
// head names, read from the results stream (the stream's direct gets), joined and
// checked (size, sha256). The result keeps Truncated (it encodes as its head) and the
// head's replayed.
func ReadWhole(ctx context.Context, stream jetstream.Stream, raw []byte) (*events.Result, []byte, error) {
	var head events.Result
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, nil, fmt.Errorf("decode result: %w", err)
	}
	t := head.Truncated
	if t == nil {
		return &head, raw, nil
	}
	nonce, ok := strings.CutPrefix(t.Subject, events.ResultPartsSubject(head.ID, ""))
	if !ok || !events.ValidToken(nonce) || t.Parts < 1 {
		return nil, nil, fmt.Errorf("result of %s: its head names no parts of it: %q, %d parts", head.ID, t.Subject, t.Parts)
	}
	whole := make([]byte, 0, min(t.Size, 64<<20))
	for i := range t.Parts {
		subject := t.Subject + "." + strconv.Itoa(i)
		var msg *jetstream.RawStreamMsg
		var err error
		for try := 1; ; try++ {
			msg, err = stream.GetLastMsgForSubject(ctx, subject)
			if !errors.Is(err, jetstream.ErrMsgNotFound) || try == partTries {
				break
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(partWait):
			}
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil, fmt.Errorf("result of %s: part %d of %d (%s) is not stored (aged out?)", head.ID, i+1, t.Parts, subject)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("result of %s: read part %d of %d: %w", head.ID, i+1, t.Parts, err)
		}
		whole = append(whole, msg.Data...)
	}
	if sum := sha256.Sum256(whole); len(whole) != t.Size || hex.EncodeToString(sum[:]) != t.SHA256 {
		return nil, nil, fmt.Errorf("result of %s: its parts are %d bytes, sha256 %x; the head says %d bytes, sha256 %s",
			head.ID, len(whole), sum, t.Size, t.SHA256)
	}
	var res events.Result
	if err := json.Unmarshal(whole, &res); err != nil {
		return nil, nil, fmt.Errorf("decode result of %s (%d parts): %w", head.ID, t.Parts, err)
	}
	res.Truncated = t
	if head.Replayed && !res.Replayed {
		res.Replayed = true
		plain := res
		plain.Truncated = nil
		var err error
		if whole, err = json.Marshal(plain); err != nil {
			return nil, nil, err
		}
	}
	return &res, whole, nil
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
