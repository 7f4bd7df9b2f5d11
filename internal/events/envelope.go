package events

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Names of the NATS subjects of the event contract (its stream: names.go).
const (
	// EventsSubjectPrefix is the first two tokens of every event subject.
	EventsSubjectPrefix = "kafkamender.events"
	// EventsSubjects is the wildcard that captures every event subject.
	EventsSubjects = EventsSubjectPrefix + ".>"
)

// CloudEvents constants used by the envelope.
const (
	// SpecVersion is the only CloudEvents version accepted.
	SpecVersion = "1.0"
	// ContentTypeJSON is the data content type of every event.
	ContentTypeJSON = "application/json"
	// ContentTypeCloudEventsJSON is the NATS message content type of an event
	// in structured mode: the whole body is the JSON-encoded envelope.
	ContentTypeCloudEventsJSON = "application/cloudevents+json"
)

// Event types: the last token of the subject and the envelope's type.
const (
	TypeBrokerOverloaded       = "broker-overloaded"
	TypeReplicaChangeRequested = "replica-change-requested"
	TypeLogDirMoveRequested    = "logdir-move-requested"
	TypeBrokerFailed           = "broker-failed"
	TypeBrokerDrain            = "broker-drain"
	TypeBrokerAdded            = "broker-added"
	TypePartitionOffline       = "partition-offline"
	// Control events: they change how the fleet treats a cluster's other events, and are
	// taken by a consumer of their own (pipeline.ControlTypes), ahead of the events that
	// wait in the cluster's queue.
	TypeClusterPause    = "cluster-pause"
	TypeClusterResume   = "cluster-resume"
	TypeOperationCancel = "operation-cancel"
	// A person's answer to a plan awaiting approval: on the cluster's queue like the
	// events that change it (an approved plan runs in its turn, under the lock).
	TypePlanApproved = "plan-approved"
	TypePlanDenied   = "plan-denied"
)

// TypeInfo describes one event type.
type TypeInfo struct {
	Name    string
	Summary string // one line, for help texts
}

// Types returns the event types, in a stable order.
func Types() []TypeInfo {
	return []TypeInfo{
		{TypeBrokerOverloaded, "move partition leadership off a broker (preferred-replica swap, then one preferred election)"},
		{TypeReplicaChangeRequested, "make a broker the preferred leader of partitions, or raise/lower a topic's replication factor"},
		{TypeLogDirMoveRequested, "move replicas between the log directories (disks) of one broker"},
		{TypeBrokerFailed, "recreate every replica of a broker that is gone for good on the other brokers (refused while the broker is alive)"},
		{TypeBrokerDrain, "empty a live broker: shed its leadership, then copy its replicas elsewhere, throttled"},
		{TypeBrokerAdded, "move onto new or empty brokers the fewest replicas and leaders that even out the cluster"},
		{TypeClusterPause, "switch the automation off for a cluster: its events wait in order, not run (dry runs are still answered), until cluster-resume or data.until; an operation in flight finishes"},
		{TypeClusterResume, "switch the automation back on for a paused cluster: its waiting events run in publish order"},
		{TypeOperationCancel, "cancel an event: one waiting never runs; one running stops within seconds, copies in flight cancelled, what is not finished back as before, throttles put back (result cancelled)"},
		{TypePlanApproved, "approve a plan awaiting approval (data.plan_id): it runs exactly as stored if nothing it depends on changed, else is rejected naming each difference"},
		{TypePlanDenied, "deny a plan awaiting approval (data.plan_id, data.reason): its event ends denied, nothing changed"},
		{TypePartitionOffline, "elect a leader for partitions that have none: a clean election where an in-sync replica is alive; unclean only when allowed (refused otherwise, naming the last in-sync replicas and the live candidates with their log end offsets)"},
	}
}

// ControlTypes are the types of the control events: a consumer of their own takes them
// for each cluster, so that they are not queued behind the cluster's other events.
func ControlTypes() []string {
	return []string{TypeClusterPause, TypeClusterResume, TypeOperationCancel}
}

// ControlType reports whether typ is one of [ControlTypes].
func ControlType(typ string) bool { return slices.Contains(ControlTypes(), typ) }

// KnownType reports whether typ is one of the event types of [Types].
func KnownType(typ string) bool {
	for _, t := range Types() {
		if t.Name == typ {
			return true
		}
	}
	return false
}

// Envelope is a CloudEvents 1.0 event in structured JSON mode. Its fields are
// the CloudEvents context attributes kafkamender uses, plus the expiresat
// extension; Data is the request, a JSON object whose fields depend on Type.
type Envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            time.Time       `json:"time,omitzero"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	ExpiresAt       time.Time       `json:"expiresat,omitzero"`
	Data            json.RawMessage `json:"data,omitempty"`
}

// Validate checks the envelope attributes and that Data is a JSON object. It
// does not check the fields of Data, which depend on the event type. It
// reports every problem at once, joined.
func (e *Envelope) Validate() error {
	var errs []error
	if e.SpecVersion != SpecVersion {
		errs = append(errs, fmt.Errorf("specversion: want %q, got %s", SpecVersion, clip(e.SpecVersion)))
	}
	if e.ID == "" {
		errs = append(errs, errors.New("id: required"))
	} else if err := CheckID(e.ID); err != nil {
		// The id is the last token of the result subject.
		errs = append(errs, fmt.Errorf("id: %s: %w", clip(e.ID), err))
	}
	if e.Source == "" {
		errs = append(errs, errors.New("source: required"))
	} else if err := checkText(e.Source, MaxTextLength); err != nil {
		errs = append(errs, fmt.Errorf("source: %w", err))
	}
	switch {
	case e.Type == "":
		errs = append(errs, errors.New("type: required"))
	case !KnownType(e.Type):
		errs = append(errs, fmt.Errorf("type: unknown event type %s", clip(e.Type)))
	}
	if e.DataContentType != "" && !mediaTypeRE.MatchString(e.DataContentType) {
		errs = append(errs, fmt.Errorf("datacontenttype: want %q, got %s (ASCII only; parameters such as charset=utf-8 are allowed)", ContentTypeJSON, clip(e.DataContentType)))
	}
	if len(e.Data) == 0 {
		errs = append(errs, errors.New("data: required"))
	} else if err := CheckObject(e.Data); err != nil {
		errs = append(errs, fmt.Errorf("data: %w", err))
	}
	return errors.Join(errs...)
}

// Subject returns the subject an event of type typ about cluster is published
// on. It does not validate its arguments; see [ValidToken] and [KnownType].
func Subject(cluster, typ string) string {
	return EventsSubjectPrefix + "." + cluster + "." + typ
}

// SubjectMatches reports whether the subject filter (NATS wildcards: '*' one token, '>'
// the rest, at least one) matches subject.
func SubjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// ValidToken reports whether s can be used as one token of a NATS subject in
// the event contract: non-empty, only ASCII letters, digits, '-' and '_'.
// NATS itself allows more, but '.', '*', '>' and whitespace would change the
// meaning of the subject, and a small alphabet keeps names portable.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// CheckObject returns an error unless raw is exactly one JSON object.
func CheckObject(raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return errors.New("want a JSON object, got nothing")
	}
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		if err == nil { // json.Valid and json.Unmarshal disagree only in theory
			err = errors.New("invalid JSON")
		}
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("want a JSON object, got %s", jsonKind(trimmed[0]))
	}
	return nil
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// NewID returns a random version 4 UUID, the default event id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
