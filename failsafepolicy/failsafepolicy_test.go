package failsafepolicy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/failsafepolicy"
	"github.com/meshless/meshless/resilience"
)

func TestFailsafeFallbackInAChain(t *testing.T) {
	b := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
	var errFallback = errors.New("served from the fallback")
	for _, tt := range []struct {
		name string
		p    failsafe.Policy[any]
		call error
		want error
	}{
		{name: "result replaces a failure", p: fallback.NewWithResult[any](nil), call: errUnavailable, want: nil},
		{name: "error replaces a failure", p: fallback.NewWithError[any](errFallback), call: errUnavailable, want: errFallback},
		{name: "success passes", p: fallback.NewWithError[any](errFallback), call: nil, want: nil},
		{name: "an inner rejection is handled like any error", p: fallback.NewWithResult[any](nil), call: bulkhead.ErrFull, want: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The fallback is outside the bulkhead: it also serves the
			// bulkhead's own rejections.
			chain := resilience.NewChain(failsafepolicy.New(tt.p), b)
			var active int
			err := chain.Execute(t.Context(), func(context.Context) error {
				active = b.Active()
				return tt.call
			})
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("chain.Execute = %v, want %v", err, tt.want)
			}
			if active != 1 || b.Active() != 0 {
				t.Fatalf("Active inside %d, after %d; want 1 and 0", active, b.Active())
			}
		})
	}
	t.Run("fallback on a full bulkhead", func(t *testing.T) {
		chain := resilience.NewChain(failsafepolicy.New(fallback.NewWithResult[any](nil)), b)
		held := hold(t, b, 1)
		defer releaseAll(held)
		if err := chain.Execute(t.Context(), func(context.Context) error { t.Fatal("ran in a full bulkhead"); return nil }); err != nil {
			t.Fatalf("chain.Execute = %v, want the fallback's nil", err)
		}
	})
}

func TestFailsafeRateLimiterRejectionIsARejection(t *testing.T) {
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 10
		c.MinimumNumberOfCalls = 1
	})))
	if err != nil {
		t.Fatal(err)
	}
	rl := ratelimiter.NewBursty[any](2, time.Hour)
	chain := resilience.NewChain(cb, failsafepolicy.New(rl))
	var ran int
	call := func(context.Context) error { ran++; return nil }
	for i := range 2 {
		if err := chain.Execute(t.Context(), call); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	for range 5 {
		err := chain.Execute(t.Context(), call)
		if !errors.Is(err, ratelimiter.ErrExceeded) {
			t.Fatalf("third call: %v, want ratelimiter.ErrExceeded", err)
		}
		var fr *failsafepolicy.RejectionError
		if !errors.As(err, &fr) || fr.RejectedBy() != resilience.KindOther || err.Error() != ratelimiter.ErrExceeded.Error() {
			t.Fatalf("err = %#v, want a FailsafeRejectionError", err)
		}
		if resilience.DefaultClassifier(err) != resilience.Ignored {
			t.Fatalf("a rate limiter's refusal must be ignored by a breaker")
		}
	}
	if ran != 2 {
		t.Fatalf("the call ran %d times, want 2", ran)
	}
	// The breaker counted the two calls that ran, not the five refusals.
	if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 0 || cb.State() != circuitbreaker.StateClosed {
		t.Fatalf("breaker metrics %+v in state %v, want 2 successful calls, closed", m, cb.State())
	}
}

func TestFailsafePolicyPassesErrorsOfTheChainUnchanged(t *testing.T) {
	p := failsafepolicy.New(ratelimiter.NewBursty[any](1000, time.Hour))
	inner := &bulkhead.FullError{Name: "inner", Limit: 1}
	for _, want := range []error{errUnavailable, inner, ratelimiter.ErrExceeded} {
		err := resilience.NewChain(p).Execute(t.Context(), func(context.Context) error { return want })
		switch {
		case want == ratelimiter.ErrExceeded:
			// An error that matches a failsafe-go refusal is made a rejection,
			// wherever it came from.
			if !resilience.IsRejection(err) || !errors.Is(err, want) {
				t.Errorf("got %v, want a rejection matching %v", err, want)
			}
		case err != want:
			t.Errorf("got %v, want %v unchanged", err, want)
		}
	}
}

func TestFailsafePolicyRunsTheChainWithTheExecutionsContext(t *testing.T) {
	type key struct{}
	t.Run("values and a failsafe-go timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			chain := resilience.NewChain(failsafepolicy.New(fstimeout.New[any](50 * time.Millisecond)))
			ctx := context.WithValue(t.Context(), key{}, "caller")
			start := time.Now()
			var seen any
			err := chain.Execute(ctx, func(ctx context.Context) error {
				seen = ctx.Value(key{})
				<-ctx.Done() // the timeout cancels the execution's context
				return ctx.Err()
			})
			if seen != "caller" {
				t.Errorf("the call saw value %v, want the caller's", seen)
			}
			if !errors.Is(err, fstimeout.ErrExceeded) || time.Since(start) != 50*time.Millisecond {
				t.Fatalf("err = %v after %v, want the timeout after 50ms", err, time.Since(start))
			}
			if resilience.IsRejection(err) {
				t.Fatal("a timeout is a failure, not a rejection")
			}
		})
	})
	t.Run("a hedge cancels the losing attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			chain := resilience.NewChain(failsafepolicy.New(hedgepolicy.NewWithDelay[any](10 * time.Millisecond)))
			var attempts, cancelled atomic.Int32
			lost := make(chan struct{})
			err := chain.Execute(t.Context(), func(ctx context.Context) error {
				if attempts.Add(1) == 1 {
					<-ctx.Done() // the first attempt hangs until the hedge wins
					cancelled.Add(1)
					close(lost)
					return ctx.Err()
				}
				return nil
			})
			if err != nil {
				t.Fatalf("chain.Execute = %v, want the hedge's success", err)
			}
			<-lost
			if attempts.Load() != 2 || cancelled.Load() != 1 {
				t.Fatalf("%d attempts, %d cancelled; want 2 and 1", attempts.Load(), cancelled.Load())
			}
		})
	})
}

// The adapter's cost per call is failsafe-go's executor's: logged here,
// quoted in docs/bulkhead.md.
func TestFailsafePolicyAllocations(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		p    resilience.Policy
	}{
		{name: "fallback", p: failsafepolicy.New(fallback.NewWithResult[any](nil))},
		{name: "rate limiter", p: failsafepolicy.New(ratelimiter.NewBursty[any](1<<30, time.Hour))},
		{name: "fallback and rate limiter together", p: failsafepolicy.New(fallback.NewWithResult[any](nil), ratelimiter.NewBursty[any](1<<30, time.Hour))},
	} {
		chain := resilience.NewChain(tt.p)
		n := testing.AllocsPerRun(1000, func() { _ = chain.Execute(ctx, noop) })
		t.Logf("FailsafePolicy(%s): %v allocs per call", tt.name, n)
		if n == 0 {
			t.Errorf("%s: 0 allocations: the measurement is broken", tt.name)
		}
	}
}
