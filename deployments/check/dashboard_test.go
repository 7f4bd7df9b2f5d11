package check

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kafkamender/kafkamender/deployments/check/generate"
)

// TestGeneratedFilesAreCurrent: the committed dashboard and PrometheusRule are what the
// generator makes from the dashboard model and the rule file.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate.Files(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range mapsKeys(files) {
		if !bytes.Equal(readRepoFile(t, rel), files[rel]) {
			t.Errorf("%s is not what the generator makes: run `go run ./cmd/generate` in deployments/check and commit the result", rel)
		}
	}
}

// dashboardPanels decodes the committed dashboard strictly (a field the model does not
// know fails) and returns it with its panels, rows' nested panels included.
func dashboardPanels(t testing.TB) (generate.Dashboard, []generate.Panel) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(readRepoFile(t, generate.DashboardFile)))
	dec.DisallowUnknownFields()
	var d generate.Dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", generate.DashboardFile, err)
	}
	var all []generate.Panel
	var walk func([]generate.Panel)
	walk = func(ps []generate.Panel) {
		for _, p := range ps {
			all = append(all, p)
			if p.Panels != nil {
				walk(*p.Panels)
			}
		}
	}
	walk(d.Panels)
	return d, all
}

func TestDashboardLayout(t *testing.T) {
	d, panels := dashboardPanels(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a schema Grafana 10+ reads", d.UID, d.Title, d.SchemaVersion)
	}
	ids := map[int]string{}
	for i, p := range panels {
		if other, dup := ids[p.ID]; dup || p.ID <= 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
		}
		for _, o := range panels[:i] {
			h := o.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", o.Title, p.Title)
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: want both", p.ID, p.Title, p.Description)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range slices.Concat([]generate.Target{{Datasource: p.Datasource, RefID: "-"}}, p.Targets) {
			if tg.Datasource == nil || tg.Datasource.Type != "prometheus" || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: data source %+v; want the dashboard's variable ${datasource}", p.Title, tg.Datasource)
			}
			if refs[tg.RefID] || tg.RefID == "" {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}

// labelValues matches a Prometheus variable query, label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)

// dashboardQueries returns every panel query of the dashboard, expanded and parsed, and
// checks the variable queries.
func dashboardQueries(t testing.TB) map[string]parser.Expr {
	t.Helper()
	d, panels := dashboardPanels(t)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q: want label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		if s, metric, ok := LookupSeries(m[1]); !ok || !slices.Contains(s.SeriesLabels(metric), m[2]) {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
		if q, ok := v.Query.(map[string]any); !ok || q["query"] != v.Definition {
			t.Errorf("variable %s: query %v differs from its definition %q", v.Name, v.Query, v.Definition)
		}
	}
	out := map[string]parser.Expr{}
	for _, p := range panels {
		for _, tg := range p.Targets {
			name := p.Title + " " + tg.RefID
			expanded, err := ExpandGrafana(tg.Expr, vars)
			if err != nil {
				t.Errorf("panel %q: %v", name, err)
				continue
			}
			e, err := ParseExpr(expanded)
			if err != nil {
				t.Errorf("panel %q: %s: %v", name, tg.Expr, err)
				continue
			}
			out[name] = e
		}
	}
	return out
}

func TestDashboardQueries(t *testing.T) {
	queries := dashboardQueries(t)
	var queried []string
	quantiles := map[string]bool{}
	for name, e := range queries {
		for _, err := range CheckExpr(e) {
			t.Errorf("panel %q: %v", name, err)
		}
		queried = append(queried, QueriedSeries(e)...)
		if strings.HasPrefix(e.String(), "histogram_quantile(") {
			for _, s := range QueriedSeries(e) {
				quantiles[s] = true
			}
		}
	}
	// What the dashboard must show.
	for _, want := range []string{
		"kafkamender_events_total",
		"kafkamender_operations_in_flight",
		"kafkamender_retries_total",
		"kafkamender_leaders_moved_total",
		"kafkamender_replicas_added_total",
		"kafkamender_replicas_removed_total",
		"kafkamender_bytes_copied_total",
		"kafkamender_throttles_set_total",
		"kafkamender_throttles_restored_total",
		"kafkamender_dead_letters_total",
		"kafkamender_dependency_up",
		"kafkamender_alertmanager_alerts_total",
		"kafkamender_build_info",
		"kafkamender_lock_waiting",
	} {
		if !slices.Contains(queried, want) {
			t.Errorf("no panel shows %s", want)
		}
	}
	for _, h := range []string{
		"kafkamender_event_duration_seconds_bucket",
		"kafkamender_operation_duration_seconds_bucket",
		"kafkamender_lock_wait_seconds_bucket",
	} {
		if !quantiles[h] {
			t.Errorf("no panel shows quantiles of %s", h)
		}
	}
}
