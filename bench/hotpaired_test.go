package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// BenchmarkChainPaired is B4 with its timeout measured in pairs, as
// BenchmarkGRPCUnaryTCPPaired measures B5: the floor (a) and the chain (b)
// take turns in blocks of pairedBlock calls, each block timed, the first of
// a pair alternating, so that what slows the machine down slows both. It
// reports each side's median time per call over the blocks and the median
// of the pairs' differences (diff-ns/call: B4's "floor + x"), which the
// noise of one side's minimum or median does not blur.
//
// "timeout-alone" is the timeout policy by itself against the floor;
// "without-timeout" the chain's three other policies against a bare call
// of the no-op; "same" runs the floor on both sides: its difference is the
// method's own (near 0).
func BenchmarkChainPaired(b *testing.B) {
	ctx := context.Background()
	floor := func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = c
		cancel()
	}
	b.Run("timeout", func(b *testing.B) {
		rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
		bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
		to, _ := timeout.New(time.Second)
		chain := resilience.NewChain(rt, newMeshless(b), bh, to)
		benchHotPaired(b, floor, func() { _ = chain.Execute(ctx, noop) })
	})
	b.Run("timeout-alone", func(b *testing.B) {
		to, _ := timeout.New(time.Second)
		benchHotPaired(b, floor, func() { _ = to.Execute(ctx, noop) })
	})
	b.Run("without-timeout", func(b *testing.B) {
		rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
		bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
		chain := resilience.NewChain(rt, newMeshless(b), bh)
		benchHotPaired(b, func() { _ = noop(ctx) }, func() { _ = chain.Execute(ctx, noop) })
	})
	b.Run("same", func(b *testing.B) {
		benchHotPaired(b, floor, floor)
	})
}

// BenchmarkCallDepthPaired is the floor (a context.WithTimeout and its
// cancel around the no-op) called from n more frames (b) than from one (a),
// beside the no-op alone at the same depths: what a frame between a caller
// and its call costs once the call has been deep in the runtime (a timer's
// heap), against what it costs around a call that was not
// (docs/benchmarks/b4-parts.md, the depth run).
func BenchmarkCallDepthPaired(b *testing.B) {
	ctx := context.Background()
	floor := func(ctx context.Context) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = noop(c)
		cancel()
	}
	bare := func(ctx context.Context) { _ = noop(ctx) }
	for _, n := range []int{4, 8, 12} {
		b.Run(fmt.Sprintf("floor-%d", n), func(b *testing.B) {
			benchHotPaired(b, func() { atDepth(ctx, 0, floor) }, func() { atDepth(ctx, n, floor) })
		})
		b.Run(fmt.Sprintf("no-op-%d", n), func(b *testing.B) {
			benchHotPaired(b, func() { atDepth(ctx, 0, bare) }, func() { atDepth(ctx, n, bare) })
		})
	}
}

// atDepth calls f from n more frames of its own.
//
//go:noinline
func atDepth(ctx context.Context, n int, f func(context.Context)) {
	if n == 0 {
		f(ctx)
		return
	}
	atDepth(ctx, n-1, f)
}

// BenchmarkChainPartsPaired takes B4 apart: each of its policies alone in
// a resilience.Chain around the no-op, in pairs with a bare call of the
// no-op (the timeout with the floor), then the breaker and the timeout
// together (the breaker's reading of the start is the timeout's), then all
// four; "empty" is a chain of none. docs/benchmarks/chain-grpc.md, the
// chain parts run.
func BenchmarkChainPartsPaired(b *testing.B) {
	ctx := context.Background()
	bare := func() { _ = noop(ctx) }
	floor := func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = noop(c)
		cancel()
	}
	rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
	bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
	cb := newMeshless(b)
	to, _ := timeout.New(time.Second)
	for _, v := range []struct {
		name string
		ps   []resilience.Policy
		base func()
	}{
		{"empty", nil, bare},
		{"retry", []resilience.Policy{rt}, bare},
		{"breaker", []resilience.Policy{cb}, bare},
		{"bulkhead", []resilience.Policy{bh}, bare},
		{"timeout", []resilience.Policy{to}, floor},
		{"breaker+timeout", []resilience.Policy{cb, to}, floor},
		{"all", []resilience.Policy{rt, cb, bh, to}, floor},
	} {
		b.Run(v.name, func(b *testing.B) {
			chain := resilience.NewChain(v.ps...)
			benchHotPaired(b, v.base, func() { _ = chain.Execute(ctx, noop) })
		})
	}
}

// BenchmarkChainIdealPaired is what B4's work costs with nothing around
// it: a breaker's state load and its two clock reads (the start, from which
// the deadline is derived, and the end), a bulkhead permit taken and given
// back by compare-and-swap, one context.WithDeadline and the classification
// of the result, written inline in one function (b), in pairs with the
// floor (a). "ideal-no-end-read" leaves out the end's read; "same" runs the
// floor on both sides (docs/benchmarks/b4-parts.md, the registers run).
func BenchmarkChainIdealPaired(b *testing.B) {
	ctx := context.Background()
	floor := func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = noop(c)
		cancel()
	}
	type period struct{ state int }
	var cur atomic.Pointer[period]
	cur.Store(&period{})
	var permits struct {
		w atomic.Uint64 // version<<32 | free, as bulkhead's shards
		_ [120]byte
	}
	permits.w.Store(100)
	failures := 0
	ideal := func(end bool) func() {
		return func() {
			if p := cur.Load(); p.state != 0 {
				b.Fatal("open")
			}
			start := time.Now()
			for w := permits.w.Load(); ; w = permits.w.Load() {
				if w&(1<<32-1) == 0 {
					b.Fatal("full")
				}
				if permits.w.CompareAndSwap(w, w+(1<<32-1)) {
					break
				}
			}
			c, cancel := context.WithDeadline(ctx, start.Add(time.Second))
			err := noop(c)
			cancel()
			for w := permits.w.Load(); !permits.w.CompareAndSwap(w, w+(1<<32+1)); w = permits.w.Load() {
			}
			var took time.Duration
			if end {
				took = time.Since(start)
			}
			if err != nil || took > time.Minute {
				failures++
			}
		}
	}
	b.Run("ideal", func(b *testing.B) { benchHotPaired(b, floor, ideal(true)) })
	b.Run("ideal-no-end-read", func(b *testing.B) { benchHotPaired(b, floor, ideal(false)) })
	b.Run("same", func(b *testing.B) { benchHotPaired(b, floor, floor) })
	if failures != 0 {
		b.Fatalf("%d calls failed or were slow", failures)
	}
}

// BenchmarkGRPCInterceptorOnlyPaired is B5' in pairs (see
// BenchmarkChainPaired): the floor, one context.WithTimeout and its cancel
// (a), against the interceptor alone on defaults around a no-op invoker (b);
// and, with timeouts off, a bare call of the no-op invoker (a) against the
// interceptor (b). "no-timeouts-floor-inside" is the floor (a) against the
// interceptor with timeouts off around an invoker that makes the floor's
// deadline itself (b): what the engine's steps other than its deadline cost
// beside a deadline, to set against "defaults" (docs/benchmarks/b5-pairs.md,
// the GC run).
func BenchmarkGRPCInterceptorOnlyPaired(b *testing.B) {
	ctx := context.Background()
	const method = "/grpc.testing.TestService/UnaryCall"
	noopInvoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	floor := func() {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_ = noopInvoker(c, method, nil, nil, nil)
		cancel()
	}
	noTimeouts := func(b *testing.B) grpc.UnaryClientInterceptor {
		return chainOf(b, "defaults: { timeout: { enabled: false } }").UnaryClientInterceptor()
	}
	b.Run("defaults", func(b *testing.B) {
		icpt := newChain(b).UnaryClientInterceptor()
		benchHotPaired(b, floor, func() { _ = icpt(ctx, method, nil, nil, nil, noopInvoker) })
	})
	b.Run("no-timeouts", func(b *testing.B) {
		icpt := noTimeouts(b)
		benchHotPaired(b, func() { _ = noopInvoker(ctx, method, nil, nil, nil) }, func() { _ = icpt(ctx, method, nil, nil, nil, noopInvoker) })
	})
	b.Run("no-timeouts-floor-inside", func(b *testing.B) {
		icpt := noTimeouts(b)
		floorInvoker := func(ctx context.Context, method string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			c, cancel := context.WithTimeout(ctx, time.Second)
			err := noopInvoker(c, method, nil, nil, nil)
			cancel()
			return err
		}
		benchHotPaired(b, floor, func() { _ = icpt(ctx, method, nil, nil, nil, floorInvoker) })
	})
}

// BenchmarkGRPCInterceptorPartsPaired takes B5' apart, timeouts off: a bare
// call of the no-op invoker (a) against the interceptor (b) with the retry
// alone ("retry": the engine's own steps and its two clock reads; a method
// with a retry is plain, see internal/engine's runPlain), with the retry and
// one of the breaker, bulkhead and throttler, and with all four ("all", the
// defaults without timeouts). docs/benchmarks/b5-pairs.md, the GC run.
func BenchmarkGRPCInterceptorPartsPaired(b *testing.B) {
	ctx := context.Background()
	const method = "/grpc.testing.TestService/UnaryCall"
	noop := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	const (
		noBreaker   = "circuitBreaker: { enabled: false }, "
		noBulkhead  = "bulkhead: { enabled: false }, "
		noThrottler = "adaptiveThrottling: { enabled: false }, "
	)
	for _, v := range []struct{ name, off string }{
		{"retry", noBreaker + noBulkhead + noThrottler},
		{"retry+breaker", noBulkhead + noThrottler},
		{"retry+bulkhead", noBreaker + noThrottler},
		{"retry+throttler", noBreaker + noBulkhead},
		{"all", ""},
	} {
		b.Run(v.name, func(b *testing.B) {
			icpt := chainOf(b, "defaults: { "+v.off+"timeout: { enabled: false } }").UnaryClientInterceptor()
			benchHotPaired(b, func() { _ = noop(ctx, method, nil, nil, nil) }, func() { _ = icpt(ctx, method, nil, nil, nil, noop) })
		})
	}
}

// pairedBlock is how many calls a side makes in a row between two clock
// reads: enough that the reads (tens of ns) are a small part of a block.
const pairedBlock = 32

// benchHotPaired measures fb against fa in pairs of timed blocks.
func benchHotPaired(b *testing.B, fa, fb func()) {
	block := func(f func()) time.Duration {
		start := time.Now()
		for range pairedBlock {
			f()
		}
		return time.Since(start)
	}
	block(fa)
	block(fb)
	var as, bs, diffs []float64
	i := 0
	for b.Loop() {
		var da, db time.Duration
		if i%2 == 0 {
			da = block(fa)
			db = block(fb)
		} else {
			db = block(fb)
			da = block(fa)
		}
		i++
		as = append(as, float64(da)/pairedBlock)
		bs = append(bs, float64(db)/pairedBlock)
		diffs = append(diffs, float64(db-da)/pairedBlock)
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(as), "a-ns/call")
	b.ReportMetric(median(bs), "b-ns/call")
	b.ReportMetric(median(diffs), "diff-ns/call")
}
