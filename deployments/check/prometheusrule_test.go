package check

import (
	"maps"
	"reflect"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"sigs.k8s.io/yaml"

	"github.com/kafkamender/kafkamender/deployments/check/generate"
)

// ruleView is what a rule says, whichever file carries it.
type ruleView struct {
	Group, Interval, Name, Expr, For string
	Labels, Annotations              map[string]string
}

func viewRuleFile(t testing.TB, g *rulefmt.RuleGroups) []ruleView {
	t.Helper()
	var out []ruleView
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			out = append(out, ruleView{
				Group: grp.Name, Interval: durationString(t, grp.Interval.String()),
				Name: r.Alert + r.Record, Expr: r.Expr, For: durationString(t, r.For.String()),
				Labels: nonNil(r.Labels), Annotations: nonNil(r.Annotations),
			})
		}
	}
	return out
}

func viewPrometheusRule(t testing.TB, pr *monitoringv1.PrometheusRule) []ruleView {
	t.Helper()
	var out []ruleView
	for _, grp := range pr.Spec.Groups {
		interval := "0s"
		if grp.Interval != nil {
			interval = string(*grp.Interval)
		}
		for _, r := range grp.Rules {
			forDur := "0s"
			if r.For != nil {
				forDur = string(*r.For)
			}
			out = append(out, ruleView{
				Group: grp.Name, Interval: durationString(t, interval),
				Name: r.Alert + r.Record, Expr: r.Expr.String(), For: durationString(t, forDur),
				Labels: nonNil(r.Labels), Annotations: nonNil(r.Annotations),
			})
		}
	}
	return out
}

// durationString normalises a Prometheus duration ("300s" and "5m" are one).
func durationString(t testing.TB, s string) string {
	t.Helper()
	d, err := model.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d.String()
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// decodeStrict decodes a Kubernetes manifest into its typed object: YAML to JSON, then
// JSON with unknown and duplicate fields refused, as the API server's strict field
// validation does.
func decodeStrict(t testing.TB, name string, data []byte, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestPrometheusRuleIsTheRuleFile: the Kubernetes PrometheusRule carries exactly the
// groups of the plain rule file (it is generated from it; this checks the result as
// prometheus-operator reads it).
func TestPrometheusRuleIsTheRuleFile(t *testing.T) {
	plain := viewRuleFile(t, parseRules(t, readRepoFile(t, generate.RulesFile)))
	var pr monitoringv1.PrometheusRule
	decodeStrict(t, generate.PrometheusRuleFile, readRepoFile(t, generate.PrometheusRuleFile), &pr)
	if pr.Kind != monitoringv1.PrometheusRuleKind || pr.APIVersion != monitoringv1.SchemeGroupVersion.String() {
		t.Errorf("%s: %s %s; want %s %s", generate.PrometheusRuleFile, pr.APIVersion, pr.Kind, monitoringv1.SchemeGroupVersion, monitoringv1.PrometheusRuleKind)
	}
	wrapped := viewPrometheusRule(t, &pr)
	if len(plain) == 0 || !reflect.DeepEqual(plain, wrapped) {
		t.Errorf("%s and %s differ:\nplain:   %+v\nwrapped: %+v", generate.RulesFile, generate.PrometheusRuleFile, plain, wrapped)
	}
}
