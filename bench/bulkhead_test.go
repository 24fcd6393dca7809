package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/fallback"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/failsafepolicy"
	"github.com/meshless/meshless/resilience"
)

// The bulkheads are configured alike: a fixed limit of 100 calls without a
// wait, or failsafe-go's default adaptive limits (1, 200, initially 20).
// meshless uses the same failsafe-go types through their permit APIs; the
// figures show what meshless adds to them, and what failsafe-go's executor
// adds.

func newMeshlessBulkhead(b *testing.B, opts ...bulkhead.Option) *bulkhead.Bulkhead {
	bh, err := bulkhead.New(append(opts, bulkhead.WithName("bench"))...)
	if err != nil {
		b.Fatal(err)
	}
	return bh
}

var meshlessAdaptive = bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
	c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MinLimit: 1, MaxLimit: 200, InitialLimit: 20}
}))

func newFailsafeAdaptive() adaptivelimiter.AdaptiveLimiter[any] {
	return adaptivelimiter.NewBuilder[any]().WithLimits(1, 200, 20).Build()
}

// BenchmarkBulkheadFixed: one call through a fixed bulkhead with room.
func BenchmarkBulkheadFixed(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless-acquire-release", func(b *testing.B) {
		bh := newMeshlessBulkhead(b)
		b.ReportAllocs()
		for b.Loop() {
			_, pm, err := bh.Enter(ctx)
			if err == nil {
				_ = bh.Exit(ctx, pm, resilience.Result{})
			}
		}
	})
	b.Run("meshless-execute", func(b *testing.B) {
		bh := newMeshlessBulkhead(b)
		b.ReportAllocs()
		for b.Loop() {
			_ = bh.Execute(ctx, noop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		bh := fsbulkhead.New[any](100)
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](bh).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		bh := fsbulkhead.New[any](100)
		b.ReportAllocs()
		for b.Loop() {
			if bh.TryAcquirePermit() {
				bh.ReleasePermit()
			}
		}
	})
}

// BenchmarkBulkheadFixedParallel: the same on every core.
func BenchmarkBulkheadFixedParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless-execute", func(b *testing.B) {
		bh := newMeshlessBulkhead(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = bh.Execute(ctx, noop)
			}
		})
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		bh := fsbulkhead.New[any](100)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if bh.TryAcquirePermit() {
					bh.ReleasePermit()
				}
			}
		})
	})
}

// BenchmarkBulkheadFull: the rejection of a call that finds no permit.
func BenchmarkBulkheadFull(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		bh := newMeshlessBulkhead(b, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
		_, held, _ := bh.Enter(ctx)
		defer bh.Exit(ctx, held, resilience.Result{})
		b.ReportAllocs()
		for b.Loop() {
			_ = bh.Execute(ctx, noop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		bh := fsbulkhead.New[any](1)
		bh.TryAcquirePermit()
		defer bh.ReleasePermit()
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](bh).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		bh := fsbulkhead.New[any](1)
		bh.TryAcquirePermit()
		defer bh.ReleasePermit()
		b.ReportAllocs()
		for b.Loop() {
			if bh.TryAcquirePermit() {
				b.Fatal("admitted")
			}
		}
	})
}

// BenchmarkBulkheadAtLimitParallel: a bulkhead of one permit called from
// every core at once, so that calls are admitted and refused in turn. Around
// a no-op the permit comes and goes as often as calls are refused (the case
// where a full bulkhead's mark, bulkhead/slots.go, is written and taken away
// most often); "hold-1us" holds an admitted call's permit for about a
// microsecond (spinN steps), so that most calls are refused, as under
// overload.
func BenchmarkBulkheadAtLimitParallel(b *testing.B) {
	for _, hold := range []bool{false, true} {
		suffix := ""
		if hold {
			suffix = "-hold-1us"
		}
		b.Run("meshless-execute"+suffix, atLimitMeshless(hold))
		b.Run("failsafe-direct"+suffix, atLimitFailsafe(hold))
	}
}

// atLimitMeshless is BenchmarkBulkheadAtLimitParallel's meshless side.
func atLimitMeshless(hold bool) func(b *testing.B) {
	return func(b *testing.B) {
		ctx := context.Background()
		bh := newMeshlessBulkhead(b, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
		var admitted atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var x uint64
			var n int64
			call := func(context.Context) error {
				n++
				if hold {
					x = spinFrom(x)
				}
				return nil
			}
			for pb.Next() {
				_ = bh.Execute(ctx, call)
			}
			admitted.Add(n)
		})
		reportAdmissions(b, admitted.Load())
	}
}

// atLimitFailsafe is BenchmarkBulkheadAtLimitParallel's failsafe-go side.
func atLimitFailsafe(hold bool) func(b *testing.B) {
	return func(b *testing.B) {
		bh := fsbulkhead.New[any](1)
		var admitted atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var x uint64
			var n int64
			for pb.Next() {
				if bh.TryAcquirePermit() {
					n++
					if hold {
						x = spinFrom(x)
					}
					bh.ReleasePermit()
				}
			}
			admitted.Add(n)
		})
		reportAdmissions(b, admitted.Load())
	}
}

// reportAdmissions reports, beside ns/op, the share of the b.N calls a
// bulkhead at its limit admitted and refused, and the wall time per
// admitted call: a refusal costs less than an admission, so ns/op alone
// favours the side that refuses more. Each goroutine counts its admissions
// in a local and adds them once, so that the count costs both sides the
// same increment per admitted call and shares no cache line in the loop.
func reportAdmissions(b *testing.B, admitted int64) {
	n := float64(b.N)
	b.ReportMetric(float64(admitted)/n, "admitted/op")
	b.ReportMetric(float64(int64(b.N)-admitted)/n, "rejected/op")
	if admitted > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(admitted), "ns/admitted")
	}
}

// spinFrom is spin's work on a goroutine's own state: spinN steps of the
// generator from x.
func spinFrom(x uint64) uint64 {
	for range spinN {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// BenchmarkBulkheadAdaptive: one call through an adaptive limiter with room.
func BenchmarkBulkheadAdaptive(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless-acquire-release", func(b *testing.B) {
		bh := newMeshlessBulkhead(b, meshlessAdaptive)
		b.ReportAllocs()
		for b.Loop() {
			_, pm, err := bh.Enter(ctx)
			if err == nil {
				_ = bh.Exit(ctx, pm, resilience.Result{})
			}
		}
	})
	b.Run("meshless-execute", func(b *testing.B) {
		bh := newMeshlessBulkhead(b, meshlessAdaptive)
		b.ReportAllocs()
		for b.Loop() {
			_ = bh.Execute(ctx, noop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		l := newFailsafeAdaptive()
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](l).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		l := newFailsafeAdaptive()
		b.ReportAllocs()
		for b.Loop() {
			if p, ok := l.TryAcquirePermit(); ok {
				p.Record()
			}
		}
	})
}

// BenchmarkBulkheadFailsafeAdapter: what failsafepolicy.New costs, a
// failsafe-go fallback around a no-op inside a resilience.Chain, against the
// same fallback through failsafe-go alone.
func BenchmarkBulkheadFailsafeAdapter(b *testing.B) {
	ctx := context.Background()
	fb := fallback.NewWithResult[any](nil)
	b.Run("meshless-chain", func(b *testing.B) {
		chain := resilience.NewChain(failsafepolicy.New(fb))
		b.ReportAllocs()
		for b.Loop() {
			_ = chain.Execute(ctx, noop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](fb).WithContext(ctx).Run(fsNoop)
		}
	})
}
