package otelmw_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// spanEvents runs fn under a recording span and returns the span's events,
// each as its name and encoded attributes.
func spanEvents(t *testing.T, fn func(ctx context.Context)) []string {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	fn(ctx)
	span.End()
	var out []string
	for _, e := range rec.Ended()[0].Events() {
		out = append(out, e.Name+" "+enc(e.Attributes...))
	}
	return out
}

func TestSpanEvents(t *testing.T) {
	obs, _ := newObserver(t)
	for _, tt := range []struct {
		name string
		run  func(ctx context.Context)
		want []string
	}{
		{
			name: "breaker rejection",
			run: func(ctx context.Context) {
				cb, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeForcedOpen })), circuitbreaker.WithName("payments"), circuitbreaker.WithObserver(obs))
				_, _ = enter(ctx, cb)
			},
			want: []string{"meshless.rejection " + enc(
				attribute.String("meshless.rejection.policy", "circuit_breaker"),
				attribute.String("meshless.rejection.reason", "circuit_open"),
				attribute.String("meshless.circuit_breaker.name", "payments"),
				attribute.String("meshless.circuit_breaker.state", "forced_open"))},
		},
		{
			name: "bulkhead rejection",
			run: func(ctx context.Context) {
				b, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })), bulkhead.WithName("shop"), bulkhead.WithObserver(obs))
				p, _ := enter(ctx, b)
				defer p.Release()
				_, _ = enter(ctx, b)
			},
			want: []string{"meshless.rejection " + enc(
				attribute.String("meshless.rejection.policy", "bulkhead"),
				attribute.String("meshless.rejection.reason", "bulkhead_full"),
				attribute.String("meshless.bulkhead.name", "shop"),
				attribute.Float64("meshless.bulkhead.wait", 0))},
		},
		{
			name: "bulkhead wait ended by the caller",
			run: func(ctx context.Context) {
				rec := obs.Attach(resilience.Source{Kind: resilience.KindBulkhead, Name: "queue"})
				rec.Record(ctx, resilience.Event{Type: resilience.EventRejection, Duration: 250 * time.Millisecond,
					Err: &bulkhead.FullError{Name: "queue", Cause: context.Canceled}})
			},
			want: []string{"meshless.rejection " + enc(
				attribute.String("meshless.rejection.policy", "bulkhead"),
				attribute.String("meshless.rejection.reason", "context_done"),
				attribute.String("meshless.bulkhead.name", "queue"),
				attribute.Float64("meshless.bulkhead.wait", 0.25))},
		},
		{
			name: "retry after a wrapped gRPC status",
			run: func(ctx context.Context) {
				rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/Get"})
				err := fmt.Errorf("attempt 1: %w", status.Error(codes.ResourceExhausted, "slow down"))
				rec.Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 2, Backoff: 100 * time.Millisecond, Err: err})
			},
			want: []string{"meshless.retry " + enc(
				attribute.Int("meshless.retry.attempt", 2),
				attribute.Float64("meshless.retry.backoff", 0.1),
				attribute.String("rpc.method", "pkg.Svc/Get"),
				attribute.String("error.type", "RESOURCE_EXHAUSTED"),
				attribute.String("rpc.response.status_code", "RESOURCE_EXHAUSTED"))},
		},
		{
			name: "retry after a deadline",
			run: func(ctx context.Context) {
				rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/Get"})
				rec.Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 3, Backoff: time.Second, Err: context.DeadlineExceeded})
			},
			want: []string{"meshless.retry " + enc(
				attribute.Int("meshless.retry.attempt", 3),
				attribute.Float64("meshless.retry.backoff", 1),
				attribute.String("rpc.method", "pkg.Svc/Get"),
				attribute.String("error.type", "DEADLINE_EXCEEDED"),
				attribute.String("rpc.response.status_code", "DEADLINE_EXCEEDED"))},
		},
		{
			name: "retry after an error without a code",
			run: func(ctx context.Context) {
				rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry})
				rec.Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 2, Backoff: time.Second, Err: errors.New("boom")})
			},
			want: []string{"meshless.retry " + enc(
				attribute.Int("meshless.retry.attempt", 2),
				attribute.Float64("meshless.retry.backoff", 1),
				attribute.String("error.type", "*errors.errorString"))},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := spanEvents(t, tt.run)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("span events\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWithoutSpanEvents(t *testing.T) {
	obs, _ := newObserver(t, otelmw.WithoutSpanEvents())
	got := spanEvents(t, func(ctx context.Context) {
		obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "m"}).
			Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 2, Err: errBoom})
		obs.Attach(resilience.Source{Kind: resilience.KindCircuitBreaker, Name: "b"}).
			Record(ctx, resilience.Event{Type: resilience.EventRejection, State: circuitbreaker.StateOpen})
	})
	if len(got) != 0 {
		t.Errorf("span events %q with WithoutSpanEvents", got)
	}
}
