package circuitbreaker

import (
	"context"
	"testing"
)

func noop(context.Context) error { return nil }

func BenchmarkExecuteClosed(b *testing.B) {
	cb, _ := New()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = cb.Execute(ctx, noop)
	}
}

func BenchmarkExecuteClosedParallel(b *testing.B) {
	cb, _ := New()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = cb.Execute(ctx, noop)
		}
	})
}

func BenchmarkExecuteOpen(b *testing.B) {
	cb, _ := New()
	cb.ForceOpen()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = cb.Execute(ctx, noop)
	}
}

func BenchmarkExecuteClosedTimeBased(b *testing.B) {
	cb, _ := New(WithConfig(breakerConf(func(c *Config) {
		c.SlidingWindowType = TimeBased
		c.SlidingWindowSize = 60
	})))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = cb.Execute(ctx, noop)
	}
}
