package timeout_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
)

// A telling copy of a timeout (internal/timely) says a call succeeded
// within its deadline only when it did: the call returned nil, the
// deadline the timeout derived was still live (its timer had not fired,
// the caller had not cancelled), the timeout is no longer than the
// breaker outside takes, and its deadline counts from the start the policy
// outside passed on (the breaker's: a policy between them that waited
// passes none). Every other call ends as it does without it.
func TestATellingTimeoutTellsOnlyOfASuccessWithinItsLiveDeadline(t *testing.T) {
	failure := errors.New("boom")
	fast := func(context.Context) error { return nil }
	for _, tt := range []struct {
		name  string
		opts  []timeout.Option
		bound time.Duration
		ctx   func(context.Context) (context.Context, context.CancelFunc)
		call  func(context.Context) error
		want  error // nil, timely.Err or failure
		// noStart: the policy outside passes no start (it waited)
		noStart bool
	}{
		{name: "a fast success", bound: time.Second, call: fast, want: timely.Err},
		{name: "a fast success, the bound over the timeout", bound: time.Hour, call: fast, want: timely.Err},
		{name: "the timeout over the bound", bound: time.Second - 1, call: fast},
		{name: "no bound (an observed breaker)", call: fast},
		{name: "no start passed on (a policy between that waited)", bound: time.Second, call: fast, noStart: true},
		{name: "a failure", bound: time.Second, call: func(context.Context) error { return failure }, want: failure},
		{name: "a success after the deadline fired", bound: time.Second, call: func(context.Context) error {
			time.Sleep(2 * time.Second) // it ignores its context
			return nil
		}},
		{name: "a success after the caller cancelled", bound: time.Second, ctx: context.WithCancel},
		{name: "the caller's earlier deadline governs", bound: time.Second, call: fast, ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Millisecond)
		}},
		{name: "an observer", bound: time.Second, call: fast, opts: []timeout.Option{timeout.WithObserver(new(resiliencetest.Observer))}},
		{name: "observing only", bound: time.Second, call: fast, opts: []timeout.Option{timeout.WithObserve()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				to, err := timeout.New(time.Second, tt.opts...)
				if err != nil {
					t.Fatal(err)
				}
				var bound atomic.Int64
				bound.Store(int64(tt.bound))
				teller := timely.Of(to).Tell(&bound).(resilience.Policy)
				ctx, cancel := t.Context(), context.CancelFunc(func() {})
				if tt.ctx != nil {
					ctx, cancel = tt.ctx(ctx)
				}
				defer cancel()
				call := tt.call
				if call == nil { // cancels the caller's context, then succeeds
					call = func(context.Context) error { cancel(); return nil }
				}
				// outside: the breaker, which passes its start on
				outside := resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
					if tt.noStart {
						return next.Run(ctx)
					}
					return next.RunAt(ctx, time.Now())
				})
				got := resilience.NewChain(outside, teller).Execute(ctx, call)
				if !errors.Is(got, tt.want) || (tt.want == nil && got != nil) {
					t.Errorf("the telling copy returned %v, want %v", got, tt.want)
				}
				if tt.want == timely.Err { // the timeout itself never tells
					if got := resilience.NewChain(to).Execute(ctx, call); got != nil {
						t.Errorf("the timeout returned %v, want nil", got)
					}
				}
			})
		})
	}
}
