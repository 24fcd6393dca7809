package bench

import (
	"context"
	"testing"

	"google.golang.org/grpc"
)

// BenchmarkGRPCInterceptorObserve is the interceptor alone on a no-op
// invoker, as BenchmarkGRPCInterceptorOnly, with `mode: observe` on the
// defaults beside `enforce` (the default), in one run: what observe mode
// adds to a call that nothing would have stopped. docs/benchmarks.md.
func BenchmarkGRPCInterceptorObserve(b *testing.B) {
	noop := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct{ name, yaml string }{
		{"enforce", "defaults: { mode: enforce }"},
		{"observe", "defaults: { mode: observe }"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			icpt := chainOf(b, tc.yaml).UnaryClientInterceptor()
			b.ReportAllocs()
			for b.Loop() {
				_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
			}
		})
	}
}
