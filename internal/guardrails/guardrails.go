// Package guardrails holds the limits that every event must stay within, whatever it asks
// (the configuration's guardrails section, docs/repairs.md#guardrails): the sources allowed
// to send each event type, the protected topics, the most partitions one event may change
// and the most operations per hour on one cluster.
//
// It is pure: no I/O, no clock of its own. The handlers keep the hourly record of each
// cluster in NATS key-value and ask [Admit] whether one more operation fits it.
//
// Every refusal is a [*Violation], whose message starts with the rule that refused:
//
//	guardrails.allowed_sources: source "x" may not send broker-overloaded events (allowed: alertmanager)
package guardrails

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamender/kafkamender/internal/events"
)

// The rules, named as in the configuration: a [Violation] names the one that refused.
const (
	RuleAllowedSources  = "guardrails.allowed_sources"
	RuleProtectedTopics = "guardrails.protected_topics"
	RuleMaxPartitions   = "guardrails.max_partitions_per_event"
	RuleMaxOperations   = "guardrails.max_operations_per_hour"
	RuleMaxTimeout      = "guardrails.max_timeout"
	RuleMinThrottle     = "guardrails.min_throttle_bytes_per_sec"
)

// DefaultMaxTimeout is guardrails.max_timeout when the configuration does not set it.
const DefaultMaxTimeout = 24 * time.Hour

// Window is how far back operations count toward the hourly cap.
const Window = time.Hour

// Violation is an event refused by a guardrail: its result is "rejected", nothing changed.
type Violation struct {
	Rule   string // one of the Rule* constants
	Reason string
}

func (v *Violation) Error() string { return v.Rule + ": " + v.Reason }

// Rejection marks the violation as a rejection of the event: nothing was changed (see
// operation.IsRejection).
func (v *Violation) Rejection() bool { return true }

// Limits are the guardrails as configured: the configuration's guardrails section
// (internal/config decodes it; docs/configuration.md documents each key), which the
// handlers take as it is. An event outside one gets a "rejected" result naming the rule,
// and nothing is changed (docs/repairs.md#guardrails). Zero values mean no limit.
type Limits struct {
	// ProtectedTopics are RE2 regular expressions: a topic that one of them matches (any
	// part of its name; anchor with ^ and $) is never changed. An event that names one is
	// rejected; an operation that picks topics itself skips its partitions ("protected").
	ProtectedTopics []string `yaml:"protected_topics"`
	// MaxPartitionsPerEvent caps the partitions one event's plan may change; a plan over it
	// is rejected whole. 0: no cap.
	MaxPartitionsPerEvent int `yaml:"max_partitions_per_event"`
	// MaxOperationsPerHour caps the operations that write to one Kafka cluster within an
	// hour, across the whole fleet (recorded in NATS key-value); 0: no cap, and nothing is
	// recorded.
	MaxOperationsPerHour int `yaml:"max_operations_per_hour"`
	// AllowedSources lists, per event type, the CloudEvents sources allowed to send it
	// (exact match); a type not listed may come from any source.
	AllowedSources map[string][]string `yaml:"allowed_sources"`
	// MaxTimeout caps the timeout an event may ask for (timeout of a replication-factor
	// change or a log-dir move): a longer one is rejected, so that no event holds a
	// cluster's lock, and the throttles of a copy, for longer. 0: no cap (the
	// configuration's default is DefaultMaxTimeout).
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// MinThrottleBytesPerSec is the least throttle_bytes_per_sec an event may ask for: a
	// lower one is rejected (a copy throttled to a trickle holds the cluster's lock and
	// throttles for its whole timeout). 0: no minimum.
	MinThrottleBytesPerSec int64 `yaml:"min_throttle_bytes_per_sec"`
}

// Clone is a deep copy: its lists are not the original's.
func (l Limits) Clone() Limits {
	l.ProtectedTopics = slices.Clone(l.ProtectedTopics)
	if l.AllowedSources != nil {
		m := make(map[string][]string, len(l.AllowedSources))
		for typ, list := range l.AllowedSources {
			m[typ] = slices.Clone(list)
		}
		l.AllowedSources = m
	}
	return l
}

// Problem is what is wrong with one field of Limits: Field is its path in the
// configuration (guardrails.protected_topics[1]).
type Problem struct {
	Field string
	Err   error
}

// Problems lists what is wrong with l, field by field, in the order of the fields (the
// configuration's validation reports them; New refuses them).
func (l Limits) Problems() []Problem {
	var out []Problem
	add := func(field string, err error) { out = append(out, Problem{Field: field, Err: err}) }
	for i, pattern := range l.ProtectedTopics {
		if _, err := Compile(pattern); err != nil {
			add(fmt.Sprintf("%s[%d]", RuleProtectedTopics, i), err)
		}
	}
	if l.MaxPartitionsPerEvent < 0 {
		add(RuleMaxPartitions, fmt.Errorf("%d: must be 0 (no cap) or more", l.MaxPartitionsPerEvent))
	}
	if l.MaxOperationsPerHour < 0 {
		add(RuleMaxOperations, fmt.Errorf("%d: must be 0 (no cap) or more", l.MaxOperationsPerHour))
	}
	if l.MaxTimeout < 0 {
		add(RuleMaxTimeout, fmt.Errorf("%s: must be 0 (no cap) or more", l.MaxTimeout))
	}
	if l.MinThrottleBytesPerSec < 0 {
		add(RuleMinThrottle, fmt.Errorf("%d: must be 0 (no minimum) or more", l.MinThrottleBytesPerSec))
	}
	for _, typ := range slices.Sorted(maps.Keys(l.AllowedSources)) {
		field := RuleAllowedSources + "." + typ
		if !events.ValidToken(typ) {
			field = RuleAllowedSources + "." + strconv.Quote(typ)
		}
		if !events.KnownType(typ) {
			add(field, fmt.Errorf("unknown event type (want one of %s)", strings.Join(typeNames(), ", ")))
			continue
		}
		sources := l.AllowedSources[typ]
		if len(sources) == 0 {
			add(field, errors.New("lists no source (leave the type out to allow any source)"))
		}
		for i, src := range sources {
			if src == "" {
				add(fmt.Sprintf("%s[%d]", field, i), errors.New("empty source"))
			}
		}
	}
	return out
}

func typeNames() []string {
	var out []string
	for _, t := range events.Types() {
		out = append(out, t.Name)
	}
	return out
}

// Rules are compiled Limits. They never change after New, so they are safe for concurrent
// use.
type Rules struct {
	protected     []*regexp.Regexp
	maxPartitions int
	maxOperations int
	sources       map[string][]string
	maxTimeout    time.Duration
	minThrottle   int64
}

// Compile compiles one protected-topic pattern. Its error shows the pattern, quoted, and
// the regexp's error without repeating the pattern's text.
func Compile(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pattern)
	if err == nil {
		return re, nil
	}
	if se, ok := errors.AsType[*syntax.Error](err); ok {
		return nil, fmt.Errorf("%q: error parsing regexp: %s", pattern, se.Code)
	}
	return nil, fmt.Errorf("%q: %v", pattern, err)
}

// New compiles l, or refuses it with its Problems, each prefixed with its field, as the
// configuration's validation (which refuses them first) reports them.
func New(l Limits) (*Rules, error) {
	var errs []error
	for _, p := range l.Problems() {
		errs = append(errs, fmt.Errorf("%s: %w", p.Field, p.Err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &Rules{maxPartitions: l.MaxPartitionsPerEvent, maxOperations: l.MaxOperationsPerHour, sources: map[string][]string{},
		maxTimeout: l.MaxTimeout, minThrottle: l.MinThrottleBytesPerSec}
	for _, p := range l.ProtectedTopics {
		re, _ := Compile(p) // Problems compiled it
		r.protected = append(r.protected, re)
	}
	for typ, list := range l.AllowedSources {
		r.sources[typ] = slices.Clone(list)
	}
	return r, nil
}

// Source refuses an event of type typ from source when the type has an allow-list that
// does not name the source (exactly).
func (r *Rules) Source(typ, source string) error {
	allowed, listed := r.sources[typ]
	if !listed || slices.Contains(allowed, source) {
		return nil
	}
	return &Violation{Rule: RuleAllowedSources, Reason: fmt.Sprintf("source %q may not send %s events (allowed: %s)", source, typ, strings.Join(allowed, ", "))}
}

// Protected reports whether topic is protected, and the pattern that protects it (the
// first that matches, in the configuration's order).
func (r *Rules) Protected(topic string) (pattern string, ok bool) {
	for _, re := range r.protected {
		if re.MatchString(topic) {
			return re.String(), true
		}
	}
	return "", false
}

// HasProtected reports whether any topic pattern is configured.
func (r *Rules) HasProtected() bool { return len(r.protected) > 0 }

// Topics refuses an event that names a protected topic explicitly, naming each one.
func (r *Rules) Topics(topics ...string) error {
	var matched []string
	seen := map[string]bool{}
	for _, t := range topics {
		if seen[t] {
			continue
		}
		seen[t] = true
		if p, ok := r.Protected(t); ok {
			matched = append(matched, fmt.Sprintf("topic %q matches %q", t, p))
		}
	}
	if len(matched) == 0 {
		return nil
	}
	return &Violation{Rule: RuleProtectedTopics, Reason: strings.Join(matched, "; ")}
}

// Asks refuses what an event asks for beyond the limits: a timeout over max_timeout, a
// throttle (other than 0: the configured default) under min_throttle_bytes_per_sec.
func (r *Rules) Asks(timeout time.Duration, throttle int64) error {
	if r.maxTimeout > 0 && timeout > r.maxTimeout {
		return &Violation{Rule: RuleMaxTimeout, Reason: fmt.Sprintf("timeout %s is over the cap of %s", timeout, r.maxTimeout)}
	}
	if r.minThrottle > 0 && throttle > 0 && throttle < r.minThrottle {
		return &Violation{Rule: RuleMinThrottle, Reason: fmt.Sprintf("throttle_bytes_per_sec %d is under the minimum of %d", throttle, r.minThrottle)}
	}
	return nil
}

// Partitions refuses a plan that changes more than the cap of partitions (n changes).
func (r *Rules) Partitions(n int) error {
	if r.maxPartitions == 0 || n <= r.maxPartitions {
		return nil
	}
	return &Violation{Rule: RuleMaxPartitions, Reason: fmt.Sprintf("the plan changes %d partitions, over the cap of %d", n, r.maxPartitions)}
}

// OperationsPerHour is the hourly cap of operations per cluster; 0: none.
func (r *Rules) OperationsPerHour() int { return r.maxOperations }

// Op is one operation that wrote to a cluster: the event and when it began writing.
type Op struct {
	Event string    `json:"event"`
	At    time.Time `json:"at"`
}

// Admit decides whether the operation of event may begin writing to cluster at now, given
// ops, the cluster's record, under the hourly cap limit (0: none). It returns the record to
// store: ops without those older than the [Window] (pruned), with the event added, oldest
// first; and whether it differs from ops (false: nothing to write).
//
// An event the record lists already (its operation was counted, then interrupted before
// its journal entry was written, and is tried again) is not counted again and is never
// refused. Otherwise, with limit or more operations in the window the event is refused with
// a [*Violation] that says when the window frees a place.
func Admit(ops []Op, cluster, event string, now time.Time, limit int) ([]Op, bool, error) {
	kept := make([]Op, 0, len(ops)+1)
	for _, o := range ops {
		if now.Sub(o.At) < Window {
			kept = append(kept, o)
		}
	}
	slices.SortStableFunc(kept, func(a, b Op) int { return a.At.Compare(b.At) })
	pruned := len(kept) != len(ops)
	if slices.ContainsFunc(kept, func(o Op) bool { return o.Event == event }) {
		return kept, pruned, nil
	}
	if limit > 0 && len(kept) >= limit {
		// The place frees when enough of the oldest leave the window for one more to fit.
		frees := kept[len(kept)-limit].At.Add(Window).UTC().Format("15:04:05Z07:00")
		reason := fmt.Sprintf("cluster %s ran %d operations in the last hour (the cap is %d); ", cluster, len(kept), limit)
		if len(kept) == limit {
			reason += "the oldest counts until " + frees
		} else {
			reason += "one more fits from " + frees
		}
		return kept, pruned, &Violation{Rule: RuleMaxOperations, Reason: reason}
	}
	kept = append(kept, Op{Event: event, At: now.UTC()})
	slices.SortStableFunc(kept, func(a, b Op) int { return a.At.Compare(b.At) }) // clocks of other workers may run ahead
	return kept, true, nil
}
