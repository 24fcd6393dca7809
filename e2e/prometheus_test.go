package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The demo's schedule for this test: long enough for a 1s scrape interval to
// see every phase several times, and for the breaker to open at least three
// times (the trips alert) while failing and hanging. Its backend is slow
// (120ms a call: 24 attempts in flight at 200 calls a second, the bulkhead
// alert) and flaky (one request in five fails with UNAVAILABLE, which
// meshless retries: the retry amplification alert), as the demo's overloaded
// backend sheds too much for either: its breaker opens. The pods scenario
// follows on its defaults (12s), for the outlier-ejection row: a failing pod
// and a slow one ejected; then the cluster scenario on its defaults (two
// runs of 5s through the embedded miniredis), for the cluster-mode row:
// syncs, instances connected, and two remote opens. Last the events
// scenario, for the dead-letter row and its alerts: its backend fails for
// 4s (800 events), its queue keeps 500 of them and refuses the others (the
// losing alert), its poison event (the 400th of the outage, kept) is parked
// after the recovery (the parked alert), and the recovered phase lasts long
// enough for a few scrapes to see it parked.
var chaosArgs = []string{
	"-scenario", "backend,pods,cluster,events",
	"-healthy", "4s", "-overloaded", "6s", "-failing", "6s", "-hanging", "6s", "-recovered", "4s",
	"-work", "120ms", "-workers", "40", "-queue", "0", "-load", "1", "-fail-every", "5",
	"-events-healthy", "2s", "-events-failing", "4s", "-events-recovered", "8s", "-events-max-entries", "500",
	"-metrics", "127.0.0.1:0", "-serve", "-svg", "",
}

// demoThresholds are lowered in the copy of the rule file that Prometheus
// loads here: a run of the demo lasts a minute, and cannot keep an entry
// waiting for an hour; and on a busy machine (two cores running the whole
// suite under -race) the demo's load generator may not keep 24 of 30
// attempts in flight at a scrape, or retry more than one call in ten over
// the run. Each is found exactly once in the rule file (a threshold changed
// there fails the test until it is changed here); the rule file's own
// thresholds are checked by its promtool unit tests. With it lowered, the
// alert still shows that its expression reads the demo's series.
var demoThresholds = []struct{ alert, from, to string }{
	{"MeshlessDeadLetterNotDraining", "max by (job, meshless_deadletter_key) (meshless_deadletter_oldest_age_seconds) > 3600",
		"max by (job, meshless_deadletter_key) (meshless_deadletter_oldest_age_seconds) > 1"},
	{"MeshlessRetryAmplification", "job_rpc_method:meshless_retry_attempts_per_call:ratio_rate5m > 1.1",
		"job_rpc_method:meshless_retry_attempts_per_call:ratio_rate5m > 1"},
	{"MeshlessBulkheadSaturated", "job_instance_meshless_bulkhead_name:meshless_bulkhead_saturation:max >= 0.8",
		"job_instance_meshless_bulkhead_name:meshless_bulkhead_saturation:max > 0"},
}

// demoRules writes the rule file with demoThresholds to dir and returns
// its path.
func demoRules(t *testing.T, rules, dir string) string {
	t.Helper()
	data, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	text, err := lowerThresholds(string(data))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "meshless-rules-demo.yml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lowerThresholds returns the rule file's text with demoThresholds, or an
// error if one is not in it exactly once.
func lowerThresholds(text string) (string, error) {
	for _, d := range demoThresholds {
		if n := strings.Count(text, d.from); n != 1 {
			return "", fmt.Errorf("the rule file has %q %d times, want once (the %s alert's expression): update demoThresholds", d.from, n, d.alert)
		}
		text = strings.Replace(text, d.from, d.to, 1)
	}
	return text, nil
}

// rateInterval stands for Grafana's $__rate_interval: four times the
// scrape interval (1s), Grafana's floor for it.
const rateInterval = "4s"

// The values the dashboard's variables take: every value (All) — and one
// each: the demo's job, service and method, one instance (each of the two,
// in turn), one ejected endpoint (found in Prometheus).
var (
	allValues = map[string]string{
		"job": ".*", "instance": ".*", "breaker": ".*", "method": ".*", "server": ".*",
		"__rate_interval": rateInterval,
	}
	oneValue = map[string]string{
		"job": "chaos", "breaker": "grpc.testing.TestService", "method": "grpc.testing.TestService/UnaryCall",
		"__rate_interval": rateInterval,
	}
)

// TestDashboardAndRulesAgainstPrometheus runs examples/chaos and a client
// that hedges (startHedgingClient), has a real Prometheus scrape both (and
// evaluate the rules), and then checks that every query of the Grafana
// dashboard and every rule returns data, that every recording rule recorded
// series, and that every alert went at least pending.
func TestDashboardAndRulesAgainstPrometheus(t *testing.T) {
	prometheus, promtool := tools(t)
	if testing.Short() {
		t.Skip("about a minute: skipped in -short mode")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dashboard := filepath.Join(root, "docs", "grafana", "meshless.json")
	rules := filepath.Join(root, "docs", "prometheus", "meshless-rules.yml")
	dir := t.TempDir()
	demo := demoRules(t, rules, dir)
	dqs, vars := dashboardQueries(t, dashboard)
	rqs, alerts, records := ruleQueries(t, demo)
	for _, v := range vars {
		if _, ok := allValues[v]; !ok && v != "DS_PROMETHEUS" {
			t.Fatalf("the dashboard has a variable %q this test does not know", v)
		}
	}

	for _, f := range []string{rules, demo} {
		if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
			t.Fatalf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}

	bin := filepath.Join(dir, "chaos")
	// examples/ is a module of its own: build from its directory, with or
	// without the workspace (go.work).
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./chaos")
	build.Dir = filepath.Join(root, "examples")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/chaos: %v\n%s", err, out)
	}

	start := time.Now()
	hedging := startHedgingClient(t)
	chaosOut := filepath.Join(dir, "chaos.out")
	chaos := startProcess(t, chaosOut, bin, chaosArgs...)
	defer dumpOnFailure(t, "examples/chaos", chaosOut)
	var target string
	metricsLine := regexp.MustCompile(`(?m)^metrics: http://(127\.0\.0\.1:\d+)/metrics$`)
	waitFor(t, 30*time.Second, "examples/chaos to print its metrics address", func() (bool, error) {
		if m := metricsLine.FindStringSubmatch(readFile(chaosOut)); m != nil {
			target = m[1]
			return true, nil
		}
		return false, chaos.exited()
	})

	promDir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(promDir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(promDir, "prometheus.yml")
	// One job, two instances: the demo and the hedging client.
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: chaos
    static_configs:
      - targets: [%q, %q]
`, demo, target, hedging)), 0o644); err != nil {
		t.Fatal(err)
	}
	promLog := filepath.Join(promDir, "prometheus.log")
	api := startPrometheus(t, prometheus, config, filepath.Join(promDir, "data"), promLog)
	defer dumpOnFailure(t, "prometheus", promLog)

	waitFor(t, 30*time.Second, "Prometheus to scrape examples/chaos and the hedging client", func() (bool, error) {
		v, err := api.query(`up{job="chaos"} == 1`)
		return len(v) == 2, err
	})
	waitFor(t, 120*time.Second, "examples/chaos to finish its scenarios", func() (bool, error) {
		// -serve: printed once every scenario is over.
		return strings.Contains(readFile(chaosOut), "still serving /metrics"), chaos.exited()
	})
	end := time.Now()
	// The scrapes after the end of the schedule are in before the queries
	// run: a series that has a sample after end was scraped since.
	waitFor(t, 30*time.Second, "a scrape after the end of the schedule", func() (bool, error) {
		v, err := api.query(fmt.Sprintf(`timestamp(meshless_circuit_breaker_state{job="chaos"}) > %d`, end.Unix()+1))
		return len(v) > 0, err
	})
	servers, err := api.labelValues("server_address", `meshless_outlier_ejections_total{job="chaos"}`, start, time.Now())
	if err != nil || len(servers) == 0 {
		t.Fatalf("no ejected endpoint for the server variable: %v %v", servers, err)
	}

	// Every query returns data over the run: with every value of the
	// dashboard's variables, and with one value each (for one instance at
	// least: the hedging panels have data on the hedging client only, the
	// others on the demo only). Every rule returns data, every recording
	// rule recorded series, and every alert went pending or firing.
	var checks []check
	for _, q := range dqs {
		all := q
		all.Expr = substitute(t, q.Expr, allValues)
		checks = append(checks, check{all})
		var one check
		for _, instance := range []string{target, hedging} {
			v := maps.Clone(oneValue)
			v["instance"], v["server"] = instance, servers[0]
			for name := range v {
				if name != "__rate_interval" {
					v[name] = grafanaEscape(v[name])
				}
			}
			qi := q
			qi.Expr = substitute(t, q.Expr, v)
			one = append(one, qi)
		}
		checks = append(checks, one)
	}
	for _, q := range rqs {
		checks = append(checks, check{q})
	}
	for _, r := range records {
		checks = append(checks, check{{From: "recorded by " + r, Expr: r}})
	}
	for _, a := range alerts {
		checks = append(checks, check{{From: "alert " + a + " went pending or firing", Expr: fmt.Sprintf(`ALERTS{alertname=%q}`, a)}})
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range checks {
		for {
			n, points, q, err := c.results(api, start, time.Now())
			if err != nil {
				t.Errorf("%v\n  %v", q, err)
				break
			}
			if n > 0 {
				t.Logf("%d series, %d points: %v", n, points, q)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("no data: %v", c)
				break
			}
			time.Sleep(500 * time.Millisecond) // Prometheus evaluates rules and scrapes every second
		}
	}
}

// A check is one query, or one query under several values of the
// variables: it passes when one of them returns data.
type check []query

// results returns the results of the first query of c that returns data,
// or of its last query.
func (c check) results(api *promAPI, start, end time.Time) (series, points int, q query, err error) {
	for _, q = range c {
		series, points, err = api.results(q, start, end)
		if err != nil || series > 0 {
			break
		}
	}
	return series, points, q, err
}

func (c check) String() string {
	var b strings.Builder
	for i, q := range c {
		if i > 0 {
			b.WriteString("\n  or ")
		}
		b.WriteString(q.String())
	}
	return b.String()
}

// grafanaEscape is how Grafana writes a value of a multi-value variable
// into a Prometheus query: a regular expression's special characters
// escaped, and the backslashes escaped again for the PromQL string.
func grafanaEscape(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}

// tools finds prometheus and promtool. Without them the test skips, or
// fails under CI.
func tools(t *testing.T) (prometheus, promtool string) {
	t.Helper()
	var missing []string
	find := func(name string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
		}
		return p
	}
	prometheus, promtool = find("prometheus"), find("promtool")
	if len(missing) > 0 {
		msg := fmt.Sprintf("%s not found: install Debian's prometheus package (apt-get install prometheus)", strings.Join(missing, " and "))
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI is set, so this is a failure, not a skip")
		}
		t.Skip(msg + "; set CI=true to make this a failure")
	}
	return prometheus, promtool
}

// process is a program the test started.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // once done is closed
}

// startProcess runs name with its output in the file out, and stops it
// (interrupt, then kill) when the test ends.
func startProcess(t *testing.T, out, name string, args ...string) *process {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f // files: no copying goroutines
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exited returns an error once the process has ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", filepath.Base(p.cmd.Path), p.err)
	default:
		return nil
	}
}

// startPrometheus starts Prometheus on a free loopback port and waits until
// it is ready.
func startPrometheus(t *testing.T, bin, config, data, log string) *promAPI {
	t.Helper()
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p := startProcess(t, log, bin,
			"--config.file="+config,
			"--storage.tsdb.path="+data,
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		api := &promAPI{base: "http://" + addr, client: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{DisableKeepAlives: true},
		}}
		ready := false
		waitFor(t, 30*time.Second, "Prometheus to be ready", func() (bool, error) {
			if err := p.exited(); err != nil {
				return true, nil // tried below
			}
			resp, err := api.client.Get(api.base + "/-/ready")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
			return ready, nil
		})
		if ready {
			return api
		}
		if try == 3 {
			t.Fatalf("prometheus did not start:\n%s", readFile(log))
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// promAPI queries Prometheus's HTTP API.
type promAPI struct {
	base   string
	client *http.Client
}

type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

func (a *promAPI) get(path string, params url.Values) (json.RawMessage, error) {
	resp, err := a.client.Get(a.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", path, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", r.ErrorType, r.Error, resp.Status)
	}
	return r.Data, nil
}

// query runs an instant query and returns its vector.
func (a *promAPI) query(expr string) ([]json.RawMessage, error) {
	data, err := a.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var v struct {
		Result []json.RawMessage `json:"result"`
	}
	err = json.Unmarshal(data, &v)
	return v.Result, err
}

// labelValues returns the values of label on the series of selector
// between start and end.
func (a *promAPI) labelValues(label, selector string, start, end time.Time) ([]string, error) {
	data, err := a.get("/api/v1/label/"+label+"/values", url.Values{
		"match[]": {selector},
		"start":   {strconv.FormatInt(start.Unix(), 10)},
		"end":     {strconv.FormatInt(end.Unix()+1, 10)},
	})
	if err != nil {
		return nil, err
	}
	var values []string
	err = json.Unmarshal(data, &values)
	return values, err
}

// results returns how many series q returns with at least one value between
// start and end, and how many values they have in all (at one a second): a
// range query for an expression, the label's values for a variable's
// label_values.
func (a *promAPI) results(q query, start, end time.Time) (series, points int, err error) {
	if q.LabelValues != "" {
		values, err := a.labelValues(q.LabelValues, q.Expr, start, end)
		return len(values), len(values), err
	}
	data, err := a.get("/api/v1/query_range", url.Values{
		"query": {q.Expr},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix()+1, 10)},
		"step":  {"1"},
	})
	if err != nil {
		return 0, 0, err
	}
	var m struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, 0, err
	}
	for _, s := range m.Result {
		if len(s.Values) > 0 {
			series++
			points += len(s.Values)
		}
	}
	return series, points, nil
}

// waitFor polls cond every 200ms until it is true, and fails the test if it
// is not by the deadline or if it returns an error.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err.Error()
	}
	return string(b)
}

func dumpOnFailure(t *testing.T, name, path string) {
	if t.Failed() {
		t.Logf("%s's output:\n%s", name, readFile(path))
	}
}
