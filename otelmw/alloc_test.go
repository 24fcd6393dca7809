package otelmw_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// B7: recording an event on the call path allocates nothing with the SDK
// installed, whether the event is sent by hand or by a real policy.
func TestRecordingDoesNotAllocate(t *testing.T) {
	obs, _ := newObserver(t)
	ctx := context.Background()
	attach := func(kind resilience.Kind, name, scope string) resilience.Recorder {
		return obs.Attach(resilience.Source{Kind: kind, Name: name, Scope: scope,
			Snapshot: func() resilience.Snapshot { return resilience.Snapshot{} }})
	}
	breaker := attach(resilience.KindCircuitBreaker, "payments", "")
	bh := attach(resilience.KindBulkhead, "payments", "")
	rt := attach(resilience.KindRetry, "pkg.Svc/Get", "")
	to := attach(resilience.KindTimeout, "pkg.Svc/Get", "attempt")
	call := attach(resilience.KindCall, "pkg.Svc/Get", "")

	cb, err := circuitbreaker.New(circuitbreaker.WithName("cb"), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := bulkhead.New(bulkhead.WithName("bh"), bulkhead.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	r, err := retry.New(retry.WithName("pkg.Svc/Put"), retry.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := ratelimiter.New(ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.LimitForPeriod = 1 << 30 })), ratelimiter.WithName("rl"), ratelimiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	lim := attach(resilience.KindRateLimiter, "quota", "")
	noop := func(context.Context) error { return nil }

	for _, tt := range []struct {
		name string
		run  func()
	}{
		{"breaker success EventCall", func() {
			breaker.Record(ctx, resilience.Event{Type: resilience.EventCall, Outcome: resilience.Success, Duration: time.Millisecond})
		}},
		{"breaker slow failure EventCall", func() {
			breaker.Record(ctx, resilience.Event{Type: resilience.EventCall, Outcome: resilience.Failure, Slow: true})
		}},
		{"breaker rejection, no recording span", func() {
			breaker.Record(ctx, resilience.Event{Type: resilience.EventRejection, State: circuitbreaker.StateOpen})
		}},
		{"breaker transition, after its first", func() {
			breaker.Record(ctx, resilience.Event{Type: resilience.EventTransition, From: circuitbreaker.StateOpen, To: circuitbreaker.StateHalfOpen})
		}},
		{"bulkhead acquire and release", func() {
			bh.Record(ctx, resilience.Event{Type: resilience.EventAcquired})
			bh.Record(ctx, resilience.Event{Type: resilience.EventReleased})
		}},
		{"bulkhead acquire after a wait", func() {
			bh.Record(ctx, resilience.Event{Type: resilience.EventAcquired, Duration: time.Millisecond})
			bh.Record(ctx, resilience.Event{Type: resilience.EventReleased})
		}},
		{"retry attempt and done", func() {
			rt.Record(ctx, resilience.Event{Type: resilience.EventAttempt, Attempt: 1})
			rt.Record(ctx, resilience.Event{Type: resilience.EventRetryDone, Attempt: 1})
		}},
		{"timeout call", func() {
			to.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond})
		}},
		{"timeout timed out", func() {
			to.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond, TimedOut: true})
		}},
		{"KindCall success", func() {
			call.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: 3 * time.Millisecond})
		}},
		{"KindCall failure, error type seen before", func() {
			call.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: 3 * time.Millisecond, Err: errBoom, ErrorType: "UNAVAILABLE"})
		}},
		// The same through real policies.
		{"circuitbreaker Execute", func() { _ = cb.Execute(ctx, noop) }},
		{"bulkhead Execute", func() { _ = fixed.Execute(ctx, noop) }},
		{"retry Execute, first attempt succeeds", func() { _ = r.Execute(ctx, noop) }},
		{"rate limiter permitted and rejected", func() {
			lim.Record(ctx, resilience.Event{Type: resilience.EventAcquired})
			lim.Record(ctx, resilience.Event{Type: resilience.EventRejection, Err: ratelimiter.ErrLimited})
		}},
		{"ratelimiter Enter, permitted", func() { _, _, _ = rl.Enter(ctx) }},
	} {
		if n := testing.AllocsPerRun(1000, tt.run); n != 0 {
			t.Errorf("%s: %v allocations per event, want 0", tt.name, n)
		}
	}
}
