package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	fsretry "github.com/failsafe-go/failsafe-go/retrypolicy"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// B4: retry + breaker + bulkhead + timeout around a no-op, in each
// library's own order of composition (outer to inner), same settings.
func BenchmarkChain(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
		cb := newMeshless(b)
		bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
		to, _ := timeout.New(time.Second)
		chain := resilience.NewChain(rt, cb, bh, to)
		b.ReportAllocs()
		for b.Loop() {
			_ = chain.Execute(ctx, noop)
		}
	})
	b.Run("meshless-without-timeout", func(b *testing.B) {
		// The three policies that allocate nothing; the timeout's context is
		// the only allocation of the full chain.
		rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
		cb := newMeshless(b)
		bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
		chain := resilience.NewChain(rt, cb, bh)
		b.ReportAllocs()
		for b.Loop() {
			_ = chain.Execute(ctx, noop)
		}
	})
	b.Run("meshless-under-caller-deadline", func(b *testing.B) {
		// A caller whose deadline is earlier than the attempt timeout: the
		// timeout derives nothing.
		rt, _ := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })))
		cb := newMeshless(b)
		bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 100 })))
		to, _ := timeout.New(time.Hour)
		chain := resilience.NewChain(rt, cb, bh, to)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			_ = chain.Execute(dctx, noop)
		}
	})
	b.Run("failsafe", func(b *testing.B) {
		rp := fsretry.NewBuilder[any]().WithMaxAttempts(3).Build()
		cb := newFailsafe()
		bh := fsbulkhead.New[any](100)
		to := fstimeout.New[any](time.Second)
		exec := failsafe.With[any](rp, cb, bh, to)
		b.ReportAllocs()
		for b.Loop() {
			_ = exec.Run(fsNoop)
		}
	})
	b.Run("failsafe-without-timeout", func(b *testing.B) {
		rp := fsretry.NewBuilder[any]().WithMaxAttempts(3).Build()
		cb := newFailsafe()
		bh := fsbulkhead.New[any](100)
		exec := failsafe.With[any](rp, cb, bh)
		b.ReportAllocs()
		for b.Loop() {
			_ = exec.Run(fsNoop)
		}
	})
	b.Run("stdlib-context-WithDeadline", func(b *testing.B) {
		// What the timeout's context costs by itself.
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			_ = c
			cancel()
		}
	})
	b.Run("failsafe-with-context", func(b *testing.B) {
		// As a gRPC interceptor calls it: the executor with the call's context.
		rp := fsretry.NewBuilder[any]().WithMaxAttempts(3).Build()
		cb := newFailsafe()
		bh := fsbulkhead.New[any](100)
		to := fstimeout.New[any](time.Second)
		exec := failsafe.With[any](rp, cb, bh, to)
		b.ReportAllocs()
		for b.Loop() {
			_ = exec.WithContext(ctx).Run(fsNoop)
		}
	})
	_ = fscb.ErrOpen
	_ = circuitbreaker.ErrOpen
}
