package retry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

var (
	errUnavailable = errors.New("unavailable")
	errNotFound    = errors.New("not found")
)

// dependency answers each call with the next error of its script (the last
// one repeats) and records when it was called.
type dependency struct {
	script []error
	calls  []time.Duration // since start, read from the bubble's clock
	start  time.Time
}

func (d *dependency) call(context.Context) error {
	d.calls = append(d.calls, time.Since(d.start))
	err := d.script[min(len(d.calls), len(d.script))-1]
	return err
}

func newDependency(script ...error) *dependency {
	return &dependency{script: script, start: time.Now()}
}

// waits returns the gaps between calls.
func (d *dependency) waits() []time.Duration {
	var w []time.Duration
	for i := 1; i < len(d.calls); i++ {
		w = append(w, d.calls[i]-d.calls[i-1])
	}
	return w
}

func newRetry(t *testing.T, opts ...retry.Option) *retry.Retry {
	t.Helper()
	r, err := retry.New(append([]retry.Option{retry.WithClock(resilience.SystemClock())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAttemptsCountTheFirstCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 4 })), retry.WithObserver(obs), retry.WithName("pkg.Svc/Get"))
		dep := newDependency(errUnavailable)
		if err := r.Execute(t.Context(), dep.call); err != errUnavailable {
			t.Fatalf("Execute = %v, want the last error unchanged", err)
		}
		if len(dep.calls) != 4 {
			t.Fatalf("%d calls, want 4 (maxAttempts counts the first)", len(dep.calls))
		}
		if n := len(obs.Events(resilience.EventAttempt)); n != 4 {
			t.Fatalf("%d attempt events, want 4", n)
		}
		if n := len(obs.Events(resilience.EventRetry)); n != 3 {
			t.Fatalf("%d retry events, want 3", n)
		}
		done := obs.Events(resilience.EventRetryDone)
		if len(done) != 1 || done[0].Attempt != 4 || done[0].Reason != retry.ReasonMaxAttempts || done[0].Outcome != resilience.Failure {
			t.Fatalf("done events = %+v, want one after 4 attempts, max_attempts, failure", done)
		}
		if src := obs.Sources(); len(src) != 1 || src[0].Kind != resilience.KindRetry || src[0].Name != "pkg.Svc/Get" {
			t.Fatalf("sources = %+v", src)
		}
	})
}

func TestSucceedsAfterRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithObserver(obs))
		dep := newDependency(errUnavailable, nil)
		if err := r.Execute(t.Context(), dep.call); err != nil {
			t.Fatalf("Execute = %v, want success on the second attempt", err)
		}
		done := obs.Events(resilience.EventRetryDone)
		if len(dep.calls) != 2 || len(done) != 1 || done[0].Attempt != 2 || done[0].Outcome != resilience.Success {
			t.Fatalf("calls %d, done %+v", len(dep.calls), done)
		}
	})
}

func TestBackoffSequenceAndCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 7
			c.Jitter = 0
			c.InitialBackoff = 100 * time.Millisecond
			c.BackoffMultiplier = 2
			c.MaxBackoff = time.Second
		})))
		dep := newDependency(errUnavailable)
		_ = r.Execute(t.Context(), dep.call)
		want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
		if got := dep.waits(); !slices.Equal(got, want) {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	})
}

func TestJitterBounds(t *testing.T) {
	for _, tt := range []struct {
		name   string
		random float64
		want   []time.Duration
	}{
		{name: "lowest", random: 0, want: []time.Duration{80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond}},
		// The third base, 400ms, is the cap: its draws spread over
		// [320ms, 400ms), the highest just under the cap.
		{name: "highest, capped", random: 0.999999, want: []time.Duration{119999960, 239999920, 399999920}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
					c.MaxAttempts = 4
					c.Jitter = 0.2
					c.MaxBackoff = 400 * time.Millisecond
				})),
					retry.WithRandom(func() float64 { return tt.random }))
				dep := newDependency(errUnavailable)
				_ = r.Execute(t.Context(), dep.call)
				if got := dep.waits(); !slices.Equal(got, tt.want) {
					t.Fatalf("waits = %v, want %v", got, tt.want)
				}
			})
		})
	}
	// At the cap the waits stay spread below it: min(base, max) × (1 ± 20 %).
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 6
			c.Jitter = 0.2
			c.MaxBackoff = 200 * time.Millisecond
		})),
			retry.WithRandom(func() float64 { return 0 }))
		dep := newDependency(errUnavailable)
		_ = r.Execute(t.Context(), dep.call)
		want := []time.Duration{80 * time.Millisecond, 160 * time.Millisecond, 160 * time.Millisecond, 160 * time.Millisecond, 160 * time.Millisecond}
		if got := dep.waits(); !slices.Equal(got, want) {
			t.Fatalf("waits at the cap with the lowest jitter = %v, want %v", got, want)
		}
	})
	// With the real random source every wait stays within ±20 % and the cap.
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 8
			c.Jitter = 0.2
			c.MaxBackoff = time.Second
		})))
		for range 50 {
			dep := newDependency(errUnavailable)
			_ = r.Execute(t.Context(), dep.call)
			for i, w := range dep.waits() {
				base := min(100*time.Millisecond<<i, time.Second)
				lo, hi := time.Duration(float64(base)*0.8), min(time.Duration(float64(base)*1.2), time.Second)
				if w < lo || w > hi {
					t.Fatalf("wait %d = %v, want within [%v, %v]", i, w, lo, hi)
				}
			}
		}
	})
}

func TestNeverRetriesARejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithObserver(obs), retry.WithRetryable(func(error) bool { return true }))
		start := time.Now()
		dep := newDependency(fmt.Errorf("calling: %w", circuitbreaker.ErrOpen))
		err := r.Execute(t.Context(), dep.call)
		if !errors.Is(err, circuitbreaker.ErrOpen) || len(dep.calls) != 1 || time.Since(start) != 0 {
			t.Fatalf("err %v after %d calls and %v; want the rejection at once, unretried", err, len(dep.calls), time.Since(start))
		}
		if d := obs.Events(resilience.EventRetryDone); d[0].Reason != retry.ReasonRejected {
			t.Fatalf("reason %v, want rejected", d[0].Reason)
		}
	})
}

func TestBreakerOpeningMidRetryStopsTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, err := circuitbreaker.New(circuitbreaker.WithClock(resilience.SystemClock()),
			circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
				c.SlidingWindowSize = 2
				c.MinimumNumberOfCalls = 2
			})))
		if err != nil {
			t.Fatal(err)
		}
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 5
			c.Jitter = 0
		})))
		dep := newDependency(errUnavailable)
		start := time.Now()
		err = resilience.NewChain(r, cb).Execute(t.Context(), dep.call)
		if !errors.Is(err, circuitbreaker.ErrOpen) {
			t.Fatalf("Execute = %v, want the breaker's rejection", err)
		}
		// Attempt 1 and 2 reach the dependency and open the breaker; attempt 3
		// is rejected after the second backoff, and nothing follows.
		if len(dep.calls) != 2 || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("%d calls in %v, want 2 calls and the loop ended at 300ms", len(dep.calls), time.Since(start))
		}
	})
}

func TestBusinessErrorsAreNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithRetryable(func(err error) bool { return errors.Is(err, errUnavailable) }))
		dep := newDependency(errNotFound)
		if err := r.Execute(t.Context(), dep.call); err != errNotFound || len(dep.calls) != 1 {
			t.Fatalf("err %v after %d calls; want not found, once", err, len(dep.calls))
		}
	})
}

func TestNoRetryOnceTheContextIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithRetryable(func(error) bool { return true }))
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := r.Execute(ctx, func(context.Context) error {
			calls++
			cancel() // the caller gives up during the attempt
			return errUnavailable
		})
		if err != errUnavailable || calls != 1 {
			t.Fatalf("err %v after %d calls, want the attempt's error once", err, calls)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// The caller gives up during a backoff: Execute returns at once.
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.InitialBackoff = time.Second
			c.MaxBackoff = time.Second
			c.Jitter = 0
		})))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		dep := newDependency(errUnavailable)
		start := time.Now()
		if err := r.Execute(ctx, dep.call); err != errUnavailable || len(dep.calls) != 1 || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("err %v, %d calls, returned after %v; want the last error at 300ms", err, len(dep.calls), time.Since(start))
		}
	})
}

func TestNoBackoffThatPassesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 5
			c.Jitter = 0
		})), retry.WithObserver(obs))
		ctx, cancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
		defer cancel()
		dep := newDependency(errUnavailable)
		start := time.Now()
		err := r.Execute(ctx, dep.call)
		// Attempts at 0 and 100ms; the next wait (200ms) would end at 300ms,
		// after the deadline: return at 100ms instead of sleeping.
		if err != errUnavailable || len(dep.calls) != 2 || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("err %v, %d calls, returned after %v; want 2 calls, back at 100ms", err, len(dep.calls), time.Since(start))
		}
		if d := obs.Events(resilience.EventRetryDone); d[0].Reason != retry.ReasonDeadline {
			t.Fatalf("reason %v, want deadline", d[0].Reason)
		}
	})
}

func TestPushback(t *testing.T) {
	pushback := func(err error) (time.Duration, bool) {
		var p pushbackError
		if errors.As(err, &p) {
			return time.Duration(p), true
		}
		return 0, false
	}
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 5
			c.Jitter = 0
		})), retry.WithPushback(pushback))
		dep := newDependency(errUnavailable, errUnavailable, pushbackError(700*time.Millisecond), errUnavailable)
		_ = r.Execute(t.Context(), dep.call)
		// 100ms, 200ms, then the server's 700ms, then the backoff starts over.
		want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond, 100 * time.Millisecond}
		if got := dep.waits(); !slices.Equal(got, want) {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithPushback(pushback), retry.WithObserver(obs))
		dep := newDependency(pushbackError(-1))
		if err := r.Execute(t.Context(), dep.call); len(dep.calls) != 1 || err == nil {
			t.Fatalf("a negative pushback was retried: %d calls", len(dep.calls))
		}
		if d := obs.Events(resilience.EventRetryDone); d[0].Reason != retry.ReasonPushback {
			t.Fatalf("reason %v, want pushback", d[0].Reason)
		}
	})
}

type pushbackError time.Duration

func (pushbackError) Error() string { return "unavailable, retry later" }

func TestThrottlingStopsRetriesInAnOutageAndLetsThemResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := retry.NewThrottle(10, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		a := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })), retry.WithThrottle(th))
		b := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 3 })), retry.WithThrottle(th)) // another method of the client
		var attempts []int
		for i := range 6 {
			dep := newDependency(errUnavailable)
			_ = []*retry.Retry{a, b}[i%2].Execute(t.Context(), dep.call)
			attempts = append(attempts, len(dep.calls))
		}
		// 10 tokens: 3 attempts (7 left), 2 (5: no more retries), then first
		// attempts only.
		if want := []int{3, 2, 1, 1, 1, 1}; !slices.Equal(attempts, want) {
			t.Fatalf("attempts per call = %v, want %v (tokens now %v)", attempts, want, th.Tokens())
		}
		if th.Tokens() != 1 {
			t.Fatalf("tokens = %v, want 1", th.Tokens())
		}
		// Successes give back 0.1 each: 60 of them bring the bucket from 1.0
		// to 7.0. A failing call then takes a token (6.0, above half: retry)
		// and another (5.0, not above half: stop): retries are back.
		ok := func(context.Context) error { return nil }
		for range 60 {
			_ = a.Execute(t.Context(), ok)
		}
		dep := newDependency(errUnavailable)
		_ = a.Execute(t.Context(), dep.call)
		if len(dep.calls) != 2 {
			t.Fatalf("after the dependency recovered (tokens 7.0 before the call): %d attempts, want 2", len(dep.calls))
		}
	})
}

func TestThrottleIsBoundedAndShared(t *testing.T) {
	th, _ := retry.NewThrottle(2, 1)
	r, _ := retry.New(retry.WithThrottle(th), retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 1 })))
	for range 10 {
		_ = r.Execute(t.Context(), func(context.Context) error { return nil })
	}
	if th.Tokens() != 2 {
		t.Fatalf("tokens = %v after successes on a full bucket, want 2", th.Tokens())
	}
	for range 10 {
		_ = r.Execute(t.Context(), func(context.Context) error { return errUnavailable })
	}
	if th.Tokens() != 0 {
		t.Fatalf("tokens = %v after an outage, want 0 (never negative)", th.Tokens())
	}
}

func TestWorksWithTheFakeClock(t *testing.T) {
	clk := resiliencetest.NewClock(time.Now())
	r, _ := retry.New(retry.WithClock(clk), retry.WithConfig(retryConf(func(c *retry.Config) {
		c.Jitter = 0
		c.MaxAttempts = 3
	})))
	calls := 0
	done := make(chan error)
	go func() {
		done <- r.Execute(t.Context(), func(context.Context) error { calls++; return errUnavailable })
	}()
	clk.WaitPending(1)
	clk.Advance(100 * time.Millisecond)
	clk.WaitPending(1)
	clk.Advance(200 * time.Millisecond)
	if err := <-done; err != errUnavailable || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestFirstAttemptSuccessDoesNotAllocate(t *testing.T) {
	th, _ := retry.NewThrottle(10, 0.1)
	r, _ := retry.New(retry.WithThrottle(th))
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	chain := resilience.NewChain(r)
	for name, run := range map[string]func(){
		"Execute":     func() { _ = r.Execute(ctx, ok) },
		"in a Chain":  func() { _ = chain.Execute(ctx, ok) },
		"not retried": func() { _ = r.Execute(ctx, func(context.Context) error { return context.Canceled }) },
	} {
		if n := testing.AllocsPerRun(1000, run); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

func TestAttemptsDoneEndsTheCallWithoutRetry(t *testing.T) {
	obs := new(resiliencetest.Observer)
	th, _ := retry.NewThrottle(10, 0.1)
	r := newRetry(t, retry.WithObserver(obs), retry.WithThrottle(th))
	a := r.Begin(t.Context())
	if _, again := a.Next(errUnavailable); !again {
		t.Fatal("a first retryable failure is not retried")
	}
	a.Done(errUnavailable) // the stream had delivered responses
	if _, again := a.Next(errUnavailable); again {
		t.Fatal("Next after Done offers a retry")
	}
	d := obs.Events(resilience.EventRetryDone)
	if len(d) != 1 || d[0].Attempt != 2 || d[0].Reason != retry.ReasonCommitted {
		t.Fatalf("done events %+v, want one, after 2 attempts, committed", d)
	}
	if th.Tokens() != 8 {
		t.Fatalf("tokens = %v, want 8: both retryable failures take one", th.Tokens())
	}
}

// A success gives the throttle its share back whichever way the call came
// in: Execute, or Apply in a chain (each returns at once on a success when
// there is neither a throttle nor an observer).
func TestASuccessGivesTheThrottleItsShareInAChainToo(t *testing.T) {
	th, err := retry.NewThrottle(10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	r := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 1 })), retry.WithThrottle(th))
	for range 4 {
		_ = r.Execute(t.Context(), newDependency(errUnavailable).call) // 10 → 6
	}
	ok := func(context.Context) error { return nil }
	_ = r.Execute(t.Context(), ok)                      // 6.5
	_ = resilience.NewChain(r).Execute(t.Context(), ok) // 7
	if got := th.Tokens(); got != 7 {
		t.Fatalf("tokens = %v, want 7 (4 failures took 4, 2 successes gave 0.5 each)", got)
	}
}
