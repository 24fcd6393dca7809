package e2e

// This file reads the PromQL of the dashboard and the alert rules, and checks
// that they name only metrics of the catalogue.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// catalogue is the "Prometheus (default exporter)" column of the metric
// catalogue (docs/metrics.md): the only metric names the
// dashboard and the rules may query.
var catalogue = []string{
	"meshless_circuit_breaker_state",
	"meshless_circuit_breaker_transitions_total",
	"meshless_circuit_breaker_calls_total",
	"meshless_circuit_breaker_failure_ratio",
	"meshless_circuit_breaker_slow_call_ratio",
	"meshless_retry_calls_total",
	"meshless_retry_attempts_total",
	"meshless_bulkhead_call_active",
	"meshless_bulkhead_limit",
	"meshless_bulkhead_calls_total",
	"meshless_bulkhead_wait_duration_seconds_bucket",
	"meshless_bulkhead_wait_duration_seconds_sum",
	"meshless_bulkhead_wait_duration_seconds_count",
	"meshless_timeout_calls_total",
	"meshless_call_duration_seconds_bucket",
	"meshless_call_duration_seconds_sum",
	"meshless_call_duration_seconds_count",
	"meshless_outlier_ejections_total",
	"meshless_outlier_ejected",
	"meshless_rate_limiter_calls_total",
	"meshless_hedging_attempts_total",
	"meshless_throttler_calls_total",
	"meshless_observe_decisions_total",
	"meshless_cluster_syncs_total",
	"meshless_cluster_connected",
	"meshless_cluster_remote_opens_total",
	"meshless_deadletter_entries_total",
	"meshless_deadletter_depth",
	"meshless_deadletter_oldest_age_seconds",
}

// query is one PromQL expression and where it was found.
type query struct {
	From string // "panel …", "variable …", "rule …"
	Expr string
	// LabelValues is set for a Grafana variable's label_values(selector,
	// label): Expr is then the selector.
	LabelValues string
}

// dashboardQueries returns the queries of the dashboard's panels and
// annotations and its variables' label_values queries, and the names of its
// template variables.
func dashboardQueries(t *testing.T, path string) (qs []query, vars []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"` // a collapsed row's
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []struct {
				Name       string `json:"name"`
				BuiltIn    int    `json:"builtIn"`
				Datasource struct {
					Type string `json:"type"`
				} `json:"datasource"`
				Expr   string `json:"expr"`
				Target struct {
					Expr string `json:"expr"`
				} `json:"target"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: a panel: %v", path, err)
			}
			for _, tg := range p.Targets {
				qs = append(qs, query{From: "panel " + p.Title, Expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		if a.BuiltIn == 1 {
			continue // Grafana's own annotations and alerts
		}
		if a.Datasource.Type != "prometheus" {
			t.Fatalf("%s: annotation %s: datasource of type %q, want prometheus", path, a.Name, a.Datasource.Type)
		}
		if a.Expr != "" && a.Target.Expr != "" && a.Expr != a.Target.Expr {
			t.Fatalf("%s: annotation %s: expr and target.expr differ", path, a.Name)
		}
		expr := a.Expr // Grafana's classic field; newer versions read target.expr
		if expr == "" {
			expr = a.Target.Expr
		}
		qs = append(qs, query{From: "annotation " + a.Name, Expr: expr})
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("%s: variable %s: query %s", path, v.Name, v.Query)
			}
			q = obj.Query
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Fatalf("%s: variable %s: %q is not label_values(selector, label)", path, v.Name, q)
		}
		qs = append(qs, query{From: "variable " + v.Name, Expr: m[1], LabelValues: m[2]})
	}
	return qs, vars
}

// ruleQueries returns the expressions of every rule in the file, and the
// names of its alerts and of its recording rules.
func ruleQueries(t *testing.T, path string) (qs []query, alerts, records []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			qs = append(qs, query{From: "rule " + name, Expr: r.Expr})
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			if r.Record != "" {
				records = append(records, r.Record)
			}
		}
	}
	return qs, alerts, records
}

var (
	grouping     = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	labelMatcher = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)`)
	identifier   = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*\b`)
	quoted       = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// metricNames returns the meshless_* metric names and the recording rules
// (level:metric:operations, with colons) an expression reads: its
// identifiers, less label names (in matchers and groupings) and strings.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = grouping.ReplaceAllString(e, " ")
	e = labelMatcher.ReplaceAllString(e, " ")
	var names []string
	for _, id := range identifier.FindAllString(e, -1) {
		if (strings.HasPrefix(id, "meshless_") || strings.Contains(id, ":")) && !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

// Every query of the dashboard and of the rules reads only metrics of the
// catalogue, or recording rules of the rule file (which read only metrics
// of the catalogue): a query of a metric that does not exist returns
// nothing and nobody notices (Resilience4j's dashboard kept querying
// max_buffered_calls for years after the metric was gone).
func TestQueriesNameOnlyCatalogueMetrics(t *testing.T) {
	dqs, _ := dashboardQueries(t, "../docs/grafana/meshless.json")
	rqs, _, records := ruleQueries(t, "../docs/prometheus/meshless-rules.yml")
	if len(dqs) < 10 || len(rqs) < 4 {
		t.Fatalf("found %d dashboard queries and %d rules, want the whole dashboard and rule file", len(dqs), len(rqs))
	}
	for _, q := range append(dqs, rqs...) {
		names := metricNames(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s: no meshless metric in %q", q.From, q.Expr)
		}
		for _, n := range names {
			if !slices.Contains(catalogue, n) && !slices.Contains(records, n) {
				t.Errorf("%s: %s is neither in the metric catalogue nor a recording rule", q.From, n)
			}
		}
	}
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (meshless_circuit_breaker_name) (rate(meshless_circuit_breaker_calls_total{meshless_circuit_breaker_name=~"$breaker"}[5m]))`: "meshless_circuit_breaker_calls_total",
		`meshless_bulkhead_call_active / on (meshless_bulkhead_name) meshless_bulkhead_limit`:                                                "meshless_bulkhead_call_active meshless_bulkhead_limit",
		`max without (meshless_circuit_breaker_state) (meshless_circuit_breaker_state{meshless_circuit_breaker_state="open"})`:               "meshless_circuit_breaker_state",
		`meshless_circuit_breaker_state{meshless_circuit_breaker_name="meshless_retry_calls_total"}`:                                         "meshless_circuit_breaker_state",
		`job_rpc_method:meshless_retry_attempts_per_call:ratio_rate5m > 1.1`:                                                                 "job_rpc_method:meshless_retry_attempts_per_call:ratio_rate5m",
		`rate(meshless_retry_calls_total{job=~"$job"}[$__rate_interval]) >= 0.8`:                                                             "meshless_retry_calls_total",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// substitute replaces the dashboard's template variables with values, and
// fails if a variable is left. Longer names go first, so that no name
// replaces the start of another.
func substitute(t *testing.T, expr string, values map[string]string) string {
	t.Helper()
	names := slices.Collect(maps.Keys(values))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, name := range names {
		expr = strings.ReplaceAll(expr, "${"+name+"}", values[name])
		expr = strings.ReplaceAll(expr, "$"+name, values[name])
	}
	if strings.Contains(expr, "$") {
		t.Fatalf("a template variable is left in %q", expr)
	}
	return expr
}

func (q query) String() string {
	if q.LabelValues != "" {
		return fmt.Sprintf("%s: label_values(%s, %s)", q.From, q.Expr, q.LabelValues)
	}
	return fmt.Sprintf("%s: %s", q.From, q.Expr)
}
