package httpmw_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/ctxtest"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// The HTTP side of docs/metrics.md's "A call admitted as its deadline
// passed": a request admitted from the bulkhead's queue as its deadline
// passed is one failed call (error.type timeout, its method, no status),
// admitted by the bulkhead and given back, ignored by the breaker, one
// attempt of a failed retry call, and no span event.
func TestARequestAdmittedAsItsDeadlinePassedInTheCatalogue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background()) //nolint:errcheck
		otel, err := otelmw.New(mp)
		if err != nil {
			t.Fatal(err)
		}
		defer otel.Close() //nolint:errcheck
		var arrived atomic.Int64
		release := make(chan struct{})
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			if err := r.Context().Err(); err != nil {
				return nil, err
			}
			if arrived.Add(1) == 1 {
				<-release
			}
			return ok(r)
		})
		waiter := ctxtest.NewEnding()
		var armed atomic.Bool
		hook := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			if src.Kind != resilience.KindBulkhead {
				return nil
			}
			return recordFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventAcquired && armed.CompareAndSwap(true, false) {
					waiter.End()
				}
			})
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 5s }
hosts:
  api.example:
    retry: { maxAttempts: 3, initialBackoff: 1s, jitter: 0 }
`, httpmw.WithObserver(resilience.Observers(otel, hook)))
		client := chain.RoundTripper(rt)
		get := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
			resp, err := client.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		defer tp.Shutdown(context.Background()) //nolint:errcheck
		held := make(chan error, 1)
		go func() { held <- get(context.Background()) }()
		synctest.Wait() // the first request holds the only permit
		armed.Store(true)
		got := make(chan error, 1)
		ctx, span := tp.Tracer("test").Start(waiter, "waiter")
		go func() { got <- get(ctx) }()
		synctest.Wait() // the second waits for it
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		<-got
		span.End()
		if n := arrived.Load(); n != 1 {
			t.Fatalf("the host saw %d requests, want 1", n)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got2 := map[string]map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				vs := map[string]float64{}
				switch d := m.Data.(type) {
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						vs[p.Attributes.Encoded(attribute.DefaultEncoder())] = float64(p.Count)
					}
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						vs[p.Attributes.Encoded(attribute.DefaultEncoder())] = float64(p.Value)
					}
				}
				got2[m.Name] = vs
			}
		}
		set := func(kvs ...attribute.KeyValue) string {
			s := attribute.NewSet(kvs...)
			return s.Encoded(attribute.DefaultEncoder())
		}
		host, m := attribute.String("server.address", "api.example"), attribute.String("rpc.method", "api.example/_OTHER")
		get2 := attribute.String("http.request.method", "GET")
		bh, cb := attribute.String("meshless.bulkhead.name", "api.example"), attribute.String("meshless.circuit_breaker.name", "api.example")
		for _, w := range []struct {
			metric, attrs string
			n             float64
		}{
			{"meshless.call.duration", set(host, get2, attribute.Int("http.response.status_code", 200)), 1},
			{"meshless.call.duration", set(host, get2, attribute.String("error.type", "timeout")), 1},
			{"meshless.bulkhead.calls", set(bh, attribute.String("meshless.bulkhead.outcome", "admitted")), 2},
			{"meshless.bulkhead.call.active", set(bh), 0},
			{"meshless.circuit_breaker.calls", set(cb, attribute.String("meshless.circuit_breaker.outcome", "ignored"), attribute.Bool("meshless.circuit_breaker.slow", false)), 1},
			{"meshless.circuit_breaker.calls", set(cb, attribute.String("meshless.circuit_breaker.outcome", "failure"), attribute.Bool("meshless.circuit_breaker.slow", false)), 0},
			{"meshless.retry.attempts", set(m), 2},
			{"meshless.retry.calls", set(m, attribute.String("meshless.retry.outcome", "failed_without_retry")), 1},
		} {
			if v := got2[w.metric][w.attrs]; v != w.n {
				t.Errorf("%s{%s} = %v, want %v; have %v", w.metric, w.attrs, v, w.n, got2[w.metric])
			}
		}
		if n := len(got2["meshless.call.duration"]); n != 2 {
			t.Errorf("meshless.call.duration: %d series, want 2: %v", n, got2["meshless.call.duration"])
		}
		for _, s := range sr.Ended() {
			for _, e := range s.Events() {
				t.Errorf("span %s: event %s %v; want none", s.Name(), e.Name, e.Attributes)
			}
		}
	})
}
