package failsafepolicy

import (
	"context"
	"errors"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/budget"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscircuitbreaker "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/meshless/meshless/resilience"
)

// New returns a [resilience.Policy] that runs the rest of a chain
// under failsafe-go policies (a hedge, a fallback, a rate limiter, a cache,
// ...), so that they can join a [resilience.Chain]. Several policies given
// at once are composed as failsafe.With composes them: the first is the
// outermost.
//
// The rest of the chain runs with the failsafe-go execution's context
// (Execution.Context()): it carries the caller's context's values and
// deadline, and failsafe-go cancels it when one of its policies gives up on
// the attempt (a failsafe-go timeout fired, another hedge won).
//
// The errors by which failsafe-go's policies refuse a call locally — a rate
// limiter's ratelimiter.ErrExceeded, a bulkhead's ErrFull, a breaker's
// ErrOpen, an adaptive limiter's or throttler's ErrExceeded, a budget's
// ErrExceeded — come back wrapped in a *[RejectionError], a
// [resilience.Rejection] that still matches the failsafe-go sentinel with
// errors.Is: a meshless breaker ignores it and a meshless retry does not
// retry it. Every other error, and every error of the rest of the chain,
// comes back unchanged.
//
// A panic in the rest of the chain goes on up, as failsafe-go lets it,
// except in an attempt that a failsafe-go hedge started in a goroutine of its
// own.
//
// Cost: every call goes through failsafe-go's executor, which allocates (a
// copy of the executor for the context, the execution, its result, and each
// policy's executor): 13 allocations a call for one fallback with
// failsafe-go v0.9.4, 17 with v0.9.8, against none for the meshless
// policies. See docs/bulkhead.md for the figures.
func New(policies ...failsafe.Policy[any]) resilience.Policy {
	return &failsafePolicy{exec: failsafe.With[any](policies...)}
}

type failsafePolicy struct {
	exec failsafe.Executor[any]
}

func (f *failsafePolicy) Apply(ctx context.Context, next resilience.Next) error {
	err := f.exec.WithContext(ctx).RunWithExecution(func(e failsafe.Execution[any]) error {
		return next.Run(e.Context())
	})
	if err != nil && !resilience.IsRejection(err) && isFailsafeRejection(err) {
		return &RejectionError{Err: err}
	}
	return err
}

// failsafeRejections are the sentinels of failsafe-go's local refusals.
var failsafeRejections = [...]error{
	ratelimiter.ErrExceeded,
	fsbulkhead.ErrFull,
	fscircuitbreaker.ErrOpen,
	adaptivelimiter.ErrExceeded,
	adaptivethrottler.ErrExceeded,
	budget.ErrExceeded,
}

func isFailsafeRejection(err error) bool {
	for _, r := range failsafeRejections {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// RejectionError is a local refusal by a failsafe-go policy run
// through [New], made a [resilience.Rejection]. Err is
// failsafe-go's error, so errors.Is(err, ratelimiter.ErrExceeded) (say) still
// holds.
type RejectionError struct {
	Err error
}

func (e *RejectionError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RejectionError) Unwrap() error { return e.Err }

// RejectedBy returns [resilience.KindOther].
func (e *RejectionError) RejectedBy() resilience.Kind { return resilience.KindOther }
