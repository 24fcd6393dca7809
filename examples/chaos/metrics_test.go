package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// families are the Prometheus metric families (name → type) that the
// default exporter must produce from a run of the demo's backend, cluster
// and events scenarios: the "Prometheus (default exporter)" column of the
// metric catalogue (docs/metrics.md), less the bulkhead's wait histogram
// (recorded only when a bulkhead queues, and the demo's does not) and the
// outlier ejection metrics (the pods scenario's: TestPodsEjectionsReachMetrics).
var families = map[string]string{
	"meshless_circuit_breaker_state":             "gauge",
	"meshless_circuit_breaker_transitions_total": "counter",
	"meshless_circuit_breaker_calls_total":       "counter",
	"meshless_circuit_breaker_failure_ratio":     "gauge",
	"meshless_circuit_breaker_slow_call_ratio":   "gauge",
	"meshless_retry_calls_total":                 "counter",
	"meshless_retry_attempts_total":              "counter",
	"meshless_bulkhead_call_active":              "gauge",
	"meshless_bulkhead_limit":                    "gauge",
	"meshless_bulkhead_calls_total":              "counter",
	"meshless_timeout_calls_total":               "counter",
	"meshless_call_duration_seconds":             "histogram", // _bucket, _sum, _count
	"meshless_rate_limiter_calls_total":          "counter",
	"meshless_throttler_calls_total":             "counter",
	"meshless_cluster_syncs_total":               "counter", // the cluster scenario's, through the ClusterListener
	"meshless_cluster_connected":                 "gauge",
	"meshless_cluster_remote_opens_total":        "counter",
	"meshless_deadletter_entries_total":          "counter", // the events scenario's, through the DeadLetterListener
	"meshless_deadletter_depth":                  "gauge",
	"meshless_deadletter_oldest_age_seconds":     "gauge",
}

// The exporter names the catalogue's metrics exactly as the catalogue says:
// _total on counters only, _seconds on the durations, and no _ratio added to
// gauges whose names already end in ratio.
func TestMetricsCarryTheCataloguesPrometheusNames(t *testing.T) {
	var body []byte
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics()
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		cfg := shortConfig(t)
		cfg.Quiet = true
		cfg.Observer = m.Observer
		cfg.Listen = listenMem
		if _, err := run(t.Context(), cfg, io.Discard); err != nil {
			t.Fatal(err)
		}
		cl := shortClusterConfig(t)
		cl.Quiet, cl.Observer, cl.Cluster = true, m.Observer, m.Cluster
		cl.Run = 3 * time.Second // pod A opens at 2.33s, B and C through Redis
		if _, err := runCluster(t.Context(), cl, io.Discard); err != nil {
			t.Fatal(err)
		}
		// Last the events scenario, scraped before its chain closes: the
		// queue's gauges are reported while it is open.
		ev := shortEventsConfig(t)
		ev.Observer, ev.DeadLetter, ev.Listen = m.Observer, m.DeadLetter, listenMem
		ev.drained = func() {
			rec := httptest.NewRecorder()
			m.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
			}
			body = rec.Body.Bytes()
		}
		if _, err := runEvents(t.Context(), ev, io.Discard); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	types := map[string]string{} // # TYPE lines of meshless_* families
	samples := map[string]bool{} // sample names
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			if strings.HasPrefix(name, "meshless_") {
				types[name] = typ
			}
			continue
		}
		if name, _, _ := strings.Cut(strings.SplitN(line, " ", 2)[0], "{"); strings.HasPrefix(name, "meshless_") {
			samples[name] = true
		}
	}
	if !maps.Equal(types, families) {
		t.Errorf("metric families served:\n%v\nwant:\n%v\n/metrics:\n%s", types, families, body)
	}
	for name, typ := range families {
		want := []string{name}
		if typ == "histogram" {
			want = []string{name + "_bucket", name + "_sum", name + "_count"}
		}
		for _, s := range want {
			if !samples[s] {
				t.Errorf("no sample named %s; samples: %v", s, slices.Sorted(maps.Keys(samples)))
			}
		}
	}
	for _, label := range []string{
		`meshless_circuit_breaker_name="grpc.testing.TestService"`,
		`meshless_circuit_breaker_state="open"`,
		`meshless_circuit_breaker_previous_state="closed"`,
		`meshless_circuit_breaker_outcome="rejected"`,
		`meshless_bulkhead_name="grpc.testing.TestService"`,
		`rpc_method="grpc.testing.TestService/UnaryCall"`,
		`meshless_retry_outcome="success_with_retry"`,
		`error_type="UNAVAILABLE"`,
		`error_type="circuit_open"`,
		`meshless_cluster_outcome="ok"`,
		`meshless_deadletter_key="grpc.testing.TestService"`,
		`meshless_deadletter_event="deferred"`,
		`meshless_deadletter_event="replayed"`,
		`meshless_deadletter_event="parked"`,
		`meshless_deadletter_state="parked"`,
		`meshless_deadletter_state="waiting"`,
		`error_type="deferred"`, // a deferred call's meshless.call.duration
	} {
		if !bytes.Contains(body, []byte(label)) {
			t.Errorf("/metrics has no label %s", label)
		}
	}
	// Once the queue has drained, the poison event is the one entry left:
	// parked, none waiting.
	for state, want := range map[string]string{"parked": "1", "waiting": "0"} {
		re := regexp.MustCompile(`(?m)^meshless_deadletter_depth\{[^}]*meshless_deadletter_state="` + state + `"[^}]*\} (\S+)$`)
		if m := re.FindSubmatch(body); m == nil || string(m[1]) != want {
			t.Errorf("meshless_deadletter_depth, %s: %q, want %s", state, m, want)
		}
	}
}

// The program's own metrics server answers on TCP, outside any bubble.
func TestMetricsServerServesMetrics(t *testing.T) {
	s, err := serveMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + s.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("# TYPE")) {
		t.Fatalf("GET /metrics: %v %v\n%s", resp.Status, err, body)
	}
}
