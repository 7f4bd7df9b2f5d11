// Package metricstest reads series from a Prometheus registry in tests, by their text:
// name{label="value",...} with labels sorted by name, as the exposition format writes them.
package metricstest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Series returns every sample of g's family (counters and gauges: the value; histograms:
// the count) by its text.
func Series(t testing.TB, g prometheus.Gatherer, family string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[text(family, m.GetLabel())] = value(m)
		}
	}
	return out
}

// Value returns the value of one series, given by its text; a series that does not exist
// fails the test.
func Value(t testing.TB, g prometheus.Gatherer, series string) float64 {
	t.Helper()
	family, _, _ := strings.Cut(series, "{")
	all := Series(t, g, family)
	v, ok := all[series]
	if !ok {
		t.Fatalf("no series %s; %s has %v", series, family, slices.Sorted(maps.Keys(all)))
	}
	return v
}

// NonZero returns the family's series whose value is not 0, one "series value" line each,
// sorted: what a test compares after the zero series of known label values are made.
func NonZero(t testing.TB, g prometheus.Gatherer, family string) string {
	t.Helper()
	var lines []string
	for s, v := range Series(t, g, family) {
		if v != 0 {
			lines = append(lines, fmt.Sprintf("%s %g", s, v))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func text(name string, labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return name
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
