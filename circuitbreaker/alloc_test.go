package circuitbreaker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

func TestClosedAndOpenPathsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	cb, err := circuitbreaker.New() // the real clock: the production path
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		run  func()
	}{
		{name: "Execute closed", run: func() { _ = cb.Execute(ctx, noop) }},
		{name: "Enter and Exit closed", run: func() {
			_, p, err := cb.Enter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = cb.Exit(ctx, p, resilience.Result{Outcome: resilience.Success})
		}},
	} {
		if n := testing.AllocsPerRun(1000, tt.run); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", tt.name, n)
		}
	}
	// Recording a failure takes the slow path; METRICS_ONLY never opens, so
	// every run measures it.
	mo, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeMetricsOnly })))
	if n := testing.AllocsPerRun(1000, func() { _ = mo.Execute(ctx, func(context.Context) error { return errFailure }) }); n != 0 {
		t.Errorf("Execute recording a failure: %v allocations per call, want 0", n)
	}
	cb.ForceOpen()
	if n := testing.AllocsPerRun(1000, func() {
		if err := cb.Execute(ctx, noop); !errors.Is(err, circuitbreaker.ErrOpen) {
			t.Fatal("not rejected")
		}
	}); n != 0 {
		t.Errorf("open rejection: %v allocations per call, want 0", n)
	}
	tb, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowType = circuitbreaker.TimeBased
		c.SlidingWindowSize = 60
	})))
	if n := testing.AllocsPerRun(1000, func() { _ = tb.Execute(ctx, noop) }); n != 0 {
		t.Errorf("TIME_BASED Execute closed: %v allocations per call, want 0", n)
	}
}
