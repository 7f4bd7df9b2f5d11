package check

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promqlParser parses PromQL as Prometheus does by default.
var promqlParser = parser.NewParser(parser.Options{})

// ParseExpr parses a PromQL expression.
func ParseExpr(expr string) (parser.Expr, error) {
	return promqlParser.ParseExpr(expr)
}

// QueriedSeries returns the series names an expression selects, sorted, each once.
func QueriedSeries(e parser.Expr) []string {
	var names []string
	for _, vs := range selectors(e) {
		if !slices.Contains(names, vs.Name) {
			names = append(names, vs.Name)
		}
	}
	slices.Sort(names)
	return names
}

// CheckExpr checks an expression against the metrics the worker exports (Metrics) and
// those Prometheus makes (PrometheusMade):
//   - every selector names a known series by its name (a histogram by its _bucket, _sum
//     or _count series) and matches only labels that series has;
//   - aggregations group by, and vector matches match on, labels the series below them
//     have;
//   - rate, irate and increase take counters (or a histogram's series), deriv and delta
//     gauges; histogram_quantile takes _bucket series, aggregated by le.
//
// It returns every problem found.
func CheckExpr(e parser.Expr) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			if n.Name == "" {
				add("%s: select series by metric name", n)
				return nil
			}
			s, m, ok := LookupSeries(n.Name)
			if !ok {
				add("%s: no such metric (a histogram is queried by its _bucket, _sum or _count series)", n.Name)
				return nil
			}
			for _, lm := range n.LabelMatchers {
				if lm.Name != labels.MetricName && !slices.Contains(s.SeriesLabels(m), lm.Name) {
					add("%s: has no label %q (it has %v)", n.Name, lm.Name, s.SeriesLabels(m))
				}
			}
		case *parser.AggregateExpr:
			if n.Without {
				return nil
			}
			have := labelsBelow(n.Expr)
			for _, l := range n.Grouping {
				if !slices.Contains(have, l) {
					add("%s: grouped by %q, which no series below has (%v)", n.Op, l, have)
				}
			}
		case *parser.BinaryExpr:
			vm := n.VectorMatching
			if vm == nil || !vm.On {
				return nil
			}
			have := append(labelsBelow(n.LHS), labelsBelow(n.RHS)...)
			for _, l := range slices.Concat(vm.MatchingLabels, vm.Include) {
				if !slices.Contains(have, l) {
					add("%s: matches on %q, which neither side has", n.Op, l)
				}
			}
		case *parser.Call:
			errs = append(errs, checkCall(n)...)
		}
		return nil
	})
	return errs
}

func checkCall(n *parser.Call) []error {
	var errs []error
	switch n.Func.Name {
	case "rate", "irate", "increase", "resets":
		for _, vs := range selectors(n.Args[0]) {
			if s, m, ok := LookupSeries(vs.Name); ok && m.Type != Counter && s.Suffix == "" {
				errs = append(errs, fmt.Errorf("%s(%s): %s is a %s, not a counter", n.Func.Name, vs.Name, vs.Name, m.Type))
			}
		}
	case "deriv", "delta", "idelta", "predict_linear":
		for _, vs := range selectors(n.Args[0]) {
			if s, m, ok := LookupSeries(vs.Name); ok && (m.Type != Gauge || s.Suffix != "") {
				errs = append(errs, fmt.Errorf("%s(%s): %s is not a gauge", n.Func.Name, vs.Name, vs.Name))
			}
		}
	case "histogram_quantile":
		arg := n.Args[1]
		for _, vs := range selectors(arg) {
			if s, _, ok := LookupSeries(vs.Name); ok && s.Suffix != "_bucket" {
				errs = append(errs, fmt.Errorf("histogram_quantile over %s: want a histogram's _bucket series", vs.Name))
			}
		}
		if len(selectors(arg)) == 0 {
			errs = append(errs, fmt.Errorf("histogram_quantile selects no series"))
		}
		// The outermost aggregation must keep le, or there are no buckets left.
		if agg := outerAggregate(arg); agg != nil && !agg.Without && !slices.Contains(agg.Grouping, "le") {
			errs = append(errs, fmt.Errorf("histogram_quantile over %s by %v: the aggregation must keep le", agg.Op, agg.Grouping))
		}
	}
	return errs
}

// outerAggregate returns the first aggregation in e, looking through parentheses.
func outerAggregate(e parser.Expr) *parser.AggregateExpr {
	for {
		switch n := e.(type) {
		case *parser.ParenExpr:
			e = n.Expr
		case *parser.AggregateExpr:
			return n
		default:
			return nil
		}
	}
}

// selectors returns the vector selectors in e.
func selectors(e parser.Node) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// labelsBelow returns the labels the known series selected in e may have.
func labelsBelow(e parser.Node) []string {
	var have []string
	for _, vs := range selectors(e) {
		if s, m, ok := LookupSeries(vs.Name); ok {
			have = append(have, s.SeriesLabels(m)...)
		}
	}
	return have
}

// Grafana's built-in interval variables, and durations that stand for them.
var grafanaIntervals = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
}

var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// ExpandGrafana replaces Grafana's template variables in a panel query so that it is
// PromQL: its interval variables by durations, the dashboard's own variables (vars) by
// ".*" (they stand in label matchers' values). A variable that is neither is an error.
func ExpandGrafana(expr string, vars []string) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVar.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if d, ok := grafanaIntervals[name]; ok {
			return d
		}
		if slices.Contains(vars, name) {
			return ".*"
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown template variables %s (the dashboard has %v)", strings.Join(unknown, ", "), vars)
	}
	return out, nil
}
