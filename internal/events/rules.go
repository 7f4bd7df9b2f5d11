package events

// The rules for the values of an event, each defined once: Decode enforces them, and the
// JSON Schemas of docs/schemas state them (the tests of this package check that both take
// and refuse the same events, at each limit, and that the schemas' patterns are these).

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of the names of the contract: each reaches NATS subjects and headers, results and
// log lines.
const (
	// MaxSubjectLength bounds an event subject, checked before anything is read from it: a
	// valid one is at most 19+1+MaxClusterNameLength+1+24 bytes.
	MaxSubjectLength = 256
	// MaxIDLength bounds an event id: the last token of its result and progress subjects,
	// its JetStream message id, a field of log lines. A UUID has 36 characters, the
	// Alertmanager bridge's ids at most 128 (see package alertmanager).
	MaxIDLength = 128
	// MaxClusterNameLength bounds a cluster name: a token of event and dead-letter subjects,
	// a key of the workers' buckets, a label of their metrics, part of environment
	// variable names.
	MaxClusterNameLength = 64
)

// CheckClusterName returns nil, or why name cannot name a cluster (the configuration's,
// an event subject's, the Alertmanager bridge's): a cluster name is a subject token (see
// [ValidToken]) of at most MaxClusterNameLength characters.
func CheckClusterName(name string) error { return checkToken(name, MaxClusterNameLength) }

// ValidClusterName reports whether CheckClusterName takes name.
func ValidClusterName(name string) bool { return CheckClusterName(name) == nil }

// CheckID returns nil, or why id cannot be an event id: a subject token (see [ValidToken])
// of at most MaxIDLength characters.
func CheckID(id string) error { return checkToken(id, MaxIDLength) }

// ValidID reports whether CheckID takes id.
func ValidID(id string) bool { return CheckID(id) == nil }

func checkToken(s string, limit int) error {
	switch {
	case len(s) > limit:
		return fmt.Errorf("%d characters, over the limit of %d", len(s), limit)
	case !ValidToken(s):
		return errors.New("not a valid subject token (want letters, digits, '-' or '_')")
	}
	return nil
}

// timePattern is an RFC 3339 date-time (section 5.6) as the contract takes it, the
// pattern of the schemas' timestamps: four-digit year, two-digit month, day, hour, minute
// and second, each within its range (the day within its month, February 29 only in a leap
// year; no leap second: a time of kafkamender has none), an optional fraction after a
// '.', of at most nine digits (nanoseconds: nothing is cut silently), then Z or ±hh:mm
// (hh at most 23, mm at most 59). "T" and "Z" may be lower case, as RFC 3339's note allows
// and date-time validators take them. ASCII only.
const timePattern = `^(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)` +
	`|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)` +
	`[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`

var timeRE = regexp.MustCompile(timePattern)

// errNotTime says what a time must look like.
var errNotTime = errors.New("is not an RFC 3339 time (e.g. 2026-11-29T10:00:00Z: two-digit fields within their ranges, a '.' before a fraction of at most 9 digits, Z or ±hh:mm)")

// parseTime reads an RFC 3339 date-time by timePattern.
func parseTime(s string) (time.Time, error) {
	if !timeRE.MatchString(s) {
		return time.Time{}, fmt.Errorf("%s %w", clip(s), errNotTime)
	}
	// The pattern took only what time.Parse takes, but for lower-case t and z.
	t, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %w", clip(s), errNotTime)
	}
	return t, nil
}

// mediaTypePattern is the datacontenttype of every event: application/json as RFC 9110
// writes a media type (section 8.3.1), in any case, with optional parameters (a token, '=',
// a token or a quoted string), spaces around them and around the whole; ASCII only. The
// decoder and the schemas read it by this one pattern.
const mediaTypePattern = `^ *[Aa][Pp][Pp][Ll][Ii][Cc][Aa][Tt][Ii][Oo][Nn]/[Jj][Ss][Oo][Nn]` +
	`(?: *;(?: *` + httpToken + `=(?:` + httpToken + `|"(?:[ !#-\[\]-~]|\\[ -~])*"))?)* *$`

// httpToken is a token of RFC 9110 (section 5.6.2).
const httpToken = "[!#$%&'*+.^_`|~0-9A-Za-z-]+"

var mediaTypeRE = regexp.MustCompile(mediaTypePattern)

// durationPattern is a Go duration as time.ParseDuration reads it, but for a sign: the
// shape of a timeout (then it must also be within Go's range of durations, and positive).
const durationPattern = `^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`

var durationRE = regexp.MustCompile(durationPattern)

// MaxTextLength bounds the free text of an event, in characters (Unicode code points, as
// JSON Schema's maxLength counts them): source, reason, the attributes subject and
// dataschema, string extension values. At most 4 KiB of UTF-8: a result's head keeps its
// reason whole.
const MaxTextLength = 1024

// checkText returns nil, or why s is no text of the contract: text is UTF-8, at most limit
// characters, none of them a control character (Unicode's Cc, U+0000 to U+001F and U+007F
// to U+009F: CloudEvents forbids them in its strings, and they would break log lines).
func checkText(s string, limit int) error {
	if !utf8.ValidString(s) {
		return errors.New("not UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return fmt.Errorf("%d characters, over the limit of %d", n, limit)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("a control character (%U) at byte %d", r, i)
		}
	}
	return nil
}

// Reason returns s as a valid reason: each control character (a newline, a tab) turned
// into a space, cut to MaxTextLength characters (its last one "…" when cut). For producers
// whose text comes from elsewhere (the Alertmanager bridge: an alert's summary).
func Reason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > MaxTextLength {
		s = string([]rune(s)[:MaxTextLength-1]) + "…"
	}
	return s
}

// MaxTopicNameLength is Kafka's limit of a topic name.
const MaxTopicNameLength = 249

// CheckTopicName returns nil, or why name cannot name a Kafka topic, by Kafka's own rule
// (Topic.validate): 1 to 249 ASCII letters, digits, '.', '_' and '-', but not "." or "..".
func CheckTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("empty: a topic name has 1 to 249 characters")
	case name == "." || name == "..":
		return errors.New(`"." and ".." are not topic names`)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("longer than Kafka's limit of %d characters (%d)", MaxTopicNameLength, len(name))
	}
	for _, r := range name {
		if r >= utf8.RuneSelf || !IsTopicNameByte(byte(r)) {
			return fmt.Errorf("%q is not allowed in a Kafka topic name (letters, digits, '.', '_' and '-')", r)
		}
	}
	return nil
}

// IsTopicNameByte reports whether c may stand in a Kafka topic name: an ASCII letter or
// digit, '.', '_' or '-'. Callers that must not echo what they check (the offline log-dir
// tool) say where a name breaks the rule with it, and CheckTopicName what breaks it.
func IsTopicNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// MaxDirLength bounds from_dir and to_dir, in characters: Linux's PATH_MAX is 4096 bytes, a
// log directory's path is a few dozen.
const MaxDirLength = 1024

// checkDir returns nil, or why dir cannot name a log directory of a broker: an absolute
// path, as text (see checkText) of at most MaxDirLength characters, with no ".." element
// (it would name another directory than it reads as).
func checkDir(dir string) error {
	if err := checkText(dir, MaxDirLength); err != nil {
		return err
	}
	if !strings.HasPrefix(dir, "/") {
		return fmt.Errorf("%s is not an absolute path (as the broker's log.dirs names it)", clip(dir))
	}
	if slices.Contains(strings.Split(dir, "/"), "..") {
		return fmt.Errorf("%s has a \"..\" element", clip(dir))
	}
	return nil
}

// Limits of the numbers and lists of an event's data.
const (
	// MaxSafeInteger is 2^53−1, the largest integer that JavaScript's numbers (and every
	// JSON parser that reads numbers as 64-bit floats) hold exactly: the cap of every 64-bit
	// field, so that what one producer writes, every other reads alike.
	MaxSafeInteger = 1<<53 - 1
	// MaxReplicationFactor is Kafka's: a replication factor is a 16-bit integer in its
	// protocol.
	MaxReplicationFactor = math.MaxInt16
	// MaxListedPartitions bounds the list partitions: as many as the worker's scale
	// benchmark has in its whole cluster, ten times the largest topic its tests change.
	MaxListedPartitions = 100_000
	// MaxListedTopics bounds the lists topics and exclude_topics.
	MaxListedTopics = 10_000
	// MaxListedBrokers bounds the list brokers (broker-added): far more brokers than a
	// cluster adds at once.
	MaxListedBrokers = 1000
)

// intRanges are the smallest and largest value of each integer field of the data (of each
// element, for partitions and brokers), by JSON name.
var intRanges = map[string][2]int64{
	"broker": {0, math.MaxInt32}, "preferred_leader": {0, math.MaxInt32}, "partition": {0, math.MaxInt32},
	"partitions": {0, math.MaxInt32}, "brokers": {0, math.MaxInt32}, "max_partitions": {0, MaxSafeInteger},
	"throttle_bytes_per_sec": {0, MaxSafeInteger}, "replication_factor": {1, MaxReplicationFactor},
}

// listCaps are the most entries of each list field of the data, by JSON name.
var listCaps = map[string]int{"partitions": MaxListedPartitions, "topics": MaxListedTopics, "exclude_topics": MaxListedTopics,
	"brokers": MaxListedBrokers}

// overMax returns an error naming field when v is over its largest value, else nil.
func overMax(field string, v int64) error {
	if r := intRanges[field]; v > r[1] {
		return fmt.Errorf("data.%s: %d is over the limit of %d", field, v, r[1])
	}
	return nil
}

// maxProblems bounds the problems a rejection lists (an event of 10,000 topics may have as
// many wrong): its message goes into results and log lines.
const maxProblems = 20

// joinBounded joins errs as errors.Join does, its joined errors flattened, keeping the
// first maxProblems and saying how many more there are.
func joinBounded(errs ...error) error {
	var flat []error
	var walk func(errs []error)
	walk = func(errs []error) {
		for _, err := range errs {
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				walk(j.Unwrap())
			} else if err != nil {
				flat = append(flat, err)
			}
		}
	}
	walk(errs)
	if len(flat) > maxProblems {
		flat = append(flat[:maxProblems], fmt.Errorf("(and %d more problems)", len(flat)-maxProblems))
	}
	return errors.Join(flat...)
}

// maxQuoted bounds what an error message quotes of a value from an event, in characters:
// a message reaches results and log lines.
const maxQuoted = 128

// clip quotes s for an error message, cut to maxQuoted characters.
func clip(s string) string {
	if n := 0; len(s) > maxQuoted {
		for i := range s {
			if n == maxQuoted {
				return fmt.Sprintf("%q…", s[:i])
			}
			n++
		}
	}
	return fmt.Sprintf("%q", s)
}
