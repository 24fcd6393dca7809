package circuitbreaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A recorder that panics at a transition's event does not keep the
// breaker's own listeners from hearing it: the cluster's coordination
// (OnTransition, which tells the other instances that this one opened or
// closed) and the engine's OnClosed hook (which has the dead-letter queue
// replay at once). Both came after the recorder, so a panicking observer
// left the other instances of a cluster unaware that the breaker opened
// or closed, and the dead-letter queue waiting for its next round.
func TestAnObserverThatPanicsAtATransitionStillHasItTold(t *testing.T) {
	var panicking atomic.Bool
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type == resilience.EventTransition && panicking.Load() {
				panic("observer")
			}
		})
	})
	clk := resiliencetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(smallConf()), circuitbreaker.WithClock(clk), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	var told []circuitbreaker.State
	coord.Of(cb).Coordinate(&coord.Coordination{OnTransition: func(_ any, _, to, _ uint8) {
		told = append(told, circuitbreaker.State(to))
	}})
	var closed atomic.Int32
	breakerhooks.OnClosed(cb, func() { closed.Add(1) })
	call := func(err error) (p any) {
		defer func() { p = recover() }()
		_ = cb.Execute(context.Background(), func(context.Context) error { return err })
		return nil
	}
	panicking.Store(true)
	down := errors.New("down")
	for range 4 {
		if p := call(down); p != nil {
			t.Fatalf("a failure that opens nothing panicked: %v", p)
		}
	}
	if p := call(down); p != "observer" { // the fifth opens the breaker
		t.Fatalf("the failure that opened the breaker: panic %v, want the observer's", p)
	}
	if cb.State() != circuitbreaker.StateOpen || len(told) != 1 || told[0] != circuitbreaker.StateOpen {
		t.Fatalf("breaker %v, coordination told %v; want OPEN, told [OPEN]", cb.State(), told)
	}
	reset := func() (p any) { // OPEN -> CLOSED, by hand: the coordination is not told, OnClosed is
		defer func() { p = recover() }()
		cb.Reset()
		return nil
	}
	if p := reset(); p != "observer" {
		t.Fatalf("Reset: panic %v, want the observer's", p)
	}
	if cb.State() != circuitbreaker.StateClosed || closed.Load() != 1 {
		t.Errorf("breaker %v, OnClosed called %d times; want CLOSED, once", cb.State(), closed.Load())
	}
}
