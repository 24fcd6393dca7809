package bench

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// B7: recording one breaker success event, with the SDK installed (a
// ManualReader, never collected during the run).
//
//   - otelmw: the recorder otelmw attaches to a breaker, recording
//     meshless.circuit_breaker.calls through its prebuilt option slice;
//   - sdk-prebuilt: the floor of that recipe, a plain SDK counter's Add with
//     a prebuilt option slice of the same three attributes;
//   - WithAttributes: the same counter add with the same three attributes,
//     built per call with metric.WithAttributes, the way instrumentation
//     often does it;
//   - otelmw-noop: otelmw on the no-op MeterProvider (no SDK);
//   - breaker-bare and breaker-otelmw: a closed breaker's Execute around a
//     no-op, without an observer and with otelmw: what the metric costs a
//     call;
//   - chain-bare and chain-otelmw: grpcmw's unary interceptor with the
//     default configuration around a no-op invoker, without an observer and
//     with otelmw: every metric of one logical call (breaker, bulkhead,
//     retry, two timeouts, call duration).
func BenchmarkMetricsB7(b *testing.B) {
	ctx := context.Background()
	success := resilience.Event{Type: resilience.EventCall, Outcome: resilience.Success, Duration: time.Millisecond}
	newSDK := func(b *testing.B) *sdkmetric.MeterProvider {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(ctx) })
		return mp
	}
	newObserver := func(b *testing.B, mp metric.MeterProvider) *otelmw.Observer {
		obs, err := otelmw.New(mp)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = obs.Close() })
		return obs
	}
	source := resilience.Source{Kind: resilience.KindCircuitBreaker, Name: "payments"}

	b.Run("otelmw", func(b *testing.B) {
		rec := newObserver(b, newSDK(b)).Attach(source)
		b.ReportAllocs()
		for b.Loop() {
			rec.Record(ctx, success)
		}
	})
	attrs := []attribute.KeyValue{
		attribute.String("meshless.circuit_breaker.name", "payments"),
		attribute.String("meshless.circuit_breaker.outcome", "success"),
		attribute.Bool("meshless.circuit_breaker.slow", false),
	}
	counter := func(b *testing.B) metric.Int64Counter {
		c, err := newSDK(b).Meter("bench").Int64Counter("meshless.circuit_breaker.calls", metric.WithUnit("{call}"))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	b.Run("sdk-prebuilt", func(b *testing.B) {
		calls := counter(b)
		opts := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
		b.ReportAllocs()
		for b.Loop() {
			calls.Add(ctx, 1, opts...)
		}
	})
	b.Run("WithAttributes", func(b *testing.B) {
		calls := counter(b)
		b.ReportAllocs()
		for b.Loop() {
			calls.Add(ctx, 1, metric.WithAttributes(
				attribute.String("meshless.circuit_breaker.name", "payments"),
				attribute.String("meshless.circuit_breaker.outcome", "success"),
				attribute.Bool("meshless.circuit_breaker.slow", false),
			))
		}
	})
	b.Run("otelmw-noop", func(b *testing.B) {
		rec := newObserver(b, noopmetric.NewMeterProvider()).Attach(source)
		b.ReportAllocs()
		for b.Loop() {
			rec.Record(ctx, success)
		}
	})
	breaker := func(b *testing.B, obs resilience.Observer) {
		cb, err := circuitbreaker.New(circuitbreaker.WithName("payments"), circuitbreaker.WithObserver(obs))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	}
	b.Run("breaker-bare", func(b *testing.B) { breaker(b, nil) })
	b.Run("breaker-otelmw", func(b *testing.B) { breaker(b, newObserver(b, newSDK(b))) })

	chain := func(b *testing.B, opts ...grpcmw.Option) {
		c, err := grpcmw.New(nil, opts...)
		if err != nil {
			b.Fatal(err)
		}
		icpt := c.UnaryClientInterceptor()
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, invoker)
		}
	}
	b.Run("chain-bare", func(b *testing.B) { chain(b) })
	b.Run("chain-otelmw", func(b *testing.B) { chain(b, grpcmw.WithObserver(newObserver(b, newSDK(b)))) })
}
