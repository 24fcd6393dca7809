package circuitbreaker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// told is a policy that stands for a per-attempt timeout that tells
// (internal/timely): it runs the call and says so of its success.
var told = resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
	if err := next.Run(ctx); err != nil {
		return err
	}
	return timely.Err
})

// slowCall is a call that succeeds after 3 s: slow against the 2 s
// threshold, when the breaker measures it.
func slowCall(context.Context) error {
	time.Sleep(3 * time.Second)
	return nil
}

func timelyBreaker(t *testing.T, opts ...circuitbreaker.Option) *circuitbreaker.Breaker {
	t.Helper()
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize = 4
	cfg.MinimumNumberOfCalls = 4
	cfg.PermittedNumberOfCallsInHalfOpenState = 1
	cb, err := circuitbreaker.New(append([]circuitbreaker.Option{circuitbreaker.WithConfig(cfg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cb
}

// A breaker takes the word of the timeout inside it for a success in a
// clean window: it does not time the call, so a success the timeout
// vouches for is not slow (the timeout, at most half the threshold, would
// have fired). The same call without the word is timed, and slow: the
// test tells the two apart.
func TestABreakerTakesTheWordOfATimeoutInsideItInACleanWindow(t *testing.T) {
	for _, tt := range []struct {
		name     string
		inner    resilience.Policy
		wantSlow int64
	}{
		{"told", told, 0},
		{"not told", resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error { return next.Run(ctx) }), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cb := timelyBreaker(t)
				for range 4 { // a clean window: full, successes only
					if err := cb.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
						t.Fatal(err)
					}
				}
				err := resilience.NewChain(cb, tt.inner).Execute(t.Context(), slowCall)
				if err != nil {
					t.Fatalf("the chain returned %v, want nil", err)
				}
				if m := cb.Metrics(); m.SlowCalls != tt.wantSlow {
					t.Errorf("slow calls %d, want %d (%+v)", m.SlowCalls, tt.wantSlow, m)
				}
			})
		})
	}
}

// Wherever the word reaches the breaker — a window that is not clean, a
// half-open probe, an observer, another clock, a Execute of a chain's next —
// the breaker counts a success, times it as before, and returns nil: the
// word never reaches the caller.
func TestABreakerCountsATimeoutsWordAsASuccessAndNeverReturnsIt(t *testing.T) {
	failure := errors.New("boom")
	t.Run("a window with a failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cb := timelyBreaker(t)
			_ = cb.Execute(t.Context(), func(context.Context) error { return failure })
			chain := resilience.NewChain(cb, told)
			for range 3 {
				if err := chain.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
					t.Fatalf("the chain returned %v, want nil", err)
				}
			}
			if err := chain.Execute(t.Context(), slowCall); err != nil {
				t.Fatalf("the chain returned %v, want nil", err)
			}
			m := cb.Metrics()
			if m.Calls != 4 || m.FailedCalls != 0 || m.SuccessfulCalls != 4 || m.SlowCalls != 1 {
				t.Errorf("metrics %+v, want 4 successful calls (the failure went out), 1 slow: timed", m)
			}
		})
	})
	t.Run("a half-open probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cb := timelyBreaker(t)
			for range 4 {
				_ = cb.Execute(t.Context(), func(context.Context) error { return failure })
			}
			if s := cb.State(); s != circuitbreaker.StateOpen {
				t.Fatalf("state %v, want OPEN", s)
			}
			time.Sleep(circuitbreaker.DefaultConfig().WaitDurationInOpenState)
			synctest.Wait()
			if err := resilience.NewChain(cb, told).Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatalf("the probe returned %v, want nil", err)
			}
			if s := cb.State(); s != circuitbreaker.StateClosed {
				t.Errorf("state %v after a probe that succeeded, want CLOSED", s)
			}
		})
	})
	t.Run("an observer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			obs := new(resiliencetest.Observer)
			cb := timelyBreaker(t, circuitbreaker.WithObserver(obs))
			if err := resilience.NewChain(cb, told).Execute(t.Context(), slowCall); err != nil {
				t.Fatalf("the chain returned %v, want nil", err)
			}
			evs := obs.Events(resilience.EventCall)
			if len(evs) != 1 || evs[0].Outcome != resilience.Success || evs[0].Duration != 3*time.Second || !evs[0].Slow {
				t.Errorf("events %+v, want one slow success of 3s", evs)
			}
		})
	})
	t.Run("another clock", func(t *testing.T) {
		clk := resiliencetest.NewClock(time.Unix(1e9, 0))
		cb := timelyBreaker(t, circuitbreaker.WithClock(clk))
		err := resilience.NewChain(cb, told).Execute(t.Context(), func(context.Context) error {
			clk.Advance(3 * time.Second)
			return nil
		})
		if err != nil {
			t.Fatalf("the chain returned %v, want nil", err)
		}
		if m := cb.Metrics(); m.SuccessfulCalls != 1 || m.SlowCalls != 1 {
			t.Errorf("metrics %+v, want 1 slow success: timed on its clock", m)
		}
	})
	t.Run("Execute of a chain's next", func(t *testing.T) {
		cb := timelyBreaker(t)
		err := resilience.NewChain(resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
			return cb.Execute(ctx, next.Run)
		}), told).Execute(t.Context(), func(context.Context) error { return nil })
		if err != nil {
			t.Fatalf("Execute returned %v, want nil", err)
		}
		if m := cb.Metrics(); m.SuccessfulCalls != 1 {
			t.Errorf("metrics %+v, want 1 successful call", m)
		}
	})
}

// The longest timeout whose word the breaker takes is half its slow-call
// threshold, following Reconfigure; none with an observer or another clock.
func TestABreakersBoundIsHalfItsThreshold(t *testing.T) {
	bound := func(cb *circuitbreaker.Breaker) time.Duration {
		return time.Duration(timely.Of(cb).Bound.Load())
	}
	cb := timelyBreaker(t)
	if got := bound(cb); got != time.Second {
		t.Errorf("bound %v on the default threshold of 2s, want 1s", got)
	}
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 4, 4
	cfg.SlowCallDurationThreshold = 10 * time.Second
	if err := cb.Reconfigure(circuitbreaker.WithConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	if got := bound(cb); got != 5*time.Second {
		t.Errorf("bound %v after a threshold of 10s, want 5s", got)
	}
	if got := bound(timelyBreaker(t, circuitbreaker.WithObserver(new(resiliencetest.Observer)))); got != 0 {
		t.Errorf("bound %v with an observer, want 0", got)
	}
	if got := bound(timelyBreaker(t, circuitbreaker.WithClock(resiliencetest.NewClock(time.Unix(1e9, 0))))); got != 0 {
		t.Errorf("bound %v on another clock, want 0", got)
	}
}
