package resilience

import (
	"errors"
	"strconv"
)

// Kind names a kind of policy.
type Kind uint8

const (
	KindCircuitBreaker Kind = iota + 1
	KindRetry
	KindBulkhead
	KindTimeout
	// KindOther is any other policy, such as an adapted failsafe-go policy.
	KindOther
	// KindCall is not a policy but a logical call as a whole, all attempts
	// and backoffs included: grpcmw reports one EventCall per call, with
	// its duration and final error (for meshless.call.duration).
	KindCall
	// KindRateLimiter is a rate limiter (package ratelimiter).
	KindRateLimiter
	// KindOutlier is an outlier-ejecting load balancer (package
	// grpcmw/outlier): its events are EventEjected and EventReturned.
	KindOutlier
	// KindHedging is a hedging policy (retry.Hedge).
	KindHedging
	// KindDeadLetter is a dead-letter queue (package deadletter): its
	// rejection is a call deferred, kept to be replayed later.
	KindDeadLetter
)

// String returns "circuit_breaker", "retry", "bulkhead", "timeout", "other",
// "call", "rate_limiter", "outlier", "hedging" or "dead_letter".
func (k Kind) String() string {
	switch k {
	case KindCircuitBreaker:
		return "circuit_breaker"
	case KindRetry:
		return "retry"
	case KindBulkhead:
		return "bulkhead"
	case KindTimeout:
		return "timeout"
	case KindOther:
		return "other"
	case KindCall:
		return "call"
	case KindRateLimiter:
		return "rate_limiter"
	case KindOutlier:
		return "outlier"
	case KindHedging:
		return "hedging"
	case KindDeadLetter:
		return "dead_letter"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Rejection is implemented by the errors a policy returns when it refuses a
// call by itself, without the call reaching the dependency: a circuit breaker
// that is open, a bulkhead that is full. A rejection says nothing about the
// dependency's health, so breakers ignore it and retries never retry it.
//
// The concrete types (circuitbreaker.OpenError, bulkhead's errors) also match
// their package's sentinel with [errors.Is].
type Rejection interface {
	error
	// RejectedBy returns the kind of policy that refused the call.
	RejectedBy() Kind
}

// IsRejection reports whether err, or any error it wraps, is a [Rejection].
// It does not allocate.
func IsRejection(err error) bool {
	_, ok := AsRejection(err)
	return ok
}

// AsRejection returns the first [Rejection] in err's chain (following Unwrap()
// error and Unwrap() []error, as [errors.Is] does).
func AsRejection(err error) (Rejection, bool) {
	for err != nil {
		if r, ok := err.(Rejection); ok {
			return r, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if r, ok := AsRejection(e); ok {
					return r, true
				}
			}
			return nil, false
		default:
			return nil, false
		}
	}
	return nil, false
}

// OptionError reports an invalid option or configuration value. Option is the
// configuration key it belongs to (for example "failureRateThreshold"), so
// that a caller reading YAML can prefix it with the key's path.
type OptionError struct {
	Option  string // the key, as in the YAML configuration
	Value   any    // the value that was refused
	Problem string // what is wrong, e.g. "must be in (0, 100]"
}

func (e *OptionError) Error() string {
	return e.Option + ": " + e.Problem + ", got " + formatValue(e.Value)
}

// errors.Is(err, ErrInvalidOption) is true for every *OptionError.
var ErrInvalidOption = errors.New("invalid option")

// Is reports whether target is [ErrInvalidOption].
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }
