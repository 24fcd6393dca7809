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

// callDurations returns meshless.call.duration's data points: attribute set
// → count.
func callDurations(t *testing.T, reader *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "meshless.call.duration" {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				got[p.Attributes.Encoded(attribute.DefaultEncoder())] += p.Count
			}
		}
	}
	return got
}

// In observe mode an HTTP call's meshless.call.duration lost
// http.request.method and http.response.status_code: the engine marks the
// call's context as observed (a context.WithValue around httpmw's call), and
// otelmw read the method and status only from the call itself. A rollout's
// dashboards, split by status, showed every call under no status at all
// until the policies were enforced. Mode changes what policies do, not how
// a call is recorded: the two modes record the same attributes.
func TestObserveModeKeepsAnHTTPCallsAttributes(t *testing.T) {
	for _, mode := range []string{"enforce", "observe"} {
		t.Run(mode, func(t *testing.T) {
			h, _ := script(503, 200)
			b := newBackend(t, h)
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			defer mp.Shutdown(context.Background()) //nolint:errcheck
			obs, err := otelmw.New(mp)
			if err != nil {
				t.Fatal(err)
			}
			defer obs.Close() //nolint:errcheck
			chain := newChain(t, `
retryThrottling: { enabled: false }
defaults:
  mode: `+mode+`
  adaptiveThrottling: { enabled: false }
  retry: { enabled: false }
hosts:
  "{{host}}": {}
`, b.host, httpmw.WithObserver(obs))
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			for range 2 { // 503, then 200
				if _, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+"/x", nil)); err != nil {
					t.Fatal(err)
				}
			}
			addr, port, _ := strings.Cut(b.host, ":")
			p, _ := strconv.Atoi(port)
			set := func(kvs ...attribute.KeyValue) string {
				kvs = append(kvs, attribute.String("server.address", addr), attribute.Int("server.port", p),
					attribute.String("http.request.method", "GET"))
				s := attribute.NewSet(kvs...)
				return s.Encoded(attribute.DefaultEncoder())
			}
			want := map[string]uint64{
				set(attribute.Int("http.response.status_code", 503), attribute.String("error.type", "503")): 1,
				set(attribute.Int("http.response.status_code", 200)):                                        1,
			}
			got := callDurations(t, reader)
			for k, n := range want {
				if got[k] != n {
					t.Errorf("call.duration{%s} = %d, want %d; have %v", k, got[k], n, got)
				}
			}
		})
	}
}

// A server answering with statuses no one registered (432, 452, 512, …:
// net/http passes any three digits on) had each recorded as a status and
// error.type of its own, so that, over two methods, it spent the route's 256
// attribute sets, and the route's real 503s were recorded from then on with
// method and error.type _OTHER and no status. A route now records at most
// 16 such statuses as themselves (a CDN's 521 keeps its value); past them,
// one is _OTHER without a status, as a status outside 100-599 is.
func TestUnregisteredStatusesDoNotSpendARoutesBound(t *testing.T) {
	var unregistered []int
	for s := 400; s <= 599; s++ {
		if http.StatusText(s) == "" {
			unregistered = append(unregistered, s)
		}
	}
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		s, _ := strconv.Atoi(r.URL.Query().Get("s"))
		w.WriteHeader(s)
	})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background()) //nolint:errcheck
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close() //nolint:errcheck
	chain := newChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
hosts:
  "{{host}}": {}
`, b.host, httpmw.WithObserver(obs))
	tr, _ := newTransport(t)
	client := chain.Client(tr)
	send := func(method string, s int) {
		t.Helper()
		if _, _, err := do(t, client, newRequest(t, method, b.URL+"/x?s="+strconv.Itoa(s), nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, s := range unregistered {
			send(method, s)
		}
	}
	send(http.MethodGet, 503)
	got := callDurations(t, reader)
	if len(got) > 64 {
		t.Errorf("meshless.call.duration has %d attribute sets for one route after %d unregistered statuses", len(got), 2*len(unregistered))
	}
	addr, port, _ := strings.Cut(b.host, ":")
	p, _ := strconv.Atoi(port)
	s := attribute.NewSet(attribute.String("server.address", addr), attribute.Int("server.port", p),
		attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 503),
		attribute.String("error.type", "503"))
	if k := s.Encoded(attribute.DefaultEncoder()); got[k] != 1 {
		t.Errorf("call.duration{%s} = %d, want 1: the real 503 lost its attributes", k, got[k])
	}
	first := attribute.NewSet(attribute.String("server.address", addr), attribute.Int("server.port", p),
		attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", unregistered[0]),
		attribute.String("error.type", strconv.Itoa(unregistered[0])))
	if k := first.Encoded(attribute.DefaultEncoder()); got[k] != 1 {
		t.Errorf("call.duration{%s} = %d, want 1: the first unregistered status keeps its value", k, got[k])
	}
}
