package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kafkamender/kafkamender/internal/retry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastFromLeader reads the last message on subject in stream from the stream's leader: a
// message get ($JS.API.STREAM.MSG.GET.<stream>, last_by_subj), which only the leader
// answers, where a direct get (what jetstream's GetLastMsgForSubject sends on a stream
// that allows them) may be answered by any replica, including one that has not yet
// applied the latest writes: a write is acknowledged once a quorum stored it, and a
// replica of the quorum applies it a moment later. A leader read sees every write
// acknowledged before it asked; while the stream has no leader (an election, a lost
// quorum) it fails, where a replica would have answered with what it has.
//
// It answers as GetLastMsgForSubject does: jetstream.ErrMsgNotFound when subject has no
// message, jetstream.ErrStreamNotFound when stream does not exist; other failures are
// transient (retry.Transient): a stream without a leader for a moment answers nothing, or
// an error. The request is bounded by ctx's deadline, or js's default timeout
// without one.
func LastFromLeader(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	fail := func(err error) error {
		return retry.Transient(fmt.Errorf("stream %s, last of %s, from the leader: %w", stream, subject, err))
	}
	msg, err := js.Conn().RequestWithContext(ctx, msgGetSubject(js.Options(), stream), req)
	if err != nil {
		return nil, fail(err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fail(err)
	}
	if e := resp.Error; e != nil {
		switch e.ErrorCode {
		case jetstream.JSErrCodeMessageNotFound:
			return nil, jetstream.ErrMsgNotFound
		case jetstream.JSErrCodeStreamNotFound:
			return nil, fmt.Errorf("stream %s: %w", stream, jetstream.ErrStreamNotFound)
		}
		return nil, fail(e)
	}
	m := resp.Message
	if m == nil {
		return nil, fail(errors.New("an answer without a message"))
	}
	out := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Data: m.Data, Time: m.Time}
	if len(m.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, fail(fmt.Errorf("headers: %w", err))
		}
	}
	return out, nil
}

// LeaderReadRefused reports whether nc's last error is the server's refusal of a message
// get on stream (the user is not allowed $JS.API.STREAM.MSG.GET.<stream>): the request
// then gets no answer and times out, and the client logs the violation.
func LeaderReadRefused(nc *nats.Conn, stream string) bool {
	err := nc.LastError()
	return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `STREAM.MSG.GET.`+stream+`"`)
}

// LeaderReads returns s, the stream named name reached through js, with its
// GetLastMsgForSubject read from the stream's leader (LastFromLeader). A user not allowed
// the message get (docs/security.md gave only the direct get before) reads with s's own
// GetLastMsgForSubject once refused, from then on.
func LeaderReads(js jetstream.JetStream, s jetstream.Stream, name string) jetstream.Stream {
	return &leaderStream{Stream: s, js: js, name: name}
}

type leaderStream struct {
	jetstream.Stream
	js     jetstream.JetStream
	name   string
	denied atomic.Bool
}

func (l *leaderStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if l.denied.Load() {
		return l.Stream.GetLastMsgForSubject(ctx, subject)
	}
	bctx, cancel := bound(ctx)
	defer cancel()
	msg, err := LastFromLeader(bctx, l.js, l.name, subject)
	if err != nil && LeaderReadRefused(l.js.Conn(), l.name) {
		l.denied.Store(true)
		return l.Stream.GetLastMsgForSubject(context.WithoutCancel(ctx), subject)
	}
	return msg, err
}

// msgGetResponse is the JetStream API's answer to a message get (the server's
// JSApiMsgGetResponse).
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// msgGetSubject is the subject of a message get on stream, with js's API prefix as
// jetstream builds it.
func msgGetSubject(o jetstream.JetStreamOptions, stream string) string {
	prefix := jetstream.DefaultAPIPrefix
	switch {
	case o.APIPrefix != "":
		prefix = strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		prefix = "$JS." + o.Domain + ".API."
	}
	return prefix + "STREAM.MSG.GET." + stream
}
