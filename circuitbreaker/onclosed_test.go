package circuitbreaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// The engine's word when a breaker closes (it replays the key's dead
// letters): every move to CLOSED, by probes or by Reset, and nothing
// else; no observer needed.
func TestOnClosedHearsEveryClose(t *testing.T) {
	clk := resiliencetest.NewClock(time.Unix(0, 0))
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 2, 2
	cfg.WaitDurationInOpenState = time.Second
	cfg.PermittedNumberOfCallsInHalfOpenState = 1
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	closes := 0
	breakerhooks.OnClosed(cb, func() { closes++ })
	fail := func(context.Context) error { return errors.New("down") }
	ok := func(context.Context) error { return nil }
	for range 2 {
		_ = cb.Execute(t.Context(), fail) // opens
	}
	if closes != 0 || cb.State() != circuitbreaker.StateOpen {
		t.Fatalf("%v, %d closes; want OPEN, none", cb.State(), closes)
	}
	clk.Advance(time.Second)
	if err := cb.Execute(t.Context(), ok); err != nil || cb.State() != circuitbreaker.StateClosed || closes != 1 {
		t.Fatalf("the probe: %v, %v, %d closes; want CLOSED, 1", err, cb.State(), closes)
	}
	cb.ForceOpen()
	if closes != 1 {
		t.Fatalf("ForceOpen told a close")
	}
	cb.Reset()
	if closes != 2 {
		t.Fatalf("%d closes after Reset, want 2", closes)
	}
}
