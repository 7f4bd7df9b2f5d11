package check

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
)

const rulesFile = "deployments/prometheus/kafkamender-rules.yaml"

// parseRules parses and validates a rule file as Prometheus loads it: unknown fields fail,
// every expression parses, every template of the annotations and labels parses.
func parseRules(t testing.TB, data []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, promqlParser, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("%s: %v", rulesFile, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule group", rulesFile)
	}
	return groups
}

func TestRules(t *testing.T) {
	groups := parseRules(t, readRepoFile(t, rulesFile))
	seen := map[string]bool{}
	var queried []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert == "" {
				t.Errorf("%s: recording rule %s: this file is for alerts", g.Name, r.Record)
			}
			if seen[name] {
				t.Errorf("%s: alert %s defined twice", g.Name, name)
			}
			seen[name] = true
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", name, sev)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s annotation", name, a)
				}
			}
			e, err := ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v", name, err)
				continue
			}
			for _, err := range CheckExpr(e) {
				t.Errorf("alert %s: %v", name, err)
			}
			queried = append(queried, QueriedSeries(e)...)
		}
	}
	// What the rules must watch: the workers being scraped and ready, their dependencies,
	// failed events, dead letters, the lock, operations that do not end.
	for _, want := range []string{
		"up",
		"kafkamender_ready",
		"kafkamender_dependency_up",
		"kafkamender_events_total",
		"kafkamender_dead_letters_total",
		"kafkamender_lock_wait_seconds_bucket",
		"kafkamender_lock_waiting",
		"kafkamender_operation_started_timestamp_seconds",
	} {
		if !slices.Contains(queried, want) {
			t.Errorf("no rule queries %s", want)
		}
	}
}

// TestCheckExpr: the expression checks find what they are for, and pass what is right.
func TestCheckExpr(t *testing.T) {
	for _, tc := range []struct {
		expr string
		bad  bool
	}{
		{`sum by (type, status) (rate(kafkamender_events_total[5m]))`, false},
		{`histogram_quantile(0.9, sum by (le, cluster) (rate(kafkamender_lock_wait_seconds_bucket{cluster=~".*"}[5m])))`, false},
		{`absent(up{job="kafkamender"} == 1)`, false},
		{`kafkamender_dependency_up{pod="x"} == 0`, false},
		{`kafkamender_events_totl`, true},                                                                    // unknown metric
		{`kafkamender_event_duration_seconds`, true},                                                         // histogram without suffix
		{`kafkamender_events_total_bucket`, true},                                                            // suffix on a counter
		{`kafkamender_events_total{cluster="local"}`, true},                                                  // no such label
		{`sum by (cluster) (rate(kafkamender_events_total[5m]))`, true},                                      // grouping label absent
		{`rate(kafkamender_lock_waiting[5m])`, true},                                                         // rate of a gauge
		{`deriv(kafkamender_events_total[5m])`, true},                                                        // deriv of a counter
		{`histogram_quantile(0.9, sum by (cluster) (rate(kafkamender_lock_wait_seconds_bucket[5m])))`, true}, // le dropped
		{`histogram_quantile(0.9, rate(kafkamender_lock_wait_seconds_sum[5m]))`, true},                       // not buckets
		{`kafkamender_ready * on (cluster) group_left kafkamender_lock_waiting`, false},                      // cluster on one side
		{`kafkamender_ready * on (shard) kafkamender_lock_waiting`, true},                                    // on a label neither has
		{`{__name__=~"kafkamender_.*"}`, true},                                                               // no metric name
		{`sum without (instance) (kafkamender_ready)`, false},
	} {
		e, err := ParseExpr(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		errs := CheckExpr(e)
		if got := len(errs) > 0; got != tc.bad {
			t.Errorf("CheckExpr(%s) = %v; want problems: %v", tc.expr, errs, tc.bad)
		}
	}
}

func TestExpandGrafana(t *testing.T) {
	vars := []string{"datasource", "cluster"}
	got, err := ExpandGrafana(`sum(rate(x{cluster=~"$cluster"}[$__rate_interval])) + y{c=~"${cluster}"}[[cluster]]`, vars)
	if want := `sum(rate(x{cluster=~".*"}[5m])) + y{c=~".*"}.*`; err != nil || got != want {
		t.Errorf("ExpandGrafana = %q, %v; want %q", got, err, want)
	}
	if _, err := ExpandGrafana(`x{instance=~"$instance"}`, vars); err == nil {
		t.Error("ExpandGrafana accepted a variable the dashboard does not define")
	}
}
