package e2e

// The circuit breaker's timing keys (docs/configuration.md, circuitBreaker;
// docs/circuitbreaker.md), each played through grpcmw and httpmw on a
// synctest bubble's clock, written in defaults and on the method (route)
// over a decoy in defaults: the documented moment, and the override winning.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// tBreakerBase keeps each call to one attempt, without a throttler's
// random rejections.
const tBreakerBase = `
adaptiveThrottling: { enabled: false }
retry: { maxAttempts: 1 }
timeout: { enabled: false }`

// tOpen makes the calls that open a window of 4 at 50 %.
func tOpen(t *testing.T, r tRig) {
	t.Helper()
	for range 4 {
		r.do(tFail, 0)
	}
	if s := r.state(); s != "OPEN" {
		t.Fatalf("after 4 failures: %s, want OPEN", s)
	}
}

// TestOpenWaitsAtTheDocumentedMoments: the breaker half-opens
// waitDurationInOpenState after it opened, not 1 ms before, and each
// consecutive re-open doubles the wait up to maxWaitDurationInOpenState (0:
// no growth); a re-open by maxWaitDurationInHalfOpenState counts as one.
func TestOpenWaitsAtTheDocumentedMoments(t *testing.T) {
	const win = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 50, permittedNumberOfCallsInHalfOpenState: 1"
	for _, c := range []struct {
		name, keys, decoy string
		waits             []time.Duration // the successive open waits
		halfOpenTimeout   bool            // each probe hangs until the half-open timeout
	}{
		{"grows", "waitDurationInOpenState: 2s, maxWaitDurationInOpenState: 5s",
			"waitDurationInOpenState: 3s, maxWaitDurationInOpenState: 0s",
			[]time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, false},
		{"fixed", "waitDurationInOpenState: 2s, maxWaitDurationInOpenState: 0s",
			"waitDurationInOpenState: 1s, maxWaitDurationInOpenState: 1m",
			[]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}, false},
		{"half-open timeout", "waitDurationInOpenState: 2s, maxWaitDurationInOpenState: 1m, maxWaitDurationInHalfOpenState: 3s",
			"waitDurationInOpenState: 2s, maxWaitDurationInOpenState: 1m, maxWaitDurationInHalfOpenState: 0s",
			[]time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				yml := tYAML(tr, lv, tBreakerBase, "circuitBreaker", win+", "+c.keys, win+", "+c.decoy)
				inTiming(t, tr, lv, yml, func(t *testing.T, r tRig) {
					tOpen(t, r)
					at := time.Now()
					var probes sync.WaitGroup
					ctx, cancel := context.WithCancel(context.Background())
					defer func() { cancel(); probes.Wait() }()
					for i, w := range c.waits {
						sleepTo(at, w-time.Millisecond)
						if s := r.state(); s != "OPEN" {
							t.Fatalf("open %d, %v after it opened: %s, want OPEN", i, w-time.Millisecond, s)
						}
						if got := r.do(tOK, 0); got != "rejected:CIRCUIT_OPEN" {
							t.Fatalf("open %d, %v after it opened: a call got %s, want rejected:CIRCUIT_OPEN", i, w-time.Millisecond, got)
						}
						sleepTo(at, w)
						if s := r.state(); s != "HALF_OPEN" {
							t.Fatalf("open %d, %v after it opened: %s, want HALF_OPEN", i, w, s)
						}
						if !c.halfOpenTimeout {
							if got := r.do(tFail, 0); got != tFail {
								t.Fatalf("probe %d got %s", i, got)
							}
						} else {
							r.b.set(tOK, time.Hour)
							probes.Go(func() { r.call(ctx) })
							synctest.Wait()
							if got := r.call(context.Background()); got != "rejected:CIRCUIT_OPEN" {
								t.Fatalf("a second probe got %s, want rejected:CIRCUIT_OPEN (1 permitted)", got)
							}
							sleepTo(at, w+3*time.Second-time.Millisecond)
							if s := r.state(); s != "HALF_OPEN" {
								t.Fatalf("half-open %d, 3s-1ms in: %s, want HALF_OPEN", i, s)
							}
							sleepTo(at, w+3*time.Second)
						}
						if s := r.state(); s != "OPEN" {
							t.Fatalf("after probe %d: %s, want OPEN", i, s)
						}
						at = time.Now()
					}
				})
			})
		})
	}
}

// TestHalfOpenPermitsTheDocumentedProbes: permittedNumberOfCallsInHalfOpenState
// probes pass at once, the next call is rejected, and the breaker decides
// only once every probe has reported.
func TestHalfOpenPermitsTheDocumentedProbes(t *testing.T) {
	const win = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 50, waitDurationInOpenState: 1s"
	forTiming(t, func(t *testing.T, tr string, lv tLevel) {
		yml := tYAML(tr, lv, tBreakerBase, "circuitBreaker", win+", permittedNumberOfCallsInHalfOpenState: 3",
			win+", permittedNumberOfCallsInHalfOpenState: 1")
		inTiming(t, tr, lv, yml, func(t *testing.T, r tRig) {
			tOpen(t, r)
			sleepTo(time.Now(), time.Second)
			r.b.set(tOK, time.Second)
			var probes sync.WaitGroup
			got := make([]string, 3)
			for i := range got {
				probes.Go(func() { got[i] = r.call(context.Background()) })
			}
			synctest.Wait()
			if c := r.call(context.Background()); c != "rejected:CIRCUIT_OPEN" {
				t.Errorf("a fourth call while 3 probes run got %s, want rejected:CIRCUIT_OPEN", c)
			}
			if s := r.state(); s != "HALF_OPEN" {
				t.Errorf("while the probes run: %s", s)
			}
			probes.Wait()
			if strings.Join(got, ",") != "ok,ok,ok" {
				t.Errorf("probes got %v", got)
			}
			if s := r.state(); s != "CLOSED" {
				t.Errorf("after 3 good probes: %s, want CLOSED", s)
			}
		})
	})
}

// TestSlowCallsOpenAtTheDocumentedRate: a call longer than
// slowCallDurationThreshold is slow, one of exactly the threshold is not,
// and the breaker opens when the slow-call rate reaches
// slowCallRateThreshold, with the timeouts off and with a per-attempt
// timeout above the threshold.
func TestSlowCallsOpenAtTheDocumentedRate(t *testing.T) {
	const keys = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 100, slowCallDurationThreshold: 300ms, slowCallRateThreshold: 50"
	const decoy = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 100, slowCallDurationThreshold: 1h, slowCallRateThreshold: 100"
	const threshold = 300 * time.Millisecond
	for _, timeout := range []string{"timeout: { enabled: false }", "timeout: { perAttempt: 1s, overall: 3s }"} {
		t.Run(timeout, func(t *testing.T) {
			base := "adaptiveThrottling: { enabled: false }\nretry: { maxAttempts: 1 }\n" + timeout
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				inTiming(t, tr, lv, tYAML(tr, lv, base, "circuitBreaker", keys, decoy), func(t *testing.T, r tRig) {
					for i, d := range []time.Duration{threshold, threshold, threshold, threshold, threshold + time.Millisecond, threshold + time.Millisecond} {
						if got := r.do(tOK, d); got != tOK {
							t.Fatalf("call %d got %s", i, got)
						}
						want := "CLOSED" // 4 of exactly the threshold, then one slow in 4
						if i == 5 {
							want = "OPEN" // two slow in 4: 50 %
						}
						if s := r.state(); s != want {
							t.Fatalf("after call %d (%v): %s, want %s", i, d, s, want)
						}
					}
				})
			})
		})
	}
}

// TestATimeBasedWindowForgetsAtItsSize: a TIME_BASED window of N seconds
// holds the calls of the current second and the N-1 before it, a call
// placed by its end: with a per-attempt timeout of 1s (half the default
// slowCallDurationThreshold, where a COUNT_BASED breaker counts a fast
// success without reading the clock), a success that begins in the
// window's last second with the failures and ends after it is counted
// without them.
func TestATimeBasedWindowForgetsAtItsSize(t *testing.T) {
	const keys = "slidingWindowType: TIME_BASED, slidingWindowSize: 5, minimumNumberOfCalls: 4, failureRateThreshold: 50"
	const decoy = "slidingWindowType: COUNT_BASED, slidingWindowSize: 5, minimumNumberOfCalls: 4, failureRateThreshold: 50"
	const timed = "adaptiveThrottling: { enabled: false }\nretry: { maxAttempts: 1 }\ntimeout: { perAttempt: 1s, overall: 3s }"
	for _, c := range []struct {
		base      string
		gap, took time.Duration
		want      string
	}{
		{tBreakerBase, 5*time.Second - time.Millisecond, 0, "OPEN"},
		{tBreakerBase, 5 * time.Second, 0, "CLOSED"},
		{timed, 5*time.Second - time.Millisecond, 0, "OPEN"},
		{timed, 4500 * time.Millisecond, 500 * time.Millisecond, "CLOSED"},
	} {
		t.Run(fmt.Sprint(c.gap, "+", c.took, strings.Contains(c.base, "1s")), func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				inTiming(t, tr, lv, tYAML(tr, lv, c.base, "circuitBreaker", keys, decoy), func(t *testing.T, r tRig) {
					start := time.Now()
					if start.Nanosecond() != 0 {
						t.Fatalf("the bubble starts at %v, not on a second", start)
					}
					for range 3 {
						r.do(tFail, 0)
					}
					sleepTo(start, c.gap)
					if got := r.do(tOK, c.took); got != tOK {
						t.Fatalf("the success got %s", got)
					}
					if s := r.state(); s != c.want {
						t.Errorf("3 failures, then a success from %v to %v: %s, want %s", c.gap, c.gap+c.took, s, c.want)
					}
				})
			})
		})
	}
}

// TestAProbeIsSettledWhenItsContextEnds: a half-open probe whose deadline
// passes (the per-attempt timeout) is a failure then, re-opening the
// breaker at that moment, with no maxWaitDurationInHalfOpenState; one its
// caller cancels gives its place back at once.
func TestAProbeIsSettledWhenItsContextEnds(t *testing.T) {
	const win = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 50, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1"
	base := "adaptiveThrottling: { enabled: false }\nretry: { maxAttempts: 1 }"
	forTiming(t, func(t *testing.T, tr string, lv tLevel) {
		yml := tYAML(tr, lv, base, "timeout", "perAttempt: 500ms, overall: 3s", "perAttempt: 2s, overall: 3s")
		yml = strings.Replace(yml, "defaults:\n", "defaults:\n  circuitBreaker: { "+win+" }\n", 1)
		inTiming(t, tr, lv, yml, func(t *testing.T, r tRig) {
			tOpen(t, r)
			sleepTo(time.Now(), time.Second)
			// A probe its caller cancels after 100ms: its place comes back.
			ctx, cancel := context.WithCancel(context.Background())
			r.b.set(tOK, time.Hour)
			done := make(chan string)
			go func() { done <- r.call(ctx) }()
			time.Sleep(100 * time.Millisecond)
			cancel()
			<-done
			synctest.Wait()
			if s := r.state(); s != "HALF_OPEN" {
				t.Fatalf("after a cancelled probe: %s, want HALF_OPEN", s)
			}
			// A probe that times out: a failure at its deadline.
			start := time.Now()
			go func() { done <- r.call(context.Background()) }()
			sleepTo(start, 500*time.Millisecond-time.Millisecond)
			if s := r.state(); s != "HALF_OPEN" {
				t.Fatalf("1ms before the probe's deadline: %s, want HALF_OPEN", s)
			}
			sleepTo(start, 500*time.Millisecond)
			if s := r.state(); s != "OPEN" {
				t.Fatalf("at the probe's deadline: %s, want OPEN", s)
			}
			<-done
		})
	})
}
