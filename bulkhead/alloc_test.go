package bulkhead_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// nopObserver attaches a recorder that does nothing, so that the tests
// measure the cost of sending events, not of keeping them.
var nopObserver = resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
	return resilience.RecorderFunc(func(context.Context, resilience.Event) {})
})

func TestFixedBulkheadDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, o := range []struct {
		name string
		opts []bulkhead.Option
	}{
		{name: "no observer"},
		{name: "with an observer", opts: []bulkhead.Option{bulkhead.WithObserver(nopObserver)}},
	} {
		t.Run(o.name, func(t *testing.T) {
			b := mustNew(t, append(o.opts, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))...)
			chain := resilience.NewChain(b)
			for _, tt := range []struct {
				name string
				run  func()
			}{
				{name: "Enter and Exit", run: func() {
					_, p, err := b.Enter(ctx)
					if err != nil {
						t.Fatal(err)
					}
					_ = b.Exit(ctx, p, resilience.Result{})
				}},
				{name: "Enter and Exit(err)", run: func() {
					_, p, _ := b.Enter(ctx)
					_ = b.Exit(ctx, p, resilience.Result{Err: errUnavailable, Outcome: resilience.Failure})
				}},
				{name: "Execute", run: func() { _ = b.Execute(ctx, noop) }},
				{name: "chain Execute", run: func() { _ = chain.Execute(ctx, noop) }},
			} {
				if n := testing.AllocsPerRun(1000, tt.run); n != 0 {
					t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
				}
			}
			held := hold(t, b, 1)
			if n := testing.AllocsPerRun(1000, func() {
				if err := b.Execute(ctx, noop); !errors.Is(err, bulkhead.ErrFull) {
					t.Fatal("not rejected")
				}
			}); n != 0 {
				t.Errorf("immediate rejection: %v allocations per call, want 0", n)
			}
			releaseAll(held)
		})
	}
}

// failsafe-go's adaptive limiter returns its permit as an interface holding
// a pointer, allocated per call; the figure is logged, not enforced.
func TestAdaptiveBulkheadAllocations(t *testing.T) {
	ctx := context.Background()
	b := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
		c.Adaptive = true
		c.AdaptiveLimits = bulkhead.Adaptive{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
	})))
	acq := testing.AllocsPerRun(1000, func() {
		_, p, _ := b.Enter(ctx)
		_ = b.Exit(ctx, p, resilience.Result{})
	})
	exec := testing.AllocsPerRun(1000, func() { _ = b.Execute(ctx, noop) })
	t.Logf("adaptive: Enter+Exit %v allocs/op, Execute %v allocs/op", acq, exec)
	held := hold(t, b, 1)
	if n := testing.AllocsPerRun(1000, func() { _ = b.Execute(ctx, noop) }); n != 0 {
		t.Errorf("adaptive immediate rejection: %v allocations per call, want 0 (the shared error)", n)
	}
	releaseAll(held)
}
