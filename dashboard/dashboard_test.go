package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// committed is the generated file, from this package's directory.
const committed = "../docs/grafana/meshless.json"

// The committed dashboard is what the generator writes, byte for byte.
func TestCommittedJSONIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if msg := firstDifference(got, want); msg != "" {
		t.Errorf("docs/grafana/meshless.json is not what package dashboard generates (%s).\n"+
			"Edit the Go code in dashboard/, never the JSON, then run from the repository root:\n\n"+
			"\tgo generate ./dashboard\n\nand commit docs/grafana/meshless.json.", msg)
	}
}

// firstDifference says where committed and generated first differ, or ""
// when they are equal.
func firstDifference(committed, generated []byte) string {
	if bytes.Equal(committed, generated) {
		return ""
	}
	c, g := strings.Split(string(committed), "\n"), strings.Split(string(generated), "\n")
	for i := range max(len(c), len(g)) {
		var cl, gl string
		if i < len(c) {
			cl = c[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if cl != gl {
			return fmt.Sprintf("line %d: committed %q, generated %q", i+1, cl, gl)
		}
	}
	return "they differ" // unreachable: equal lines make equal bytes
}

func TestFirstDifference(t *testing.T) {
	for name, c := range map[string]struct{ committed, generated, want string }{
		"equal":        {"a\nb\n", "a\nb\n", ""},
		"changed line": {"a\nb\n", "a\nc\n", `line 2: committed "b", generated "c"`},
		"added line":   {"a\n", "a\nb\n", `line 2: committed "", generated "b"`},
		"removed line": {"a\nb\nc", "a\nb", `line 3: committed "c", generated ""`},
	} {
		t.Run(name, func(t *testing.T) {
			if got := firstDifference([]byte(c.committed), []byte(c.generated)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// panels returns every panel of d that is not a row, and its rows.
func panels(t *testing.T) (d grafana.Dashboard, ps []*grafana.Panel, rows []*grafana.RowPanel) {
	t.Helper()
	d, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if p.Panel != nil {
			ps = append(ps, p.Panel)
		} else {
			rows = append(rows, p.RowPanel)
		}
	}
	return d, ps, rows
}

// Ids are unique, panels lie within the grid's 24 columns and none overlaps
// another, rows included; every row has panels, below it and above the next.
func TestLayout(t *testing.T) {
	d, _, _ := panels(t)
	type box struct {
		title string
		pos   grafana.GridPos
	}
	var boxes []box
	ids := map[uint32]string{}
	rowsWithPanels := map[string]int{}
	row := ""
	for _, p := range d.Panels {
		var id uint32
		var b box
		switch {
		case p.Panel != nil:
			id, b = *p.Panel.Id, box{*p.Panel.Title, *p.Panel.GridPos}
			rowsWithPanels[row]++
		default:
			id, b = p.RowPanel.Id, box{*p.RowPanel.Title, *p.RowPanel.GridPos}
			row = b.title
			rowsWithPanels[row] += 0
		}
		if other, ok := ids[id]; ok {
			t.Errorf("%s and %s have the same id %d", other, b.title, id)
		}
		ids[id] = b.title
		if b.pos.W == 0 || b.pos.H == 0 || b.pos.X+b.pos.W > 24 {
			t.Errorf("%s: gridPos %+v outside the grid", b.title, b.pos)
		}
		for _, o := range boxes {
			if b.pos.X < o.pos.X+o.pos.W && o.pos.X < b.pos.X+b.pos.W &&
				b.pos.Y < o.pos.Y+o.pos.H && o.pos.Y < b.pos.Y+b.pos.H {
				t.Errorf("%s %+v overlaps %s %+v", b.title, b.pos, o.title, o.pos)
			}
			if b.pos.Y < o.pos.Y {
				t.Errorf("%s is above %s, which comes before it", b.title, o.title)
			}
		}
		boxes = append(boxes, b)
	}
	for r, n := range rowsWithPanels {
		if n == 0 {
			t.Errorf("row %q has no panel", r)
		}
	}
}

var (
	window   = regexp.MustCompile(`\[([^\]]+)\]`)
	variable = regexp.MustCompile(`\$(\{)?([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// Every query goes to the datasource variable, filters on job and
// instance, and rates over $__rate_interval (an hour for the per-hour
// panels); every variable it uses exists; every panel has a title and a
// description.
func TestQueries(t *testing.T) {
	d, ps, _ := panels(t)
	vars := []string{"__rate_interval"}
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	check := func(from, expr string) {
		if !strings.Contains(expr, `job=~"$job", instance=~"$instance"`) {
			t.Errorf("%s: %q does not filter on job and instance", from, expr)
		}
		for _, w := range window.FindAllStringSubmatch(expr, -1) {
			if w[1] != rateInterval && !(w[1] == "1h" && strings.Contains(from, "hour")) {
				t.Errorf("%s: window [%s], want [%s]", from, w[1], rateInterval)
			}
		}
		for _, v := range variable.FindAllStringSubmatch(expr, -1) {
			if !slices.Contains(vars, v[2]) {
				t.Errorf("%s: $%s is not a variable of the dashboard", from, v[2])
			}
		}
	}
	ds := datasource()
	for _, p := range ps {
		if p.Title == nil || *p.Title == "" || p.Description == nil || *p.Description == "" {
			t.Errorf("panel %d: no title or no description", *p.Id)
			continue
		}
		if p.Datasource == nil || *p.Datasource.Uid != *ds.Uid {
			t.Errorf("%s: datasource %v, want the variable's", *p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", *p.Title)
		}
		for _, q := range p.Targets {
			pq, ok := q.(prometheus.Dataquery)
			if !ok {
				t.Fatalf("%s: a query of type %T", *p.Title, q)
			}
			if pq.Datasource == nil || *pq.Datasource.Uid != *ds.Uid {
				t.Errorf("%s: query datasource %v, want the variable's", *p.Title, pq.Datasource)
			}
			check("panel "+*p.Title, pq.Expr)
		}
	}
	n := 0
	for _, a := range d.Annotations.List {
		if a.Expr != nil {
			n++
			check("annotation "+a.Name, *a.Expr)
		}
	}
	if n == 0 {
		t.Error("no annotation queries Prometheus")
	}
}

// The threshold lines drawn for alerts sit at the alerts' thresholds in
// docs/prometheus/meshless-rules.yml, and the panels draw them.
func TestThresholdLinesAreTheAlerts(t *testing.T) {
	rules, err := os.ReadFile("../docs/prometheus/meshless-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, ps, _ := panels(t)
	for _, c := range []struct {
		alert string
		value float64
		panel string
	}{
		{"MeshlessCircuitBreakerTrips", tripsAlert, "Trips per hour (the worst instance of each breaker)"},
		{"MeshlessRetryAmplification", retryAlert, "Retry amplification (attempts per call)"},
		{"MeshlessBulkheadSaturated", saturationAlert, "Bulkhead saturation (active / limit)"},
		{"MeshlessDeadLetterNotDraining", notDrainingAlert, "Oldest waiting entry"},
	} {
		t.Run(c.alert, func(t *testing.T) {
			expr := regexp.MustCompile(`(?s)- alert: ` + c.alert + `\n\s+expr: \|\n(.*?)\n\s+(for|labels):`).FindSubmatch(rules)
			if expr == nil {
				t.Fatalf("no alert %s with an expr in the rule file", c.alert)
			}
			threshold := regexp.MustCompile(`(>=|>)\s*` + regexp.QuoteMeta(strconv.FormatFloat(c.value, 'f', -1, 64)) + `\s*$`)
			if !threshold.Match(bytes.TrimSpace(expr[1])) {
				t.Errorf("the alert's expr %q does not end in a comparison with %v", bytes.TrimSpace(expr[1]), c.value)
			}
			i := slices.IndexFunc(ps, func(p *grafana.Panel) bool { return *p.Title == c.panel })
			if i < 0 {
				t.Fatalf("no panel %q", c.panel)
			}
			steps := ps[i].FieldConfig.Defaults.Thresholds.Steps
			if len(steps) != 2 || steps[1].Value == nil || *steps[1].Value != c.value {
				t.Errorf("%s: threshold steps %s, want a line at %v", c.panel, mustJSON(t, steps), c.value)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ExampleRows() {
	for _, r := range Rows() {
		fmt.Printf("%s: %d panels\n", r.Title, len(r.Panels))
	}
	// Output:
	// Circuit breakers: 8 panels
	// Retries: 2 panels
	// Hedging: 2 panels
	// Bulkheads: 3 panels
	// Logical gRPC calls (what the application waited for): 4 panels
	// Logical HTTP calls (httpmw): 3 panels
	// Rate limiters: 1 panels
	// Adaptive throttling and observe mode: 2 panels
	// Outlier ejection (endpoints taken out of load balancing): 2 panels
	// Cluster mode (breakers shared through Redis): 3 panels
	// Dead-letter queue (calls kept while a breaker is open, replayed after): 3 panels
}

func ExampleJSON() {
	data, err := JSON()
	if err != nil {
		fmt.Println(err)
		return
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type string `json:"type"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.UID, len(d.Panels), "panels and rows")
	// Output: meshless-resilience 44 panels and rows
}

// No panel option is an empty string (the SDK's zero value where Grafana
// expects one of a set, as a state timeline's tooltip mode), but
// reduceOptions.fields, where "" means every numeric field.
func TestNoEmptyPanelOptions(t *testing.T) {
	data, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string         `json:"title"`
			Options map[string]any `json:"options"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var walk func(title, path string, v any)
	walk = func(title, path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(title, path+"."+k, e)
			}
		case string:
			if v == "" && path != "options.reduceOptions.fields" {
				t.Errorf("%s: %s is empty", title, path)
			}
		}
	}
	for _, p := range d.Panels {
		walk(p.Title, "options", map[string]any(p.Options))
	}
}

// The state timeline's values are the weights its value mappings name (0
// to 5): each one-hot term is clamped to 1 before it is weighted, since the
// state counts the breakers of a name in a process (two chains on one
// observer share the series), and two open ones would read 8, unmapped.
func TestStateTimelineValuesAreMapped(t *testing.T) {
	_, ps, _ := panels(t)
	i := slices.IndexFunc(ps, func(p *grafana.Panel) bool { return strings.HasPrefix(*p.Title, "Breaker state") })
	if i < 0 {
		t.Fatal("no Breaker state panel")
	}
	expr := ps[i].Targets[0].(prometheus.Dataquery).Expr
	terms := regexp.MustCompile(`\((\S.*) \* (\d+)\)`).FindAllStringSubmatch(expr, -1)
	if len(terms) != 6 {
		t.Fatalf("%d weighted terms in %q, want 6", len(terms), expr)
	}
	for _, term := range terms {
		if !strings.HasPrefix(term[1], "clamp_max(") || !strings.HasSuffix(term[1], ", 1)") {
			t.Errorf("weight %s multiplies %s, not the series clamped to 1", term[2], term[1])
		}
	}
}
