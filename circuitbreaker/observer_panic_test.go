package circuitbreaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// A half-open probe whose report panics (its recorder panics at the call's
// event, here as a stream's first response commits it) and is then
// reported again — as meshless's engine gives back, as a panic's, the
// permits of an attempt whose commit panicked — is counted once, and the
// second report returns. It blocked for ever: a probe settled by the call
// itself was taken for one its context's end had settled, whose record the
// second report waited for, so the stream's lock stayed held.
func TestAProbeReportedAgainAfterItsRecorderPanickedIsCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		down := errors.New("down")
		for range 5 {
			_ = cb.Execute(context.Background(), func(context.Context) error { return down })
		}
		clk.Advance(10 * time.Second)
		ctx, pm, err := cb.Enter(context.Background())
		if err != nil || cb.State() != circuitbreaker.StateHalfOpen {
			t.Fatalf("Enter: %v in %v, want a half-open probe", err, cb.State())
		}
		panicking.Store(true)
		p := func() (p any) {
			defer func() { p = recover() }()
			cb.Commit(ctx, pm, resilience.Result{Outcome: resilience.Success})
			return nil
		}()
		if p != "observer" {
			t.Fatalf("Commit panicked with %v, want the observer's panic", p)
		}
		panicking.Store(false)
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			_ = cb.Exit(ctx, pm, resilience.Result{Err: resilience.ErrPanicked, Outcome: resilience.Failure})
		}()
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Fatal("the probe's second report blocked") // and the bubble's end reports it deadlocked
		}
		if m := cb.Metrics(); m.Calls != 1 || m.SuccessfulCalls != 1 {
			t.Errorf("half-open counts %+v, want the probe counted once, a success", m)
		}
	})
}
