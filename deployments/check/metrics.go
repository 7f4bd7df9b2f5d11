package check

import (
	"slices"
	"strings"
)

// MetricType is a Prometheus metric type.
type MetricType string

// Metric types.
const (
	Counter   MetricType = "counter"
	Gauge     MetricType = "gauge"
	Histogram MetricType = "histogram"
)

// Metric is a metric family the worker exports (docs/metrics.md, package internal/metrics).
type Metric struct {
	Type   MetricType
	Labels []string
}

// Metrics are the worker's metric families, by name, as the rules and the dashboard may
// query them. Every one exists at the worker's start-up, with zero values for its known
// label values, so that a query never sees "no data" for a metric that merely has not
// moved yet (the integration test checks each queried one in a running worker).
var Metrics = map[string]Metric{
	"kafkamender_events_total":                        {Counter, []string{"type", "status"}},
	"kafkamender_event_duration_seconds":              {Histogram, []string{"type"}},
	"kafkamender_operation_duration_seconds":          {Histogram, []string{"type", "status"}},
	"kafkamender_leaders_moved_total":                 {Counter, []string{"cluster", "type"}},
	"kafkamender_partitions_skipped_total":            {Counter, []string{"cluster", "type", "reason"}},
	"kafkamender_takeovers_total":                     {Counter, nil},
	"kafkamender_alertmanager_alerts_total":           {Counter, []string{"outcome"}},
	"kafkamender_dependency_up":                       {Gauge, []string{"kind", "name"}},
	"kafkamender_ready":                               {Gauge, nil},
	"kafkamender_build_info":                          {Gauge, []string{"version"}},
	"kafkamender_lock_wait_seconds":                   {Histogram, []string{"cluster"}},
	"kafkamender_lock_waiting":                        {Gauge, []string{"cluster"}},
	"kafkamender_cluster_paused":                      {Gauge, []string{"cluster"}},
	"kafkamender_retries_total":                       {Counter, []string{"cluster", "type"}},
	"kafkamender_operations_in_flight":                {Gauge, []string{"cluster", "type"}},
	"kafkamender_operation_started_timestamp_seconds": {Gauge, []string{"cluster"}},
	"kafkamender_replicas_added_total":                {Counter, []string{"cluster", "type"}},
	"kafkamender_replicas_removed_total":              {Counter, []string{"cluster", "type"}},
	"kafkamender_bytes_copied_total":                  {Counter, []string{"cluster", "type"}},
	"kafkamender_throttles_set_total":                 {Counter, []string{"cluster"}},
	"kafkamender_throttles_restored_total":            {Counter, []string{"cluster", "outcome"}},
	"kafkamender_dead_letters_total":                  {Counter, []string{"cluster", "type"}},
}

// PrometheusMade are series Prometheus itself makes for each scrape target, not exported
// by the worker.
var PrometheusMade = map[string]Metric{
	"up": {Gauge, nil},
}

// TargetLabels are the labels Prometheus attaches to every series of a scrape target: job
// and instance always, and those a prometheus-operator ServiceMonitor adds.
var TargetLabels = []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

// Series is a series name as a query selects it: a metric family, or one of the
// _bucket, _sum and _count series of a histogram.
type Series struct {
	Name   string // as queried
	Family string // the metric family: Name without a histogram suffix
	Suffix string // "_bucket", "_sum", "_count" or ""
}

// LookupSeries resolves a queried series name to its family in Metrics or
// PrometheusMade. ok is false for a name in neither, or a histogram queried without a
// suffix (or a non-histogram with one).
func LookupSeries(name string) (s Series, m Metric, ok bool) {
	s = Series{Name: name, Family: name}
	if m, ok := PrometheusMade[name]; ok {
		return s, m, true
	}
	if m, ok := Metrics[name]; ok {
		return s, m, m.Type != Histogram
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		family, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		if m, ok := Metrics[family]; ok && m.Type == Histogram {
			return Series{Name: name, Family: family, Suffix: suffix}, m, true
		}
	}
	return s, Metric{}, false
}

// SeriesLabels are the labels a series of m may carry: its own, the target's, and le on a
// histogram's buckets.
func (s Series) SeriesLabels(m Metric) []string {
	labels := slices.Concat(m.Labels, TargetLabels)
	if s.Suffix == "_bucket" {
		labels = append(labels, "le")
	}
	return labels
}
