package check

import (
	"fmt"
	"io"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// CheckExposition reads a /metrics page (Prometheus text format) and checks that every
// series in queried is exported: its family is there with at least one sample, of the
// type Metrics says, each sample with exactly the labels Metrics says. Series Prometheus
// makes itself (up) are not looked for. It returns every problem found.
func CheckExposition(page io.Reader, queried []string) ([]error, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(page)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	var errs []error
	done := map[string]bool{}
	for _, name := range queried {
		if _, ok := PrometheusMade[name]; ok {
			continue
		}
		s, m, ok := LookupSeries(name)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not a metric of the worker's", name))
			continue
		}
		if done[s.Family] {
			continue
		}
		done[s.Family] = true
		f, ok := families[s.Family]
		if !ok || len(f.GetMetric()) == 0 {
			errs = append(errs, fmt.Errorf("%s: not in /metrics (queried as %s)", s.Family, name))
			continue
		}
		want := map[MetricType]dto.MetricType{Counter: dto.MetricType_COUNTER, Gauge: dto.MetricType_GAUGE, Histogram: dto.MetricType_HISTOGRAM}[m.Type]
		if f.GetType() != want {
			errs = append(errs, fmt.Errorf("%s: a %s in /metrics, not a %s", s.Family, f.GetType(), m.Type))
		}
		wantLabels := slices.Sorted(slices.Values(m.Labels))
		for _, sample := range f.GetMetric() {
			var got []string
			for _, lp := range sample.GetLabel() {
				got = append(got, lp.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, wantLabels) {
				errs = append(errs, fmt.Errorf("%s: a sample has labels %v, want %v", s.Family, got, wantLabels))
				break
			}
		}
	}
	return errs, nil
}
