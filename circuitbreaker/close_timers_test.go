package circuitbreaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A probe still in flight when its breaker is closed (a reload that drops
// its key) fails: the breaker opens, and half-opens when its wait is over.
// There it stays: a closed breaker arms no half-open wait, which would
// open it again, and so on for the life of the process, no call ever
// coming (before, its timers never stopped, each move told its observer).
func TestAClosedBreakerStopsArmingItsTimers(t *testing.T) {
	clk := resiliencetest.NewClock(time.Unix(0, 0))
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 2, 2
	cfg.WaitDurationInOpenState = time.Second
	cfg.MaxWaitDurationInHalfOpenState = time.Second
	cfg.PermittedNumberOfCallsInHalfOpenState = 1
	obs := new(resiliencetest.Observer)
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(clk), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	failed := resilience.Result{Outcome: resilience.Failure}
	for range 2 {
		_, pm, err := cb.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = cb.Exit(context.Background(), pm, failed)
	}
	clk.Advance(time.Second)
	if s := cb.State(); s != circuitbreaker.StateHalfOpen {
		t.Fatalf("state %v, want HALF_OPEN", s)
	}
	_, probe, err := cb.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cb.Close()
	_ = cb.Exit(context.Background(), probe, failed) // the straggler: OPEN
	for range 10 {
		clk.Advance(time.Second)
	}
	if s := cb.State(); s != circuitbreaker.StateHalfOpen {
		t.Errorf("state %v, want HALF_OPEN", s)
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers armed by a closed breaker", n)
	}
	moves := 0
	for _, ev := range obs.Events() {
		if ev.Type == resilience.EventTransition {
			moves++
		}
	}
	if moves != 4 { // CLOSED→OPEN→HALF_OPEN, then the straggler's OPEN→HALF_OPEN
		t.Errorf("%d transitions, want 4", moves)
	}
}
