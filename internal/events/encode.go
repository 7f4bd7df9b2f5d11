package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// New builds the event of type typ for cluster with data, and encodes and checks it with
// the decoder the workers use, so that what is published is what a worker accepts. The
// time is now, to the millisecond; expiresIn > 0 sets its expiry. The emitter and the
// console build their events so.
func New(cluster, typ, id, source string, data any, now time.Time, expiresIn time.Duration) (ev Envelope, subject string, body []byte, err error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return ev, "", nil, fmt.Errorf("encode data: %w", err)
	}
	ev = NewEnvelope(typ, id, source, raw, now, expiresIn)
	subject = Subject(cluster, typ)
	if body, err = json.Marshal(ev); err != nil {
		return ev, "", nil, fmt.Errorf("encode event: %w", err)
	}
	if _, err := Decode(subject, nil, body, DecodeOptions{}); err != nil {
		return ev, "", nil, fmt.Errorf("the event would be rejected: %w", err)
	}
	return ev, subject, body, nil
}

// NewEnvelope is the event envelope of type typ with data (JSON), at now to the
// millisecond; expiresIn > 0 sets its expiry.
func NewEnvelope(typ, id, source string, data json.RawMessage, now time.Time, expiresIn time.Duration) Envelope {
	now = now.UTC().Truncate(time.Millisecond)
	ev := Envelope{SpecVersion: SpecVersion, ID: id, Source: source, Type: typ, Time: now,
		DataContentType: ContentTypeJSON, Data: data}
	if expiresIn > 0 {
		ev.ExpiresAt = now.Add(expiresIn)
	}
	return ev
}

// BytesText writes a size in binary units ("1.5 GiB") for progress lines.
func BytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}[i])
}
