package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Subjects of results and progress (their stream: names.go).
const (
	ResultsSubjectPrefix  = "kafkamender.results"
	ResultsSubjects       = ResultsSubjectPrefix + ".>"
	ProgressSubjectPrefix = "kafkamender.progress"
)

// ResultSubject is where the result of event id is published.
func ResultSubject(id string) string { return ResultsSubjectPrefix + "." + id }

// ResultPartsSubject is the subject prefix of the parts of a result too large for one
// message: part i is on ResultPartsSubject(id, nonce) + "." + i (see ResultPartSubject),
// one nonce per publish. Heads (ResultSubject) never have more than three tokens.
func ResultPartsSubject(id, nonce string) string { return ResultSubject(id) + ".parts." + nonce }

// ResultPartSubject is the subject of part i of a result stored in parts.
func ResultPartSubject(id, nonce string, i int) string {
	return ResultPartsSubject(id, nonce) + "." + strconv.Itoa(i)
}

// ProgressSubject is where progress of event id is published.
func ProgressSubject(id string) string { return ProgressSubjectPrefix + "." + id }

// Status is the outcome of an event.
type Status string

const (
	StatusSucceeded Status = "succeeded" // done and verified
	StatusNoop      Status = "noop"      // already so: nothing to do
	StatusPlanned   Status = "planned"   // dry run: changes lists the plan
	StatusPartial   Status = "partial"   // some partitions skipped, with reasons
	StatusRejected  Status = "rejected"  // invalid request; nothing changed
	StatusExpired   Status = "expired"   // expiresat passed before it ran
	// StatusCancelled: an operation-cancel stopped it: before it ran (nothing changed), or
	// while it ran (what was finished keeps its new state, listed in changes; the rest went
	// back to its state before the event; throttles put back).
	StatusCancelled Status = "cancelled"
	StatusFailed    Status = "failed" // attempted; error says what, changes what was done
	// StatusDenied: a person denied its plan (plan-denied); nothing changed.
	StatusDenied Status = "denied"

	// Interim statuses: published on the result subject for whoever waits, never stored
	// as the event's result (its final result follows).
	//
	// StatusAwaitingApproval: its plan (changes) waits for a person's approval (plan_id,
	// until expires_at); StatusApproved: the plan was approved and runs now.
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusApproved         Status = "approved"
)

// Interim reports whether the status is not an event's final one (see
// StatusAwaitingApproval): a waiter keeps waiting for the final result.
func (s Status) Interim() bool { return s == StatusAwaitingApproval || s == StatusApproved }

// OK reports whether the status means the request holds now (for the emitter's exit code).
func (s Status) OK() bool { return s == StatusSucceeded || s == StatusNoop || s == StatusPlanned }

// Result is what a worker publishes for every event (docs/contract.md, "Results"). The
// fields up to Skipped are the documented format; the others are optional additions.
type Result struct {
	ID                 string    `json:"id"`
	Type               string    `json:"type"`
	Cluster            string    `json:"cluster"`
	Status             Status    `json:"status"`
	Error              string    `json:"error"`
	Strategy           string    `json:"strategy"`
	Attempt            int       `json:"attempt"`
	Worker             string    `json:"worker"`
	StartedAt          time.Time `json:"started_at"`
	FinishedAt         time.Time `json:"finished_at"`
	ControllerFailover bool      `json:"controller_failover"`
	Changes            []Change  `json:"changes"`
	Skipped            []Skip    `json:"skipped"`

	// Noop lists partitions that were already as asked.
	Noop []TopicPartition `json:"noop,omitempty"`
	// Reason echoes the request's reason, for the audit trail.
	Reason string `json:"reason,omitempty"`
	// Note explains a result in words, e.g. why an alert within its cool-down was a noop.
	Note string `json:"note,omitempty"`
	// PreviousEvent names the earlier event a noop defers to (alert storms).
	PreviousEvent string `json:"previous_event,omitempty"`
	// Replayed is set when this is an earlier result published again because the same
	// event id arrived again (it did not run twice).
	Replayed bool `json:"replayed,omitempty"`
	// ThrottlesKept lists throttle configs the operation had set that someone else changed
	// while it ran: left with their value, not restored.
	ThrottlesKept []KeptThrottle `json:"throttles_kept,omitempty"`
	// PlanID names the plan that waits for approval (awaiting_approval), or that was
	// approved or denied, for the event; ExpiresAt is when it expires unanswered.
	PlanID    string    `json:"plan_id,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Truncated is set when the result is too large for one message: it is stored in
	// parts, and what is published on the result subject (the head) has its lists cut to
	// their first entries (see Head). A result read whole (pipeline.ReadResult) has its
	// lists whole and keeps Truncated, which says where they are stored; encoding it gives
	// the head again.
	Truncated *Truncated `json:"truncated,omitempty"`
}

// Truncated says that a result's lists are cut in the message on its subject (the head),
// how long they are, and where the whole result is: in Parts messages of the results
// stream, on Subject.0 … Subject.<Parts-1>, whose bodies, joined, are the whole result
// (JSON, without "truncated"), of Size bytes with the given SHA-256 (hex).
type Truncated struct {
	Changes int    `json:"changes"`
	Skipped int    `json:"skipped"`
	Noop    int    `json:"noop"`
	Parts   int    `json:"parts"`
	Size    int    `json:"size"`
	SHA256  string `json:"sha256"`
	Subject string `json:"subject"`
}

// HeadBytes bounds the lists of a head: changes, then skipped, then noop keep their first
// entries while the head stays within HeadBytes. headTextBytes bounds each of error,
// note and reason in a head.
const (
	HeadBytes     = 64 << 10
	headTextBytes = 4 << 10
)

// MarshalJSON encodes r; a result with Truncated set is encoded as its head (Head), so
// that a stored result read whole and published again is the message the stream holds.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	if r.Truncated == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(plain(r.Head()))
}

// Head is r as the message on its subject holds it when r is too large for one (r has
// Truncated set): error, note and reason cut to 4 KiB each, and changes, skipped and noop
// to the first entries that keep the head within HeadBytes, in that order. It depends
// on r alone (not on replayed), so the head of a replay is the stored head.
func (r Result) Head() Result {
	h := r
	h.Error, h.Note, h.Reason = cutText(r.Error), cutText(r.Note), cutText(r.Reason)
	h.Changes, h.Skipped, h.Noop = []Change{}, []Skip{}, nil
	base := h
	base.Replayed = false
	type plain Result
	fixed, err := json.Marshal(plain(base))
	if err != nil {
		return h
	}
	budget := HeadBytes - len(fixed)
	h.Changes = prefix(r.Changes, &budget)
	h.Skipped = prefix(r.Skipped, &budget)
	if noop := prefix(r.Noop, &budget); len(noop) > 0 {
		h.Noop = noop
	}
	return h
}

// prefix returns the first entries of list whose encodings fit in *budget (each with a
// separating comma), and takes their size from it; never nil.
func prefix[T any](list []T, budget *int) []T {
	n := 0
	for _, e := range list {
		raw, err := json.Marshal(e)
		if err != nil || len(raw)+1 > *budget {
			break
		}
		*budget -= len(raw) + 1
		n++
	}
	return append(make([]T, 0, n), list[:n]...)
}

// cutText cuts s to headTextBytes (at a rune boundary), marked with "…".
func cutText(s string) string {
	if len(s) <= headTextBytes {
		return s
	}
	n := headTextBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// AddNote appends a sentence to Note.
func (r *Result) AddNote(s string) {
	if s == "" || strings.Contains(r.Note, s) {
		return
	}
	if r.Note != "" {
		r.Note += " "
	}
	r.Note += s
}

// Progress is a progress report of a copy (a replication-factor change's new replicas, or
// a log-dir move's future replicas), published on kafkamender.progress.<id> while it runs.
// Progress reports are not stored: they are for whoever waits.
type Progress struct {
	ID              string `json:"id"`
	Batch           int    `json:"batch"`
	Batches         int    `json:"batches"`
	PartitionsDone  int    `json:"partitions_done"`
	PartitionsTotal int    `json:"partitions_total"`
	BytesCopied     int64  `json:"bytes_copied"`
	BytesExpected   int64  `json:"bytes_expected"`
	// Paused says why the event waits: before it runs, that its cluster is paused
	// (cluster-pause: who paused it, since and until when, why); while it runs, why the
	// next batch waits (partitions under min.insync.replicas for a reason not the
	// operation's). Empty while copies run.
	Paused string `json:"paused,omitempty"`
}
