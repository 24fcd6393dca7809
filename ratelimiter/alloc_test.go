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
		edit func(*ratelimiter.Config)
	}{
		{name: "bursty"},
		{name: "bursty with an observer", opts: []ratelimiter.Option{ratelimiter.WithObserver(nopObserver)}},
		{name: "bursty with a timeoutDuration", edit: func(c *ratelimiter.Config) { c.TimeoutDuration = time.Second }},
		{name: "smooth", edit: func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitRefreshPeriod = time.Nanosecond * 1e9
		}},
	} {
		t.Run(o.name, func(t *testing.T) {
			// A limit that the runs never reach; a smooth one of 1e9 a second
			// (one a nanosecond) that the calls do not outpace.
			l := mustNew(t, append([]ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
				c.LimitForPeriod = 1_000_000_000
				if o.edit != nil {
					o.edit(c)
				}
			}))}, o.opts...)...)
			chain := resilience.NewChain(l)
			for _, tt := range []struct {
				name string
				run  func()
			}{
				{name: "Enter and Exit", run: func() {
					_, p, err := l.Enter(ctx)
					if err != nil {
						t.Fatal(err)
					}
					_ = l.Exit(ctx, p, resilience.Result{})
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
	for _, o := range []struct {
		opts []ratelimiter.Option
		mode ratelimiter.Mode
	}{
		{},
		{opts: []ratelimiter.Option{ratelimiter.WithObserver(nopObserver)}},
		{mode: ratelimiter.Smooth},
	} {
		l := mustNew(t, append(o.opts, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = o.mode
			c.LimitForPeriod = 1
			c.LimitRefreshPeriod = time.Hour
		})))...)
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
