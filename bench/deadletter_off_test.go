package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
)

// BenchmarkGRPCInterceptorDeadLetterOff is the interceptor alone on a no-op
// invoker, as BenchmarkGRPCInterceptorOnly, for a method without a
// deadLetter section: in a chain where no level has one ("none"), and in a
// chain where another service of the same file defers its calls to a local
// file ("other-service"). The two should cost the same: a method without
// deadLetter pays nothing for the queue. docs/benchmarks.md (B14).
func BenchmarkGRPCInterceptorDeadLetterOff(b *testing.B) {
	noop := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct{ name, yaml string }{
		{"none", "defaults: {}"},
		{"other-service", "services:\n  grpc.testing.ReconnectService:\n    deadLetter: { path: %q }\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			yaml, file := tc.yaml, ""
			if tc.name == "other-service" {
				file = filepath.Join(b.TempDir(), "dl.db")
				yaml = fmt.Sprintf(yaml, file)
			}
			chain := chainOf(b, yaml)
			if file != "" { // the queue is open: the section took effect
				if _, err := os.Stat(file); err != nil {
					b.Fatalf("the other service's dead-letter file: %v", err)
				}
			}
			icpt := chain.UnaryClientInterceptor()
			b.ReportAllocs()
			for b.Loop() {
				_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
			}
		})
	}
}
