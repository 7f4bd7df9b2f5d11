package guardrails

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustNew(t *testing.T, l Limits) *Rules {
	t.Helper()
	r, err := New(l)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantViolation checks that err is a *Violation of rule whose message is want (or, for
// want "", that err is nil).
func wantViolation(t *testing.T, err error, rule, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("err = %v, want none", err)
		}
		return
	}
	v, ok := errors.AsType[*Violation](err)
	if !ok {
		t.Fatalf("err = %v (%T), want a *Violation", err, err)
	}
	if v.Rule != rule || err.Error() != want {
		t.Errorf("err = %q (rule %s)\nwant %q (rule %s)", err, v.Rule, want, rule)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		want []string // each a line of the error; none: no error
	}{
		{name: "nothing", l: Limits{}},
		{name: "everything", l: Limits{ProtectedTopics: []string{"^protected-", "^__consumer_offsets$"}, MaxPartitionsPerEvent: 10,
			MaxOperationsPerHour: 5, AllowedSources: map[string][]string{"broker-overloaded": {"alertmanager"}}}},
		{
			name: "bad patterns, by index",
			l:    Limits{ProtectedTopics: []string{"ok", "a(b", `\8`, "x**"}},
			want: []string{
				`guardrails.protected_topics[1]: "a(b": error parsing regexp: missing closing )`,
				`guardrails.protected_topics[2]: "\\8": error parsing regexp: invalid escape sequence`,
				`guardrails.protected_topics[3]: "x**": error parsing regexp: invalid nested repetition operator`,
			},
		},
		{
			name: "negative caps",
			l:    Limits{MaxPartitionsPerEvent: -1, MaxOperationsPerHour: -2},
			want: []string{
				"guardrails.max_partitions_per_event: -1: must be 0 (no cap) or more",
				"guardrails.max_operations_per_hour: -2: must be 0 (no cap) or more",
			},
		},
		{
			name: "allow-lists: unknown type, no source, empty source",
			l:    Limits{AllowedSources: map[string][]string{"broker-overload": {"a"}, "broker-overloaded": {"a", ""}, "replica-change-requested": {}}},
			want: []string{
				"guardrails.allowed_sources.broker-overload: unknown event type (want one of broker-overloaded, replica-change-requested, logdir-move-requested, broker-failed, broker-drain, broker-added, cluster-pause, cluster-resume, operation-cancel, plan-approved, plan-denied, partition-offline)",
				"guardrails.allowed_sources.broker-overloaded[1]: empty source",
				"guardrails.allowed_sources.replica-change-requested: lists no source (leave the type out to allow any source)",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.l)
			if len(tc.want) == 0 {
				if err != nil || r == nil {
					t.Fatalf("New = %v, %v; want rules", r, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want %q", tc.want)
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tc.want) {
				t.Errorf("error:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The rules keep their own copy of the allow-lists: changing the caller's map later does
// not change them.
func TestNewCopiesTheAllowLists(t *testing.T) {
	sources := map[string][]string{"broker-overloaded": {"alertmanager"}}
	r := mustNew(t, Limits{AllowedSources: sources})
	sources["broker-overloaded"][0] = "anyone"
	sources["logdir-move-requested"] = []string{"x"}
	if err := r.Source("broker-overloaded", "anyone"); err == nil {
		t.Error("a change of the caller's list changed the rules")
	}
	if err := r.Source("logdir-move-requested", "y"); err != nil {
		t.Errorf("a type added to the caller's map changed the rules: %v", err)
	}
}

func TestSource(t *testing.T) {
	r := mustNew(t, Limits{AllowedSources: map[string][]string{
		"broker-overloaded":        {"alertmanager"},
		"replica-change-requested": {"ops-pipeline", "kafkamender-emitter"},
	}})
	for _, tc := range []struct {
		typ, source string
		want        string
	}{
		{"broker-overloaded", "alertmanager", ""},
		{"broker-overloaded", "x", `guardrails.allowed_sources: source "x" may not send broker-overloaded events (allowed: alertmanager)`},
		{"broker-overloaded", "alertmanager/prod", `guardrails.allowed_sources: source "alertmanager/prod" may not send broker-overloaded events (allowed: alertmanager)`},
		{"broker-overloaded", "Alertmanager", `guardrails.allowed_sources: source "Alertmanager" may not send broker-overloaded events (allowed: alertmanager)`},
		{"replica-change-requested", "kafkamender-emitter", ""},
		{"replica-change-requested", "", `guardrails.allowed_sources: source "" may not send replica-change-requested events (allowed: ops-pipeline, kafkamender-emitter)`},
		{"logdir-move-requested", "anyone at all", ""}, // not listed: any source
	} {
		t.Run(tc.typ+"/"+tc.source, func(t *testing.T) {
			wantViolation(t, r.Source(tc.typ, tc.source), RuleAllowedSources, tc.want)
		})
	}
}

func TestProtected(t *testing.T) {
	r := mustNew(t, Limits{ProtectedTopics: []string{"^protected-", "^__consumer_offsets$", "audit"}})
	for _, tc := range []struct {
		topic, pattern string
	}{
		{"protected-a", "^protected-"},
		{"protected-", "^protected-"},
		{"unprotected-a", ""},
		{"__consumer_offsets", "^__consumer_offsets$"},
		{"__consumer_offsets_copy", ""},
		{"__transaction_state", ""},
		{"team-audit-log", "audit"}, // unanchored: any part of the name
		{"orders", ""},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			p, ok := r.Protected(tc.topic)
			if p != tc.pattern || ok != (tc.pattern != "") {
				t.Errorf("Protected(%q) = %q, %v; want %q", tc.topic, p, ok, tc.pattern)
			}
		})
	}
	if !r.HasProtected() || mustNew(t, Limits{}).HasProtected() {
		t.Error("HasProtected is wrong")
	}
}

func TestTopics(t *testing.T) {
	r := mustNew(t, Limits{ProtectedTopics: []string{"^protected-", "^__consumer_offsets$"}})
	for _, tc := range []struct {
		name   string
		topics []string
		want   string
	}{
		{"none named", nil, ""},
		{"none protected", []string{"orders", "events"}, ""},
		{"one", []string{"protected-a"}, `guardrails.protected_topics: topic "protected-a" matches "^protected-"`},
		{"each once, in order", []string{"orders", "__consumer_offsets", "protected-b", "__consumer_offsets"},
			`guardrails.protected_topics: topic "__consumer_offsets" matches "^__consumer_offsets$"; topic "protected-b" matches "^protected-"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantViolation(t, r.Topics(tc.topics...), RuleProtectedTopics, tc.want)
		})
	}
	if err := mustNew(t, Limits{}).Topics("protected-a"); err != nil {
		t.Errorf("without patterns: %v", err)
	}
}

func TestPartitions(t *testing.T) {
	for _, tc := range []struct {
		limit, n int
		want     string
	}{
		{0, 100000, ""},
		{10, 0, ""},
		{10, 10, ""},
		{10, 11, "guardrails.max_partitions_per_event: the plan changes 11 partitions, over the cap of 10"},
		{10, 12, "guardrails.max_partitions_per_event: the plan changes 12 partitions, over the cap of 10"},
		{1, 2, "guardrails.max_partitions_per_event: the plan changes 2 partitions, over the cap of 1"},
	} {
		r := mustNew(t, Limits{MaxPartitionsPerEvent: tc.limit})
		wantViolation(t, r.Partitions(tc.n), RuleMaxPartitions, tc.want)
	}
}

// The hourly window, with a clock the test moves: what counts, what is pruned, when a
// place frees, and that an event counted once is never counted or refused again.
func TestAdmit(t *testing.T) {
	base := time.Date(2026, 11, 29, 9, 42, 0, 0, time.UTC)
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	op := func(event string, min int) Op { return Op{Event: event, At: at(min)} }
	for _, tc := range []struct {
		name    string
		ops     []Op
		event   string
		now     time.Time
		limit   int
		want    []Op // the record to store
		changed bool
		err     string
	}{
		{name: "empty record", event: "e1", now: at(0), limit: 5, want: []Op{op("e1", 0)}, changed: true},
		{name: "no cap still records", ops: []Op{op("a", 0)}, event: "e1", now: at(1), want: []Op{op("a", 0), op("e1", 1)}, changed: true},
		{
			name:  "under the cap",
			ops:   []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30)},
			event: "e", now: at(40), limit: 5,
			want: []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)}, changed: true,
		},
		{
			name:  "at the cap: refused, nothing to write",
			ops:   []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)},
			event: "f", now: at(50), limit: 5,
			want: []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)},
			err:  "guardrails.max_operations_per_hour: cluster local ran 5 operations in the last hour (the cap is 5); the oldest counts until 10:42:00Z",
		},
		{
			name:  "one second before the oldest leaves: still refused",
			ops:   []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)},
			event: "f", now: at(60).Add(-time.Second), limit: 5,
			want: []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)},
			err:  "the oldest counts until 10:42:00Z",
		},
		{
			name:  "an hour after the oldest: it is pruned and the event fits",
			ops:   []Op{op("a", 0), op("b", 10), op("c", 20), op("d", 30), op("e", 40)},
			event: "f", now: at(60), limit: 5,
			want: []Op{op("b", 10), op("c", 20), op("d", 30), op("e", 40), op("f", 60)}, changed: true,
		},
		{
			name:  "everything old is pruned",
			ops:   []Op{op("a", -300), op("b", -61), op("c", -60)},
			event: "d", now: at(0), limit: 1,
			want: []Op{op("d", 0)}, changed: true,
		},
		{
			name:  "refused, the pruned record is still worth writing",
			ops:   []Op{op("old", -90), op("a", 0)},
			event: "b", now: at(10), limit: 1,
			want: []Op{op("a", 0)}, changed: true,
			err: "cluster local ran 1 operations in the last hour (the cap is 1); the oldest counts until 10:42:00Z",
		},
		{
			name:  "over the cap (it was lowered): when one more fits",
			ops:   []Op{op("a", 0), op("b", 10), op("c", 20)},
			event: "d", now: at(30), limit: 2,
			want: []Op{op("a", 0), op("b", 10), op("c", 20)},
			err:  "guardrails.max_operations_per_hour: cluster local ran 3 operations in the last hour (the cap is 2); one more fits from 10:52:00Z",
		},
		{
			name:  "counted already: not again, not refused",
			ops:   []Op{op("a", 0), op("b", 10)},
			event: "a", now: at(20), limit: 2,
			want: []Op{op("a", 0), op("b", 10)},
		},
		{
			name:  "counted already, with something to prune",
			ops:   []Op{op("old", -70), op("a", 0)},
			event: "a", now: at(20), limit: 1,
			want: []Op{op("a", 0)}, changed: true,
		},
		{
			name:  "counted over an hour ago: counts again",
			ops:   []Op{op("a", -61)},
			event: "a", now: at(0), limit: 1,
			want: []Op{op("a", 0)}, changed: true,
		},
		{
			name:  "kept oldest first, whatever the order stored or the clocks",
			ops:   []Op{op("c", 20), op("a", 0), op("ahead", 45)},
			event: "d", now: at(30), limit: 5,
			want: []Op{op("a", 0), op("c", 20), op("d", 30), op("ahead", 45)}, changed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := Admit(tc.ops, "local", tc.event, tc.now, tc.limit)
			if tc.err == "" {
				wantViolation(t, err, "", "")
			} else {
				if v, ok := errors.AsType[*Violation](err); !ok || v.Rule != RuleMaxOperations || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want a violation of %s containing %q", err, RuleMaxOperations, tc.err)
				}
			}
			if !slices.EqualFunc(got, tc.want, func(a, b Op) bool { return a.Event == b.Event && a.At.Equal(b.At) }) {
				t.Errorf("record = %v\nwant %v", got, tc.want)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
		})
	}
}

func TestAsks(t *testing.T) {
	r, err := New(Limits{MaxTimeout: 24 * time.Hour, MinThrottleBytesPerSec: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	none, err := New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rules    *Rules
		timeout  time.Duration
		throttle int64
		want     string
	}{
		{r, 0, 0, ""},
		{r, 24 * time.Hour, 1 << 20, ""},
		{r, 48 * time.Hour, 0, "guardrails.max_timeout: timeout 48h0m0s is over the cap of 24h0m0s"},
		{r, time.Hour, 10, "guardrails.min_throttle_bytes_per_sec: throttle_bytes_per_sec 10 is under the minimum of 1048576"},
		{none, 1000 * time.Hour, 1, ""},
	} {
		err := tc.rules.Asks(tc.timeout, tc.throttle)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("Asks(%s, %d) = %v, want %q", tc.timeout, tc.throttle, err, tc.want)
		}
		var v *Violation
		if err != nil && (!errors.As(err, &v) || !v.Rejection()) {
			t.Errorf("Asks(%s, %d): %T, want a rejection", tc.timeout, tc.throttle, err)
		}
	}
}
