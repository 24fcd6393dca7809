package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsratelimiter "github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// B12 for the rate limiter: the permitted path of one call, with a limit
// that the benchmark never reaches (a bursty limit of MaxInt32 calls a
// second; a smooth one of a billion, one a nanosecond, which the calls do not
// outpace). meshless uses the same failsafe-go type through its permit API;
// the figures show what meshless adds to TryAcquirePermit, and what
// failsafe-go's executor adds.

const rlLimit = math.MaxInt32

func newMeshlessLimiter(b *testing.B, opts ...ratelimiter.Option) *ratelimiter.Limiter {
	l, err := ratelimiter.New(append([]ratelimiter.Option{
		ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = rlLimit
			c.LimitRefreshPeriod = time.Second
		})),
	}, append(opts, ratelimiter.WithName("bench"))...)...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkRateLimiterBursty: one permitted call through a bursty limiter.
func BenchmarkRateLimiterBursty(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless-acquire-done", func(b *testing.B) {
		l := newMeshlessLimiter(b)
		b.ReportAllocs()
		for b.Loop() {
			_, pm, err := l.Enter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			_ = l.Exit(ctx, pm, resilience.Result{})
		}
	})
	b.Run("meshless-execute", func(b *testing.B) {
		l := newMeshlessLimiter(b)
		b.ReportAllocs()
		for b.Loop() {
			_ = l.Execute(ctx, noop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		rl := fsratelimiter.NewBursty[any](rlLimit, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](rl).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		rl := fsratelimiter.NewBursty[any](rlLimit, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			if !rl.TryAcquirePermit() {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkRateLimiterSmooth: the same through a smooth limiter.
func BenchmarkRateLimiterSmooth(b *testing.B) {
	ctx := context.Background()
	smooth := []ratelimiter.Option{
		ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitForPeriod = 1_000_000_000
		})),
	}
	b.Run("meshless-acquire-done", func(b *testing.B) {
		l := newMeshlessLimiter(b, smooth...)
		b.ReportAllocs()
		for b.Loop() {
			_, pm, err := l.Enter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			_ = l.Exit(ctx, pm, resilience.Result{})
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		rl := fsratelimiter.NewSmooth[any](1_000_000_000, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](rl).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		rl := fsratelimiter.NewSmooth[any](1_000_000_000, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			if !rl.TryAcquirePermit() {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkRateLimiterLimited: the rejection of a call that finds the
// period's permits spent.
func BenchmarkRateLimiterLimited(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		l, _ := ratelimiter.New(ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 1
			c.LimitRefreshPeriod = time.Hour
		})))
		_ = l.Execute(ctx, noop)
		b.ReportAllocs()
		for b.Loop() {
			if l.Execute(ctx, noop) == nil {
				b.Fatal("admitted")
			}
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		rl := fsratelimiter.NewBursty[any](1, time.Hour)
		rl.TryAcquirePermit()
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](rl).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		rl := fsratelimiter.NewBursty[any](1, time.Hour)
		rl.TryAcquirePermit()
		b.ReportAllocs()
		for b.Loop() {
			if rl.TryAcquirePermit() {
				b.Fatal("admitted")
			}
		}
	})
}
