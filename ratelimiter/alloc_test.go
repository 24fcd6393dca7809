package ratelimiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// nopObserver attaches a recorder that does nothing, so that the tests
// measure the cost of sending events, not of keeping them.
var nopObserver = resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
	return resilience.RecorderFunc(func(context.Context, resilience.Event) {})
})

func TestPermittedPathDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, o := range []struct {
		name string
		opts []ratelimiter.Option
	}{
		{name: "bursty"},
		{name: "bursty with an observer", opts: []ratelimiter.Option{ratelimiter.WithObserver(nopObserver)}},
		{name: "bursty with a timeoutDuration", opts: []ratelimiter.Option{ratelimiter.WithTimeoutDuration(time.Second)}},
		{name: "smooth", opts: []ratelimiter.Option{ratelimiter.WithMode(ratelimiter.Smooth), ratelimiter.WithLimitRefreshPeriod(time.Nanosecond * 1e9)}},
	} {
		t.Run(o.name, func(t *testing.T) {
			// A limit that the runs never reach; a smooth one of 1e9 a second
			// (one a nanosecond) that the calls do not outpace.
			l := mustNew(t, append([]ratelimiter.Option{ratelimiter.WithLimitForPeriod(1_000_000_000)}, o.opts...)...)
			chain := resilience.NewChain(l)
			for _, tt := range []struct {
				name string
				run  func()
			}{
				{name: "Acquire and Done", run: func() {
					p, err := l.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					p.Done(nil)
				}},
				{name: "Acquire and Release", run: func() {
					p, _ := l.Acquire(ctx)
					p.Release()
				}},
				{name: "Execute", run: func() {
					if err := l.Execute(ctx, noop); err != nil {
						t.Fatal(err)
					}
				}},
				{name: "chain Execute", run: func() { _ = chain.Execute(ctx, noop) }},
			} {
				if n := testing.AllocsPerRun(1000, tt.run); n != 0 {
					t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
				}
			}
		})
	}
}

func TestImmediateRejectionDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, opts := range [][]ratelimiter.Option{
		nil,
		{ratelimiter.WithObserver(nopObserver)},
		{ratelimiter.WithMode(ratelimiter.Smooth)},
	} {
		l := mustNew(t, append(opts, ratelimiter.WithLimitForPeriod(1), ratelimiter.WithLimitRefreshPeriod(time.Hour))...)
		_ = l.Execute(ctx, noop)
		if n := testing.AllocsPerRun(1000, func() {
			if err := l.Execute(ctx, noop); !errors.Is(err, ratelimiter.ErrLimited) {
				t.Fatal("not rejected")
			}
		}); n != 0 {
			t.Errorf("immediate rejection: %v allocations per call, want 0", n)
		}
	}
}
