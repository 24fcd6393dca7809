package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// endFreeEngine returns an engine on the system clock, without observers,
// whose methods run plain with a per-attempt timeout of perAttempt and a
// breaker whose slow-call threshold is slow (COUNT_BASED, 10 calls).
func endFreeEngine(t *testing.T, perAttempt, slow time.Duration) (*Engine, *Method) {
	t.Helper()
	cfg := &config.Config{Defaults: config.Policies{
		Timeout: &config.TimeoutSection{PerAttempt: config.Dur(perAttempt), Overall: config.Dur(3 * perAttempt)},
		CircuitBreaker: &config.CircuitBreakerSection{SlowCallDurationThreshold: config.Dur(slow),
			SlidingWindowSize: config.Ptr(10), MinimumNumberOfCalls: config.Ptr(10)},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	m := lookup(e, "/a.B/C")
	if !m.plain || m.endFree != perAttempt {
		t.Fatalf("plain %v, endFree %v: want a plain method, endFree %v", m.plain, m.endFree, perAttempt)
	}
	return e, m
}

// run makes one call of m whose attempt takes d, ignoring its context, and
// succeeds.
func runFor(t *testing.T, m *Method, d time.Duration) {
	t.Helper()
	if _, err := m.Run(context.Background(), &scripted{script: func(int) error {
		time.Sleep(d)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
}

// A plain call that succeeds before its deadline is not timed at its end
// when the deadline proves it fast (Method.endFree); every success that the
// deadline does not prove fast is timed still, and counted slow when it was.
func TestASuccessIsTimedUnlessItsDeadlineProvesItFast(t *testing.T) {
	// Each case's success is slow: the deadline must not hide it.
	for _, tc := range []struct {
		name      string
		threshold time.Duration // the breaker's, at build
		lowered   time.Duration // the threshold Reconfigure sets after a first call; 0: none
		took      time.Duration
	}{
		// The deadline (1 s) is half the threshold (2 s): a success before
		// it needs no end, but this one ignores its context and succeeds
		// after 3 s.
		{"past its deadline: the timer fired, so the end is read", 2 * time.Second, 0, 3 * time.Second},
		// 700 ms is before the 1 s deadline, and slow at 500 ms.
		{"a threshold under twice the deadline: the end is read", 500 * time.Millisecond, 0, 700 * time.Millisecond},
		// Proved fast at first (1 s is under 30 s), slow once lowered.
		{"a threshold lowered by Reconfigure: the end is read", time.Minute, 500 * time.Millisecond, 700 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, m := endFreeEngine(t, time.Second, tc.threshold)
				defer e.Close()
				if tc.lowered > 0 {
					runFor(t, m, tc.took)
					c := m.breaker.Config()
					c.SlowCallDurationThreshold = tc.lowered
					if err := m.breaker.Reconfigure(circuitbreaker.WithConfig(c)); err != nil {
						t.Fatal(err)
					}
				}
				runFor(t, m, tc.took)
				if slow := m.breaker.Metrics().SlowCalls; slow != 1 {
					t.Errorf("slow calls %d, want 1: a slow success was not timed", slow)
				}
			})
		})
	}
	t.Run("proved fast: counted as a success that is not slow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e, m := endFreeEngine(t, time.Second, time.Minute)
			defer e.Close()
			// A failure first, so that the window is not clean and the
			// breaker counts the successes that follow.
			if _, err := m.Run(context.Background(), &scripted{script: func(int) error { return &codeError{code: 14} }}); err == nil {
				t.Fatal("the failing call succeeded")
			}
			for range 3 {
				runFor(t, m, 900*time.Millisecond)
			}
			mt := m.breaker.Metrics()
			if mt.SuccessfulCalls != 3 || mt.SlowCalls != 0 {
				t.Errorf("successes %d, slow %d: want 3 and 0", mt.SuccessfulCalls, mt.SlowCalls)
			}
		})
	})
}

// A method skips the read only where nothing needs a success's duration or
// its exact end: no observer (metrics are told every duration), no timed
// attempts (the outlier balancer's slow-call detection), the system clock,
// a deadline to prove the bound, and a throttler whose slot is no shorter
// than that deadline.
func TestEndFreeOnlyWhereNothingNeedsTheEnd(t *testing.T) {
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder { return nil })
	for _, tc := range []struct {
		name    string
		timeout config.TimeoutSection
		window  time.Duration // the throttler's; 0: its default, 10 s
		opts    Options
		want    time.Duration
	}{
		{"defaults", config.TimeoutSection{}, 0, Options{}, time.Second},
		{"the overall timeout alone", config.TimeoutSection{PerAttempt: config.Dur(0), Overall: config.Dur(800 * time.Millisecond)},
			0, Options{}, 800 * time.Millisecond},
		{"no timeout", config.TimeoutSection{Enabled: config.Ptr(false)}, 0, Options{}, 0},
		{"an observer", config.TimeoutSection{}, 0, Options{Observer: obs}, 0},
		{"timed attempts", config.TimeoutSection{}, 0, Options{TimedAttempts: true}, 0},
		{"a clock of the options", config.TimeoutSection{}, 0, Options{Clock: wallClock{}}, 0},
		{"a throttler slot shorter than the deadline", config.TimeoutSection{}, 5 * time.Second, Options{}, 0},
		{"a throttler slot as long", config.TimeoutSection{}, 10 * time.Second, Options{}, time.Second},
		{"a TIME_BASED breaker window", config.TimeoutSection{}, 0, Options{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Defaults: config.Policies{Timeout: &tc.timeout}}
			if tc.name == "a TIME_BASED breaker window" {
				cfg.Defaults.CircuitBreaker = &config.CircuitBreakerSection{SlidingWindowType: config.Ptr("TIME_BASED")}
			}
			if tc.window > 0 {
				cfg.Defaults.AdaptiveThrottling = &config.AdaptiveThrottlingSection{Window: config.Dur(tc.window)}
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			tc.opts.MaxKeys = 10
			e, err := New(cfg, fakeTransport{}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if m := lookup(e, "/a.B/C"); m.endFree != tc.want {
				t.Errorf("endFree %v, want %v", m.endFree, tc.want)
			}
		})
	}
}

// A TIME_BASED breaker counts the calls that ended in its last N seconds: a
// success placed at its start (were it proved fast by its deadline) could
// be out of the window when the next call is counted, while fast failures
// count at their end, and the failure rate would open the breaker on a
// healthy backend. Such a method reads every success's end.
func TestEndFreeTimeBasedWindowKeepsSuccessesThatEndedInIt(t *testing.T) {
	for _, tc := range []struct {
		name             string
		perAttempt, slow time.Duration
		window           int           // seconds
		wait, took       time.Duration // before the successes; each success's time
		after            time.Duration // from the successes' end to the failures
		throttling       *config.AdaptiveThrottlingSection
	}{
		// No throttler: endFree is the whole 10 s per-attempt timeout.
		{"10s deadline, 10s window, no throttler", 10 * time.Second, 20 * time.Second, 10, 0, 9500 * time.Millisecond, time.Second,
			&config.AdaptiveThrottlingSection{Enabled: config.Ptr(false)}},
		// Default timeouts, breaker threshold and throttler (slot 1 s): a
		// 2 s window still loses successes that crossed a second.
		{"defaults, 2s window", time.Second, 2 * time.Second, 2, 900 * time.Millisecond, 900 * time.Millisecond, 200 * time.Millisecond, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := &config.Config{Defaults: config.Policies{
					Timeout: &config.TimeoutSection{PerAttempt: config.Dur(tc.perAttempt), Overall: config.Dur(3 * tc.perAttempt)},
					CircuitBreaker: &config.CircuitBreakerSection{
						SlidingWindowType:         config.Ptr("TIME_BASED"),
						SlidingWindowSize:         config.Ptr(tc.window),
						MinimumNumberOfCalls:      config.Ptr(5),
						SlowCallDurationThreshold: config.Dur(tc.slow),
					},
					AdaptiveThrottling: tc.throttling,
				}}
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m := lookup(e, "/a.B/C")
				time.Sleep(tc.wait)
				// Six successes at once, each under its deadline and far
				// from slow.
				var wg sync.WaitGroup
				for range 6 {
					wg.Go(func() { runFor(t, m, tc.took) })
				}
				wg.Wait()
				// In the window's next second: five fast failures
				// (INTERNAL: a failure, not retried).
				time.Sleep(tc.after)
				for range 5 {
					m.Run(context.Background(), &scripted{script: func(int) error { return &codeError{code: 13} }})
				}
				// The window holds 11 calls, 5 failed: 45 % < 50 %.
				mt := m.breaker.Metrics()
				if st := m.breaker.State(); st != circuitbreaker.StateClosed || mt.Calls != 11 {
					t.Errorf("state %v, window calls %d (failed %d): want CLOSED with 11 calls (6 successes that ended %v ago, 5 failures)",
						st, mt.Calls, mt.FailedCalls, tc.after)
				}
			})
		})
	}
}
