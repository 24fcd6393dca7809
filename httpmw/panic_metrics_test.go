package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
)

// panicMetrics returns an observer on a manual reader, and a function that
// reads each metric's points: metric → attribute set → count or value.
func panicMetrics(t *testing.T) (*otelmw.Observer, func() map[string][]point) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	return obs, func() map[string][]point {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string][]point{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						got[m.Name] = append(got[m.Name], point{p.Attributes, int64(p.Count)})
					}
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						got[m.Name] = append(got[m.Name], point{p.Attributes, p.Value})
					}
				}
			}
		}
		return got
	}
}

// point is one data point: its attributes and its count or value.
type point struct {
	attrs attribute.Set
	n     int64
}

// with returns the sum of the points whose attributes hold every one of
// kvs.
func with(points []point, kvs ...attribute.KeyValue) int64 {
	var n int64
	for _, p := range points {
		all := true
		for _, kv := range kvs {
			if got, ok := p.attrs.Value(kv.Key); !ok || got != kv.Value {
				all = false
			}
		}
		if all {
			n += p.n
		}
	}
	return n
}

// panicking is a RoundTripper that panics, below the chain.
type panicking struct{}

func (panicking) RoundTrip(*http.Request) (*http.Response, error) { panic("round trip") }

// A request whose RoundTripper (below the chain) panics reaches the
// caller as the panic, unchanged, and is in the metrics as a call that
// failed: meshless.call.duration with error.type "transport" (an error
// without a status) and no status code, meshless.retry.calls
// failed_without_retry (never retried), and its permits back
// (meshless.bulkhead.call.active 0).
func TestAPanickingRoundTripIsAFailedCallInTheMetrics(t *testing.T) {
	obs, read := panicMetrics(t)
	chain := newChain(t, "defaults: { retry: { maxAttempts: 3 }, bulkhead: { maxConcurrentCalls: 2 } }", "api.example", httpmw.WithObserver(obs))
	client := chain.Client(panicking{})
	for range 3 {
		r := func() (r any) {
			defer func() { r = recover() }()
			req := newRequest(t, http.MethodGet, "http://api.example/items/1", nil)
			resp, err := client.Transport.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return nil
		}()
		if r != "round trip" {
			t.Fatalf("recovered %v, want the RoundTripper's panic unchanged", r)
		}
	}
	got := read()
	if n := with(got["meshless.call.duration"], attribute.String("error.type", "transport")); n != 3 {
		t.Errorf("meshless.call.duration: %d calls with error.type transport, want 3: %v", n, got["meshless.call.duration"])
	}
	if n := with(got["meshless.call.duration"], attribute.Int("http.response.status_code", 500)); n != 0 {
		t.Errorf("meshless.call.duration: %d calls with a status, want none", n)
	}
	if n := with(got["meshless.retry.calls"], attribute.String("meshless.retry.outcome", "failed_without_retry")); n != 3 {
		t.Errorf("meshless.retry.calls: %d failed_without_retry, want 3: %v", n, got["meshless.retry.calls"])
	}
	if n := with(got["meshless.retry.attempts"]); n != 3 {
		t.Errorf("meshless.retry.attempts: %d, want 3 (a panic is not retried)", n)
	}
	if n := with(got["meshless.bulkhead.call.active"]); n != 0 {
		t.Errorf("meshless.bulkhead.call.active = %d after the panics, want 0", n)
	}
}

// A server's handler that panics — with a value of its own, or with
// http.ErrAbortHandler, a handler's deliberate abort — gives its permits
// back (meshless.bulkhead.call.active 0: the saturation panel does not
// climb), stays counted as admitted, and its panic reaches net/http
// unchanged (http.ErrAbortHandler is still itself, so net/http aborts the
// response without logging a stack).
func TestAPanickingHandlerLeavesNoCallActive(t *testing.T) {
	obs, read := panicMetrics(t)
	srv := newServer(t, "defaults: { bulkhead: { maxConcurrentCalls: 2 } }", httpmw.WithServerObserver(obs))
	for _, value := range []any{"handler", http.ErrAbortHandler} {
		h := srv.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(value) }))
		for range 3 {
			r := func() (r any) {
				defer func() { r = recover() }() // as net/http's conn.serve recovers
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://api.example/", nil))
				return nil
			}()
			if r != value {
				t.Fatalf("net/http would recover %v, want the handler's %v, itself", r, value)
			}
		}
	}
	got := read()
	if n := with(got["meshless.bulkhead.call.active"]); n != 0 {
		t.Errorf("meshless.bulkhead.call.active = %d after the panics, want 0", n)
	}
	if n := with(got["meshless.bulkhead.calls"], attribute.String("meshless.bulkhead.outcome", "admitted")); n != 6 {
		t.Errorf("meshless.bulkhead.calls admitted = %d, want 6", n)
	}
}
