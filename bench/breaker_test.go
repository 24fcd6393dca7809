package bench

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/sony/gobreaker/v2"
)

// Every breaker is configured alike where the peer allows: a window of the
// last 100 calls, opening at 50 % failures after 20 calls, 30 s open.

var errUnavailable = errors.New("unavailable")

func newMeshless(b *testing.B) *circuitbreaker.Breaker {
	cb, err := circuitbreaker.New(
		circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowSize = 100
			c.MinimumNumberOfCalls = 20
			c.FailureRateThreshold = 50
			c.WaitDurationInOpenState = 30 * time.Second
		})), circuitbreaker.WithName("bench"),
	)
	if err != nil {
		b.Fatal(err)
	}
	return cb
}

func newGobreaker() *gobreaker.CircuitBreaker[any] {
	// gobreaker has no rate window in its default mode; its default trips
	// after 5 consecutive failures.
	return gobreaker.NewCircuitBreaker[any](gobreaker.Settings{Name: "bench", Timeout: 30 * time.Second})
}

func newFailsafe() fscb.CircuitBreaker[any] {
	return fscb.NewBuilder[any]().
		WithFailureThresholdRatio(50, 100).
		WithDelay(30 * time.Second).
		Build()
}

func noop(context.Context) error { return nil }
func gbNoop() (any, error)       { return nil, nil }
func fsNoop() error              { return nil }
func gbFail() (any, error)       { return nil, errUnavailable }
func fsFail() error              { return errUnavailable }
func fail(context.Context) error { return errUnavailable }

// B1: Execute around a no-op, closed.
func BenchmarkClosed(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		cb := newMeshless(b)
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	})
	b.Run("meshless-coarse-clock", func(b *testing.B) {
		cb, _ := circuitbreaker.New(circuitbreaker.WithClock(resilience.CoarseClock()))
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	})
	b.Run("meshless-two-step", func(b *testing.B) {
		cb := newMeshless(b)
		b.ReportAllocs()
		for b.Loop() {
			_, pm, err := cb.Enter(ctx)
			if err == nil {
				_ = cb.Exit(ctx, pm, resilience.Result{Outcome: resilience.Success})
			}
		}
	})
	b.Run("meshless-time-based", func(b *testing.B) {
		cb, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowType = circuitbreaker.TimeBased
			c.SlidingWindowSize = 60
		})))
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := newGobreaker()
		b.ReportAllocs()
		for b.Loop() {
			_, _ = cb.Execute(gbNoop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		cb := newFailsafe()
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](cb).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		cb := newFailsafe()
		b.ReportAllocs()
		for b.Loop() {
			if cb.TryAcquirePermit() {
				cb.RecordSuccess()
			}
		}
	})
}

// B2: the same under RunParallel on every core.
func BenchmarkClosedParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		cb := newMeshless(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = cb.Execute(ctx, noop)
			}
		})
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := newGobreaker()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = cb.Execute(gbNoop)
			}
		})
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		cb := newFailsafe()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if cb.TryAcquirePermit() {
					cb.RecordSuccess()
				}
			}
		})
	})
}

// B3: rejection while open (opened by failures, not forced).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	b.Run("meshless", func(b *testing.B) {
		cb := newMeshless(b)
		for range 20 {
			_ = cb.Execute(ctx, fail)
		}
		if cb.State() != circuitbreaker.StateOpen {
			b.Fatal("not open")
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := newGobreaker()
		for range 6 {
			_, _ = cb.Execute(gbFail)
		}
		if cb.State() != gobreaker.StateOpen {
			b.Fatal("not open")
		}
		b.ReportAllocs()
		for b.Loop() {
			_, _ = cb.Execute(gbNoop)
		}
	})
	b.Run("failsafe-executor", func(b *testing.B) {
		cb := newFailsafe()
		cb.Open()
		b.ReportAllocs()
		for b.Loop() {
			_ = failsafe.With[any](cb).Run(fsNoop)
		}
	})
	b.Run("failsafe-direct", func(b *testing.B) {
		cb := newFailsafe()
		cb.Open()
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.TryAcquirePermit()
		}
	})
}

// B6: memory. B/op of New is the memory one breaker holds.
func BenchmarkMemory(b *testing.B) {
	var sink any
	b.Run("meshless-time-based-60s", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink, _ = circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
				c.SlidingWindowType = circuitbreaker.TimeBased
				c.SlidingWindowSize = 60
			})))
		}
	})
	b.Run("meshless-count-based-100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink, _ = circuitbreaker.New()
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = newGobreaker()
		}
	})
	b.Run("meshless-registry-10000", func(b *testing.B) {
		// 10,000 keyed breakers (default configuration) in a map, as grpcmw
		// keeps them; B/breaker is B/op divided by the keys.
		keys := make([]string, 10000)
		for i := range keys {
			keys[i] = "svc.Service" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		for b.Loop() {
			reg := make(map[string]*circuitbreaker.Breaker, len(keys))
			for _, k := range keys {
				cb, err := circuitbreaker.New(circuitbreaker.WithName(k))
				if err != nil {
					b.Fatal(err)
				}
				reg[k] = cb
			}
			sink = reg
		}
	})
	_ = sink
}
