package check

import (
	"strings"
	"testing"
)

// TestCheckExposition: the check the integration test applies to a running worker's
// /metrics finds what it is for, on a page made up here.
func TestCheckExposition(t *testing.T) {
	const page = `# HELP kafkamender_ready 1 when /readyz answers 200.
# TYPE kafkamender_ready gauge
kafkamender_ready 0
# HELP kafkamender_events_total Events.
# TYPE kafkamender_events_total counter
kafkamender_events_total{status="failed",type="broker-overloaded"} 0
# HELP kafkamender_lock_wait_seconds Lock waits.
# TYPE kafkamender_lock_wait_seconds histogram
kafkamender_lock_wait_seconds_bucket{cluster="local",le="1"} 0
kafkamender_lock_wait_seconds_bucket{cluster="local",le="+Inf"} 0
kafkamender_lock_wait_seconds_sum{cluster="local"} 0
kafkamender_lock_wait_seconds_count{cluster="local"} 0
# HELP kafkamender_lock_waiting Waiting now.
# TYPE kafkamender_lock_waiting counter
kafkamender_lock_waiting{cluster="local"} 0
# HELP kafkamender_retries_total Retries.
# TYPE kafkamender_retries_total counter
kafkamender_retries_total{cluster="local"} 0
# HELP kafkamender_dead_letters_total Dead letters.
# TYPE kafkamender_dead_letters_total counter
`
	for _, tc := range []struct {
		queried []string
		want    string // in the problems; "" for none
	}{
		{[]string{"up", "kafkamender_ready", "kafkamender_events_total", "kafkamender_lock_wait_seconds_bucket", "kafkamender_lock_wait_seconds_count"}, ""},
		{[]string{"kafkamender_takeovers_total"}, "kafkamender_takeovers_total: not in /metrics"},
		{[]string{"kafkamender_dead_letters_total"}, "kafkamender_dead_letters_total: not in /metrics"}, // no sample
		{[]string{"kafkamender_lock_waiting"}, "a COUNTER in /metrics, not a gauge"},
		{[]string{"kafkamender_retries_total"}, "labels [cluster], want [cluster type]"},
		{[]string{"kafkamender_nothing"}, "not a metric of the worker's"},
	} {
		errs, err := CheckExposition(strings.NewReader(page), tc.queried)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		joined := strings.Join(got, "\n")
		if (tc.want == "") != (len(errs) == 0) || !strings.Contains(joined, tc.want) {
			t.Errorf("CheckExposition(%v) = %q; want %q", tc.queried, joined, tc.want)
		}
	}
	if _, err := CheckExposition(strings.NewReader("not a metrics page {"), nil); err == nil {
		t.Error("CheckExposition accepted a page that is not Prometheus' text format")
	}
}
