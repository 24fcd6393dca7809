package httpmw_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
)

// otelmw records an HTTP chain's calls with OpenTelemetry's HTTP
// attributes — url.template is the route's pattern, never the path — and
// its breakers and retries as for gRPC, named by host and route.
func TestMetricsOfHTTPCalls(t *testing.T) {
	if httpmw.CallScope != otelmw.HTTPScope {
		t.Fatalf("httpmw marks its calls %q, otelmw reads %q", httpmw.CallScope, otelmw.HTTPScope)
	}
	h, _ := script(503, 200, 404)
	b := newBackend(t, h)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background()) //nolint:errcheck
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close() //nolint:errcheck
	chain := newChain(t, routesYAML, b.host, httpmw.WithObserver(obs))
	tr, _ := newTransport(t)
	client := chain.Client(tr)
	for _, path := range []string{"/items/1", "/items/2"} { // 503 then 200; 404
		if _, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+path, nil)); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{} // metric → attributes → count
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = map[string]int64{}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name][p.Attributes.Encoded(attribute.DefaultEncoder())] = int64(p.Count)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name][p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
				}
			}
		}
	}
	addr, port, _ := strings.Cut(b.host, ":")
	p, _ := strconv.Atoi(port)
	route := []attribute.KeyValue{attribute.String("server.address", addr), attribute.Int("server.port", p),
		attribute.String("url.template", "/items/{id}"), attribute.String("http.request.method", "GET")}
	set := func(kvs ...attribute.KeyValue) string {
		s := attribute.NewSet(kvs...)
		return s.Encoded(attribute.DefaultEncoder())
	}
	name := b.host + "/GET /items/{id}"
	for _, w := range []struct {
		metric, attrs string
		n             int64
	}{
		{"meshless.call.duration", set(append(route, attribute.Int("http.response.status_code", 200))...), 1},
		{"meshless.call.duration", set(append(route, attribute.Int("http.response.status_code", 404), attribute.String("error.type", "404"))...), 1},
		{"meshless.retry.attempts", set(attribute.String("rpc.method", name)), 3},
		{"meshless.retry.calls", set(attribute.String("rpc.method", name), attribute.String("meshless.retry.outcome", "success_with_retry")), 1},
		{"meshless.circuit_breaker.calls", set(attribute.String("meshless.circuit_breaker.name", name),
			attribute.String("meshless.circuit_breaker.outcome", "failure"), attribute.Bool("meshless.circuit_breaker.slow", false)), 1},
		{"meshless.circuit_breaker.calls", set(attribute.String("meshless.circuit_breaker.name", name),
			attribute.String("meshless.circuit_breaker.outcome", "success"), attribute.Bool("meshless.circuit_breaker.slow", false)), 2},
	} {
		if got[w.metric][w.attrs] != w.n {
			t.Errorf("%s{%s} = %d, want %d; have %v", w.metric, w.attrs, got[w.metric][w.attrs], w.n, got[w.metric])
		}
	}
	for attrs := range got["meshless.call.duration"] {
		if strings.Contains(attrs, "/items/1") || strings.Contains(attrs, "/items/2") || strings.Contains(attrs, "rpc.") {
			t.Errorf("call.duration{%s}: a raw path or an rpc attribute", attrs)
		}
	}
}
