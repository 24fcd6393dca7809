package ratelimiter

import (
	"strconv"
	"time"

	"github.com/meshless/meshless/resilience"
)

// ErrLimited is the sentinel of every rejection by a rate limiter:
// errors.Is(err, ErrLimited) is true for each [*LimitedError]. It is itself a
// [resilience.Rejection]. On the wire (package grpcmw) it becomes
// RESOURCE_EXHAUSTED with the google.rpc.ErrorInfo reason RATE_LIMITED,
// which no meshless retry retries and no meshless breaker counts.
var ErrLimited error = &LimitedError{}

// LimitedError is the error of a call that a rate limiter refused: the
// period's permits were spent and none would come free within
// timeoutDuration (or before the call's deadline), or the call's context
// ended while it waited for its permit.
//
// A LimitedError is a [resilience.Rejection]: the call never reached the
// dependency, so a circuit breaker ignores it and a retry never retries it.
// That holds when the wait ended with the caller's context too: the error
// then wraps ctx.Err() as its Cause, so errors.Is(err, context.Canceled)
// (or [context.DeadlineExceeded]) is true as well.
//
// A limiter builds the error of the plain "limit reached" case once and
// returns it to every such rejection, so rejecting does not allocate; only a
// rejection with a Cause gets an error of its own. Do not modify a
// LimitedError you receive.
type LimitedError struct {
	// Name is the rate limiter's name.
	Name string
	// LimitForPeriod and LimitRefreshPeriod are the limiter's limit:
	// LimitForPeriod calls per LimitRefreshPeriod; zero in [ErrLimited].
	LimitForPeriod     int
	LimitRefreshPeriod time.Duration
	// Cause is the caller's context's error when that context ended while
	// the call waited for a permit; nil otherwise.
	Cause error
}

func (e *LimitedError) Error() string {
	s := "rate limiter"
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	s += ": limit reached"
	if e.LimitForPeriod > 0 {
		s += " (" + strconv.Itoa(e.LimitForPeriod) + " calls per " + e.LimitRefreshPeriod.String() + ")"
	}
	if e.Cause != nil {
		s += " and the wait for a permit ended: " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is [ErrLimited].
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// Unwrap returns the Cause.
func (e *LimitedError) Unwrap() error { return e.Cause }

// RejectedBy returns [resilience.KindRateLimiter].
func (e *LimitedError) RejectedBy() resilience.Kind { return resilience.KindRateLimiter }
