package circuitbreaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A recorder that panics at a call's event still has the call counted: a
// half-open probe's place is given back and its result decides, so the
// breaker does not stay half-open for want of it; a closed breaker's
// window counts the call.
func TestAnObserverThatPanicsAtACallStillCountsIt(t *testing.T) {
	var panicking atomic.Bool
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type == resilience.EventCall && panicking.Load() {
				panic("observer")
			}
		})
	})
	clk := resiliencetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(smallConf()), circuitbreaker.WithClock(clk), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	call := func(err error) (p any) {
		defer func() { p = recover() }()
		_ = cb.Execute(context.Background(), func(context.Context) error { return err })
		return nil
	}
	down := errors.New("down")
	// Closed: five failures, each event panicking, open the breaker.
	panicking.Store(true)
	for i := range 5 {
		if p := call(down); p != "observer" {
			t.Fatalf("call %d: panic %v, want the observer's", i, p)
		}
	}
	if s := cb.State(); s != circuitbreaker.StateOpen {
		t.Fatalf("after five failures whose events panicked: %v, want OPEN (%+v)", s, cb.Metrics())
	}
	clk.Advance(10 * time.Second)
	if s := cb.State(); s != circuitbreaker.StateHalfOpen {
		t.Fatalf("after the open wait: %v, want HALF_OPEN", s)
	}
	// Half-open, two probes: the first's event panics, the second's does
	// not; both succeed, so the breaker closes.
	if p := call(nil); p != "observer" {
		t.Fatalf("first probe: panic %v, want the observer's", p)
	}
	panicking.Store(false)
	if p := call(nil); p != nil {
		t.Fatalf("second probe panicked: %v", p)
	}
	if s := cb.State(); s != circuitbreaker.StateClosed {
		t.Fatalf("after two probes that succeeded, the first's event panicking: %v, want CLOSED (%+v)", s, cb.Metrics())
	}
}
