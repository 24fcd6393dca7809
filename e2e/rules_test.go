package e2e

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	rulesFile     = "../docs/prometheus/meshless-rules.yml"
	rulesTestFile = "../docs/prometheus/meshless-rules.test.yml"
)

// ruleTests is what TestRulesUnitTestsCoverEveryRule reads of a promtool
// unit test file.
type ruleTests struct {
	Tests []struct {
		Name       string `yaml:"name"`
		AlertTests []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		ExprTests []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// The rule file is valid and its unit tests pass: promtool check rules and
// promtool test rules, as CI runs them.
func TestRulesUnitTests(t *testing.T) {
	_, promtool := tools(t)
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert has a unit test where it fires and one where it does not,
// every unit test names an alert that exists (promtool passes a test of a
// misspelt alert that expects none), and every recording rule's value is
// checked by a promql_expr_test.
func TestRulesUnitTestsCoverEveryRule(t *testing.T) {
	_, alerts, records := ruleQueries(t, rulesFile)
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTests
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	for _, msg := range coverage(f, alerts, records) {
		t.Error(msg)
	}
}

// coverage returns what the tests in f leave untested of alerts and
// records, and the alerts they name that do not exist.
func coverage(f ruleTests, alerts, records []string) []string {
	fires, quiet := map[string]bool{}, map[string]bool{}
	var exprs []string
	var missing []string
	for _, tc := range f.Tests {
		for _, at := range tc.AlertTests {
			if !slices.Contains(alerts, at.Alertname) {
				missing = append(missing, "test "+tc.Name+": alert "+at.Alertname+" is not in the rule file")
			}
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
		for _, et := range tc.ExprTests {
			exprs = append(exprs, et.Expr)
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			missing = append(missing, "no unit test where "+a+" fires")
		}
		if !quiet[a] {
			missing = append(missing, "no unit test where "+a+" does not fire")
		}
	}
	for _, r := range records {
		if !slices.ContainsFunc(exprs, func(e string) bool { return slices.Contains(metricNames(e), r) }) {
			missing = append(missing, "no promql_expr_test reads the recording rule "+r)
		}
	}
	return missing
}

// coverage finds what is missing: a check that cannot fail is no check.
func TestCoverageFindsGaps(t *testing.T) {
	var f ruleTests
	if err := yaml.Unmarshal([]byte(`
tests:
  - name: one
    alert_rule_test:
      - { alertname: A, exp_alerts: [{exp_labels: {x: y}}] }
      - { alertname: Typo, exp_alerts: [] }
    promql_expr_test:
      - expr: 'a:recorded:rate5m > 1'
`), &f); err != nil {
		t.Fatal(err)
	}
	got := coverage(f, []string{"A", "B"}, []string{"a:recorded:rate5m", "b:recorded:rate5m"})
	want := []string{
		"test one: alert Typo is not in the rule file",
		"no unit test where A does not fire",
		"no unit test where B fires",
		"no unit test where B does not fire",
		"no promql_expr_test reads the recording rule b:recorded:rate5m",
	}
	if !slices.Equal(got, want) {
		t.Errorf("coverage = %q\nwant %q", got, want)
	}
}

// The thresholds the end-to-end test lowers are in the rule file, once
// each; a rule file without them is an error, not a silent no-op.
func TestLowerThresholds(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lowerThresholds(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range demoThresholds {
		if !strings.Contains(got, d.to) || strings.Contains(got, d.from) {
			t.Errorf("%s: the threshold is not lowered in\n%s", d.alert, got)
		}
	}
	if _, err := lowerThresholds(strings.ReplaceAll(string(data), "> 3600", "> 7200")); err == nil {
		t.Error("a rule file whose threshold changed: no error")
	}
}
