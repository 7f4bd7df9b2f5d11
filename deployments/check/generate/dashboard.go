package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Dashboard is the part of Grafana's dashboard JSON model this dashboard uses.
type Dashboard struct {
	Annotations   Annotations `json:"annotations"`
	Description   string      `json:"description"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Links         []Link      `json:"links"`
	Panels        []Panel     `json:"panels"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Tags          []string    `json:"tags"`
	Templating    Templating  `json:"templating"`
	Time          TimeRange   `json:"time"`
	Timezone      string      `json:"timezone"`
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	Version       int         `json:"version"`
}

// Annotations are the dashboard's annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is Grafana's built-in annotation query.
type Annotation struct {
	BuiltIn    int         `json:"builtIn"`
	Datasource *Datasource `json:"datasource"`
	Enable     bool        `json:"enable"`
	Hide       bool        `json:"hide"`
	IconColor  string      `json:"iconColor"`
	Name       string      `json:"name"`
	Type       string      `json:"type"`
}

// Link is a link in the dashboard's header.
type Link struct {
	Title string `json:"title"`
	Type  string `json:"type"`
	URL   string `json:"url"`
	Icon  string `json:"icon"`
}

// Datasource refers to a data source.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is a panel, or a row (Type "row").
type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     GridPos        `json:"gridPos"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Panels      *[]Panel       `json:"panels,omitempty"` // a row's: [] when it is open
	Datasource  *Datasource    `json:"datasource,omitempty"`
	Targets     []Target       `json:"targets,omitempty"`
	FieldConfig *FieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is a Prometheus query of a panel.
type Target struct {
	Datasource   *Datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	RefID        string      `json:"refId"`
	Range        bool        `json:"range"`
	Instant      bool        `json:"instant"`
}

// FieldConfig sets how a panel shows values.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the field settings of every series of a panel.
type FieldDefaults struct {
	Unit       string         `json:"unit,omitempty"`
	Min        *float64       `json:"min,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Thresholds *Thresholds    `json:"thresholds,omitempty"`
	Mappings   []any          `json:"mappings,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
}

// Thresholds colour values by steps.
type Thresholds struct {
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
}

// Step is a threshold: Value nil is the base.
type Step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Templating holds the dashboard's variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a template variable: the data source, or a label's values.
type Variable struct {
	Name       string         `json:"name"`
	Label      string         `json:"label"`
	Type       string         `json:"type"`
	Query      any            `json:"query"`
	Definition string         `json:"definition,omitempty"`
	Datasource *Datasource    `json:"datasource,omitempty"`
	Current    map[string]any `json:"current"`
	Options    []any          `json:"options"`
	Hide       int            `json:"hide"`
	IncludeAll bool           `json:"includeAll"`
	Multi      bool           `json:"multi"`
	AllValue   string         `json:"allValue,omitempty"`
	Refresh    int            `json:"refresh"`
	Regex      string         `json:"regex"`
	Sort       int            `json:"sort"`
}

// VariableQuery is a Prometheus variable query.
type VariableQuery struct {
	Query string `json:"query"`
	RefID string `json:"refId"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DashboardJSON returns the dashboard as Grafana's JSON model, indented, with a final
// newline.
func DashboardJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "&" stays "&" for whoever reads the file
	enc.SetIndent("", "  ")
	if err := enc.Encode(NewDashboard()); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return b.Bytes(), nil
}

// ds is every query's data source: the dashboard's datasource variable.
var ds = &Datasource{Type: "prometheus", UID: "${datasource}"}

// Label matchers of the dashboard's variables.
const (
	inst    = `instance=~"$instance"`
	cluster = `cluster=~"$cluster", instance=~"$instance"`
)

// NewDashboard returns the kafkamender dashboard.
func NewDashboard() Dashboard {
	var l layout
	l.row("Fleet")
	l.add(stat("Workers up", "Scrape targets of job kafkamender that answer.",
		`sum(up{job="kafkamender", `+inst+`})`, "", redBelow(1)), 6, 4)
	l.add(stat("Workers ready", "Workers whose /readyz answers 200: every dependency they need is up.",
		`sum(kafkamender_ready{`+inst+`})`, "", redBelow(1)), 6, 4)
	l.add(stat("Failed events", "Events that got a failed result in the time range.",
		`sum(increase(kafkamender_events_total{status="failed", `+inst+`}[$__range]))`, "", redFrom(1)), 6, 4)
	l.add(stat("Dead letters", "Events copied to kafkamender.dead.<cluster> in the time range: a handler panicked, or workers kept dying on them.",
		`sum(increase(kafkamender_dead_letters_total{`+cluster+`}[$__range]))`, "", redFrom(1)), 6, 4)
	l.add(stateTimeline("Dependencies up", "The lowest kafkamender_dependency_up of the workers: NATS, JetStream, each cluster's Kafka and ZooKeeper, the lock ZooKeeper.",
		`min by (kind, name) (kafkamender_dependency_up{`+inst+`})`, "{{kind}} {{name}}"), 16, 8)
	l.add(stat("Versions", "Workers running each build (kafkamender_build_info).",
		`count by (version) (kafkamender_build_info{`+inst+`})`, "{{version}}", nil), 8, 8)

	l.row("Events")
	l.add(timeseries("Events by type and status", "Final results stored, per second.", "ops",
		q(`sum by (type, status) (rate(kafkamender_events_total{`+inst+`}[$__rate_interval]))`, "{{type}} {{status}}")), 12, 8)
	l.add(timeseries("Failed, rejected, expired and cancelled events", "Events that did not get what they asked for, per interval (cancelled: stopped by an operation-cancel); each result says why.", "short",
		q(`sum by (type, status) (increase(kafkamender_events_total{status=~"failed|rejected|expired|cancelled", `+inst+`}[$__rate_interval]))`, "{{type}} {{status}}")), 12, 8)
	l.add(timeseries("Event duration", "From the start of handling to the stored result, quantiles by event type.", "s",
		quantiles("kafkamender_event_duration_seconds_bucket", "type", inst)...), 12, 8)
	l.add(timeseries("Operation duration", "Operations under the cluster lock (lock, plan, change, verify), quantiles by event type.", "s",
		quantiles("kafkamender_operation_duration_seconds_bucket", "type", inst)...), 12, 8)
	l.add(timeseries("Retries", "Events given back for a later retry after a transient failure, per second.", "ops",
		q(`sum by (cluster, type) (rate(kafkamender_retries_total{`+cluster+`}[$__rate_interval]))`, "{{cluster}} {{type}}")), 8, 8)
	l.add(timeseries("Dead letters", "Events copied to kafkamender.dead.<cluster>, per interval.", "short",
		q(`sum by (cluster, type) (increase(kafkamender_dead_letters_total{`+cluster+`}[$__rate_interval]))`, "{{cluster}} {{type}}")), 8, 8)
	l.add(timeseries("Alertmanager alerts by outcome", "Alerts received on POST /v1/alertmanager, per second: published, duplicate, resolved, unmatched, invalid.", "ops",
		q(`sum by (outcome) (rate(kafkamender_alertmanager_alerts_total{`+inst+`}[$__rate_interval]))`, "{{outcome}}")), 8, 8)

	l.row("Operations and the lock")
	l.add(timeseries("Operations in flight", "Operations running now, by cluster and event type.", "short",
		q(`sum by (cluster, type) (kafkamender_operations_in_flight{`+cluster+`})`, "{{cluster}} {{type}}")), 8, 8)
	l.add(timeseries("Running operation age", "How long the operation a worker runs on a cluster has been running.", "s",
		q(`time() - (kafkamender_operation_started_timestamp_seconds{`+cluster+`} > 0)`, "{{cluster}} {{instance}}")), 8, 8)
	l.add(timeseries("Takeovers", "Operations left in the journal by a worker that is gone, finished by another, per interval.", "short",
		q(`sum(increase(kafkamender_takeovers_total{`+inst+`}[$__rate_interval]))`, "takeovers")), 8, 8)
	l.add(timeseries("Lock wait", "Time to take a cluster's lock, quantiles.", "s",
		quantiles("kafkamender_lock_wait_seconds_bucket", "cluster", cluster)...), 12, 8)
	l.add(timeseries("Waiting for the lock", "Operations waiting for a cluster's lock now.", "short",
		q(`sum by (cluster) (kafkamender_lock_waiting{`+cluster+`})`, "{{cluster}}")), 12, 8)

	l.row("Changes to the clusters")
	l.add(timeseries("Leaders moved", "Partitions whose leader an operation moved (verified), per interval.", "short",
		q(`sum by (cluster, type) (increase(kafkamender_leaders_moved_total{`+cluster+`}[$__rate_interval]))`, "{{cluster}} {{type}}")), 8, 8)
	replicas := timeseries("Replicas added and removed", "Replicas added (above the axis) and removed (below it), per interval.", "short",
		q(`sum by (cluster, type) (increase(kafkamender_replicas_added_total{`+cluster+`}[$__rate_interval]))`, "added {{cluster}} {{type}}"),
		q(`-sum by (cluster, type) (increase(kafkamender_replicas_removed_total{`+cluster+`}[$__rate_interval]))`, "removed {{cluster}} {{type}}"))
	replicas.FieldConfig.Defaults.Min = nil // removals are drawn below zero
	l.add(replicas, 8, 8)
	l.add(timeseries("Bytes copied", "Data copied by replica and log-dir moves.", "Bps",
		q(`sum by (cluster, type) (rate(kafkamender_bytes_copied_total{`+cluster+`}[$__rate_interval]))`, "{{cluster}} {{type}}")), 8, 8)
	l.add(timeseries("Throttles set and restored", "Replication throttles set, and put back when the copy ended: restored, or kept because someone else changed them meanwhile.", "short",
		q(`sum by (cluster) (increase(kafkamender_throttles_set_total{`+cluster+`}[$__rate_interval]))`, "set {{cluster}}"),
		q(`sum by (cluster, outcome) (increase(kafkamender_throttles_restored_total{`+cluster+`}[$__rate_interval]))`, "{{outcome}} {{cluster}}")), 12, 8)
	l.add(timeseries("Partitions skipped", "Partitions an operation left alone, by reason code (docs/contract.md).", "short",
		q(`sum by (cluster, reason) (increase(kafkamender_partitions_skipped_total{`+cluster+`}[$__rate_interval]))`, "{{cluster}} {{reason}}")), 12, 8)

	return Dashboard{
		Annotations: Annotations{List: []Annotation{{
			BuiltIn: 1, Datasource: &Datasource{Type: "grafana", UID: "-- Grafana --"}, Enable: true, Hide: true,
			IconColor: "rgba(0, 211, 255, 1)", Name: "Annotations & Alerts", Type: "dashboard",
		}}},
		Description:  "kafkamender workers: events, operations, the cluster lock, changes made to the Kafka clusters, dependencies. Generated by deployments/check/cmd/generate.",
		Editable:     true,
		GraphTooltip: 1,
		Links:        []Link{},
		Panels:       l.panels,
		Refresh:      "30s",
		// Grafana 10.4 and later read this schema as it is (older ones are not supported).
		SchemaVersion: 39,
		Tags:          []string{"kafkamender", "kafka"},
		Templating: Templating{List: []Variable{
			{
				Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus",
				Current: map[string]any{}, Options: []any{}, Refresh: 1,
			},
			labelVariable("instance", "Worker", "kafkamender_build_info"),
			labelVariable("cluster", "Cluster", "kafkamender_operations_in_flight"),
		}},
		Time:     TimeRange{From: "now-6h", To: "now"},
		Timezone: "browser",
		Title:    "kafkamender",
		UID:      "kafkamender",
		Version:  1,
	}
}

// labelVariable is a multi-value variable of a label's values on a metric, "All" by default.
func labelVariable(name, label, metric string) Variable {
	query := fmt.Sprintf("label_values(%s, %s)", metric, name)
	return Variable{
		Name: name, Label: label, Type: "query",
		Query:      VariableQuery{Query: query, RefID: "PrometheusVariableQueryEditor-VariableQuery"},
		Definition: query,
		Datasource: ds,
		Current:    map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		Options:    []any{},
		IncludeAll: true, Multi: true, AllValue: ".*",
		Refresh: 2, // on time range change
		Sort:    1,
	}
}

// layout places panels left to right in rows of the 24-column grid.
type layout struct {
	panels []Panel
	x, y   int
	rowH   int // height of the tallest panel in the current line
}

func (l *layout) nextID() int { return len(l.panels) + 1 }

func (l *layout) newline() {
	if l.x > 0 {
		l.y += l.rowH
		l.x, l.rowH = 0, 0
	}
}

func (l *layout) row(title string) {
	l.newline()
	collapsed := false
	l.panels = append(l.panels, Panel{ID: l.nextID(), Type: "row", Title: title, Collapsed: &collapsed,
		Panels: &[]Panel{}, GridPos: GridPos{H: 1, W: 24, X: 0, Y: l.y}})
	l.y++
}

func (l *layout) add(p Panel, w, h int) {
	if l.x+w > 24 {
		l.newline()
	}
	p.ID = l.nextID()
	p.GridPos = GridPos{H: h, W: w, X: l.x, Y: l.y}
	for i := range p.Targets {
		p.Targets[i].RefID = string(rune('A' + i))
	}
	l.panels = append(l.panels, p)
	l.x += w
	l.rowH = max(l.rowH, h)
}

// q is a range query.
func q(expr, legend string) Target {
	return Target{Datasource: ds, Expr: expr, LegendFormat: legend, Range: true}
}

// quantiles are the 50th, 90th and 99th percentiles of a histogram by a label.
func quantiles(bucket, by, matchers string) []Target {
	var out []Target
	for _, p := range []struct{ q, name string }{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}} {
		out = append(out, q(
			fmt.Sprintf(`histogram_quantile(%s, sum by (le, %s) (rate(%s{%s}[$__rate_interval])))`, p.q, by, bucket, matchers),
			fmt.Sprintf("%s {{%s}}", p.name, by)))
	}
	return out
}

// timeseries is a graph of targets, its y axis from zero.
func timeseries(title, description, unit string, targets ...Target) Panel {
	return Panel{
		Type: "timeseries", Title: title, Description: description, Datasource: ds, Targets: targets,
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{Unit: unit, Min: ptr(0.0), Custom: map[string]any{
			"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": false,
		}}, Overrides: []any{}},
		Options: map[string]any{
			"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true, "calcs": []string{}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

func stat(title, description, expr, legend string, th *Thresholds) Panel {
	decimals := 0
	if th == nil {
		th = &Thresholds{Mode: "absolute", Steps: []Step{{Color: "blue"}}}
	}
	return Panel{
		Type: "stat", Title: title, Description: description, Datasource: ds,
		Targets:     []Target{{Datasource: ds, Expr: expr, LegendFormat: legend, Instant: true}},
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{Decimals: &decimals, Thresholds: th}, Overrides: []any{}},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "value", "graphMode": "none", "justifyMode": "auto", "orientation": "auto",
			"textMode": "value_and_name",
		},
	}
}

func stateTimeline(title, description, expr, legend string) Panel {
	return Panel{
		Type: "state-timeline", Title: title, Description: description, Datasource: ds,
		Targets: []Target{q(expr, legend)},
		FieldConfig: &FieldConfig{Defaults: FieldDefaults{
			Mappings: []any{map[string]any{"type": "value", "options": map[string]any{
				"0": map[string]any{"text": "down", "color": "red", "index": 0},
				"1": map[string]any{"text": "up", "color": "green", "index": 1},
			}}},
			Thresholds: &Thresholds{Mode: "absolute", Steps: []Step{{Color: "red"}, {Color: "green", Value: ptr(1.0)}}},
		}, Overrides: []any{}},
		Options: map[string]any{"showValue": "never", "mergeValues": true, "rowHeight": 0.9, "alignValue": "left",
			"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": false}},
	}
}

// redBelow colours a stat red below v, green from it.
func redBelow(v float64) *Thresholds {
	return &Thresholds{Mode: "absolute", Steps: []Step{{Color: "red"}, {Color: "green", Value: &v}}}
}

// redFrom colours a stat green below v, red from it.
func redFrom(v float64) *Thresholds {
	return &Thresholds{Mode: "absolute", Steps: []Step{{Color: "green"}, {Color: "red", Value: &v}}}
}

func ptr[T any](v T) *T { return &v }
