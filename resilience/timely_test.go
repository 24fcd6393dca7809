package resilience_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// In a chain whose timeout tells the breaker outside it of a success within
// its deadline (NewChain's doc), every call ends for the caller as it did
// before: a success is nil, a failure is its error, in every state of the
// breaker; a success that came after the deadline fired is timed, and slow.
func TestAChainWhoseTimeoutTellsEndsEveryCallAsBefore(t *testing.T) {
	failure := errors.New("boom")
	ok := func(context.Context) error { return nil }
	fail := func(context.Context) error { return failure }
	slow := func(context.Context) error { time.Sleep(3 * time.Second); return nil } // past the 1 s timeout and the 2 s threshold
	for _, shape := range []struct {
		name  string
		chain func(cb *circuitbreaker.Breaker, to *timeout.Timeout) resilience.Chain
	}{
		{"breaker, timeout", func(cb *circuitbreaker.Breaker, to *timeout.Timeout) resilience.Chain {
			return resilience.NewChain(cb, to)
		}},
		{"retry, breaker, bulkhead, timeout", func(cb *circuitbreaker.Breaker, to *timeout.Timeout) resilience.Chain {
			rt, _ := retry.New()
			bh, _ := bulkhead.New()
			return resilience.NewChain(rt, cb, bh, to)
		}},
		{"breaker, rate limiter, timeout", func(cb *circuitbreaker.Breaker, to *timeout.Timeout) resilience.Chain {
			rl, _ := ratelimiter.New()
			return resilience.NewChain(cb, rl, to)
		}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := circuitbreaker.DefaultConfig()
				cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 4, 4
				cfg.PermittedNumberOfCallsInHalfOpenState = 1
				cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg))
				if err != nil {
					t.Fatal(err)
				}
				to, err := timeout.New(time.Second)
				if err != nil {
					t.Fatal(err)
				}
				chain := shape.chain(cb, to)
				run := func(step string, fn resilience.Func, want error) {
					t.Helper()
					got := chain.Execute(t.Context(), fn)
					if (want == nil && got != nil) || !errors.Is(got, want) {
						t.Fatalf("%s: the chain returned %v, want %v", step, got, want)
					}
				}
				for range 4 {
					run("closed, clean window", ok, nil)
				}
				run("closed, clean window, slow", slow, nil)
				if m := cb.Metrics(); m.SlowCalls != 1 {
					t.Fatalf("after a success past the deadline: %+v, want it timed and slow", m)
				}
				run("closed, a window with a slow call", ok, nil)
				for range 4 {
					_ = chain.Execute(t.Context(), fail) // a retry retries it: the breaker sees more
				}
				if s := cb.State(); s != circuitbreaker.StateOpen {
					t.Fatalf("state %v after failures, want OPEN", s)
				}
				run("open", ok, circuitbreaker.ErrOpen)
				time.Sleep(cfg.WaitDurationInOpenState)
				synctest.Wait()
				run("half-open probe", ok, nil)
				if s := cb.State(); s != circuitbreaker.StateClosed {
					t.Fatalf("state %v after a probe that succeeded, want CLOSED", s)
				}
				for _, mode := range []circuitbreaker.Mode{circuitbreaker.ModeMetricsOnly, circuitbreaker.ModeDisabled} {
					c := cfg
					c.Mode = mode
					if err := cb.Reconfigure(circuitbreaker.WithConfig(c)); err != nil {
						t.Fatal(err)
					}
					run(mode.String(), ok, nil)
					run(mode.String()+", a failure", fail, failure)
				}
			})
		})
	}
}

// A rate limiter that waits for a permit (timeoutDuration) between the
// breaker and the timeout makes the call wait before the timeout starts its
// deadline: the deadline then proves the call's own time short, not the time
// the breaker measures from its start, the wait included. A success that
// waited past the slow-call threshold was timed, and slow, before the
// timeout told the breaker of fast successes; it still is.
func TestASuccessThatWaitedForALimiterPastTheThresholdIsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := circuitbreaker.DefaultConfig() // a 2 s threshold
		cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 4, 4
		cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		for range 4 { // a clean window: full, successes only
			if err := cb.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		rc := ratelimiter.DefaultConfig()
		rc.LimitForPeriod, rc.LimitRefreshPeriod, rc.TimeoutDuration = 1, 3*time.Second, 5*time.Second
		rl, err := ratelimiter.New(ratelimiter.WithConfig(rc))
		if err != nil {
			t.Fatal(err)
		}
		to, err := timeout.New(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		chain := resilience.NewChain(cb, rl, to)
		ok := func(context.Context) error { return nil }
		if err := chain.Execute(t.Context(), ok); err != nil { // the period's permit
			t.Fatal(err)
		}
		start := time.Now()
		if err := chain.Execute(t.Context(), ok); err != nil { // waits for the next period's
			t.Fatal(err)
		}
		if waited := time.Since(start); waited <= cfg.SlowCallDurationThreshold {
			t.Fatalf("the call waited %v, want more than the %v threshold", waited, cfg.SlowCallDurationThreshold)
		}
		if m := cb.Metrics(); m.SlowCalls != 1 {
			t.Fatalf("after a success that waited past the threshold: %+v, want it slow", m)
		}
	})
}

// Calls through a chain whose timeout tells its breaker, racing Reconfigure
// of the breaker's mode and threshold (the bound with it), a failure now and
// then (a window that is not clean, a breaker that opens) and the ends of
// the open state: no call sees the timeout's word, each gets nil, its own
// failure or a rejection (the breaker's, the limiter's). Run with -race.
func TestATimeoutsWordNeverReachesACallerRacingReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := circuitbreaker.DefaultConfig()
		cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 4, 4
		cfg.PermittedNumberOfCallsInHalfOpenState = 1
		cfg.WaitDurationInOpenState = time.Millisecond
		cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		to, err := timeout.New(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bh, err := bulkhead.New()
		if err != nil {
			t.Fatal(err)
		}
		rl, err := ratelimiter.New()
		if err != nil {
			t.Fatal(err)
		}
		failure := errors.New("boom")
		chains := []resilience.Chain{resilience.NewChain(cb, to), resilience.NewChain(cb, rl, bh, to)}
		done := make(chan struct{})
		go func() { // the operator
			defer close(done)
			modes := []circuitbreaker.Mode{circuitbreaker.ModeMetricsOnly, circuitbreaker.ModeDisabled, circuitbreaker.ModeForcedOpen, circuitbreaker.ModeNormal}
			for i := range 200 {
				c := cfg
				c.Mode = modes[i%len(modes)]
				c.SlowCallDurationThreshold = []time.Duration{time.Second, 2 * time.Second, time.Hour}[i%3]
				if err := cb.Reconfigure(circuitbreaker.WithConfig(c)); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					fn := func(context.Context) error { return nil }
					if i%7 == g {
						fn = func(context.Context) error { return failure }
					}
					err := chains[i%2].Execute(t.Context(), fn)
					if err != nil && !errors.Is(err, failure) && !resilience.IsRejection(err) {
						t.Errorf("a call returned %v, want nil, its failure or a rejection", err)
						return
					}
					if i%16 == 0 {
						time.Sleep(time.Millisecond) // the open state's end, the operator's turn
					}
				}
			})
		}
		wg.Wait()
		<-done
	})
}
