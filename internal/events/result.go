package events

import (
	"strings"
	"time"
)

// Subjects and streams of results and progress.
const (
	ResultsSubjectPrefix  = "kafkamender.results"
	ResultsSubjects       = ResultsSubjectPrefix + ".>"
	ResultsStream         = "KAFKAMENDER_RESULTS"
	ProgressSubjectPrefix = "kafkamender.progress"
)

// ResultSubject is where the result of event id is published.
func ResultSubject(id string) string { return ResultsSubjectPrefix + "." + id }

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
	StatusFailed    Status = "failed"    // attempted; error says what, changes what was done
)

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
}
