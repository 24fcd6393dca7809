package bench

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
)

// BenchmarkCores runs each policy, the chain of three and grpcmw's
// interceptor around a no-op twice in one run: from one goroutine (serial)
// and under b.RunParallel, one goroutine per core (parallel). ns/op of the
// parallel case is wall time per call with every core calling; a policy
// that shares nothing across cores on its path is no slower per call in
// parallel than serially. Issue 24 item 3; docs/benchmarks.md, "Across
// cores".
func BenchmarkCores(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// call returns the function one goroutine calls per op; each
		// goroutine calls call once, so it may keep state of its own.
		call func(b *testing.B) func() func()
	}{
		{"breaker", func(b *testing.B) func() func() {
			cb := newMeshless(b)
			return func() func() { return func() { _ = cb.Execute(ctx, noop) } }
		}},
		{"bulkhead", func(b *testing.B) func() func() {
			bh := newMeshlessBulkhead(b)
			return func() func() { return func() { _ = bh.Execute(ctx, noop) } }
		}},
		{"bulkhead-acquire-release", func(b *testing.B) func() func() {
			bh := newMeshlessBulkhead(b)
			return func() func() {
				return func() {
					if _, pm, err := bh.Enter(ctx); err == nil {
						_ = bh.Exit(ctx, pm, resilience.Result{})
					}
				}
			}
		}},
		{"throttler", func(b *testing.B) func() func() {
			th := newThrottlerB(b)
			return func() func() { return func() { _ = th.Execute(ctx, noop) } }
		}},
		// As a pipeline calls it: Enter, then Exit with the Result's End,
		// which the pipeline read (here refreshed every 256 calls, so that
		// the figure is the throttler's own).
		{"throttler-gate", func(b *testing.B) func() func() {
			th := newThrottlerB(b)
			return func() func() {
				var n int
				r := resilience.Result{Outcome: resilience.Success}
				return func() {
					if n++; n&255 == 1 {
						r.End = time.Now()
					}
					if c, p, err := th.Enter(ctx); err == nil {
						_ = th.Exit(c, p, r)
					}
				}
			}
		}},
		{"ratelimiter", func(b *testing.B) func() func() {
			l := newMeshlessLimiter(b)
			return func() func() {
				return func() {
					if _, pm, err := l.Enter(ctx); err == nil {
						_ = l.Exit(ctx, pm, resilience.Result{})
					}
				}
			}
		}},
		{"chain", func(b *testing.B) func() func() {
			rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
			bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
			chain := resilience.NewChain(rt, newMeshless(b), bh)
			return func() func() { return func() { _ = chain.Execute(ctx, noop) } }
		}},
		{"grpcmw-no-timeouts", func(b *testing.B) func() func() {
			cfg, err := grpcmw.ParseConfig([]byte("defaults: { timeout: { enabled: false } }"))
			if err != nil {
				b.Fatal(err)
			}
			chain, err := grpcmw.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			icpt := chain.UnaryClientInterceptor()
			invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
			return func() func() {
				return func() { _ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, invoke) }
			}
		}},
	} {
		b.Run(tc.name+"/serial", func(b *testing.B) {
			call := tc.call(b)()
			b.ReportAllocs()
			for b.Loop() {
				call()
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			newCall := tc.call(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				call := newCall()
				for pb.Next() {
					call()
				}
			})
		})
	}
}

func newThrottlerB(b *testing.B) *throttler.Throttler {
	th, err := throttler.New(throttler.WithName("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return th
}

// BenchmarkThrottlerRefusing is the throttler as a gate (Enter, then Exit
// with the pipeline's End) against a backend that refuses some of its
// calls, serial and under b.RunParallel: every call admitted, then the
// window's refusals make Enter read more than on a healthy backend. "1%":
// rare errors; "half": with K = 2, at the edge of rejecting (probability
// about 0); "all": rejecting at the 90 % cap. docs/benchmarks/
// bulkhead-ratelimiter.md, "The throttler across cores".
func BenchmarkThrottlerRefusing(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		every int // one call in every refuses
	}{{"1pc", 100}, {"half", 2}, {"all", 1}} {
		newCall := func(th *throttler.Throttler) func() {
			var n int
			var end time.Time
			return func() {
				if n++; n&255 == 1 {
					end = time.Now()
				}
				r := resilience.Result{Outcome: resilience.Success, End: end}
				if n%tc.every == 0 {
					r.Outcome = resilience.Failure
				}
				if c, p, err := th.Enter(ctx); err == nil {
					_ = th.Exit(c, p, r)
				}
			}
		}
		warm := func(b *testing.B) *throttler.Throttler {
			th := newThrottlerB(b)
			call := newCall(th)
			for range 1000 {
				call()
			}
			return th
		}
		b.Run(tc.name+"/serial", func(b *testing.B) {
			call := newCall(warm(b))
			b.ReportAllocs()
			for b.Loop() {
				call()
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			th := warm(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				call := newCall(th)
				for pb.Next() {
					call()
				}
			})
		})
	}
}
