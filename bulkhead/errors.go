package bulkhead

import (
	"strconv"

	"github.com/meshless/meshless/resilience"
)

// ErrFull is the sentinel of every rejection by a bulkhead:
// errors.Is(err, ErrFull) is true for each [*FullError]. It is itself a
// [resilience.Rejection].
var ErrFull error = &FullError{}

// FullError is the error of a call that a bulkhead refused: every permit
// was taken and none came free within maxWaitDuration, or the call's context
// ended while it waited.
//
// A FullError is a [resilience.Rejection]: the call never reached the
// dependency, so a circuit breaker ignores it and a retry never retries it.
// That holds when the wait ended with the caller's context too: the error
// then wraps ctx.Err() as its Cause, so errors.Is(err, context.Canceled) (or
// [context.DeadlineExceeded]) is true as well, but it is still a rejection.
//
// A bulkhead builds the error of the plain "full" case once and returns it
// to every such rejection (an adaptive bulkhead rebuilds it when its limit
// has moved), so rejecting does not allocate; only a rejection with a Cause
// gets an error of its own. Do not modify a FullError you receive.
type FullError struct {
	// Name is the bulkhead's name.
	Name string
	// Limit is the bulkhead's limit when the call was refused (for an
	// adaptive bulkhead, read just after); 0 in [ErrFull].
	Limit int
	// Cause is the caller's context's error when that context ended while
	// the call waited for a permit; nil otherwise.
	Cause error
}

func (e *FullError) Error() string {
	s := "bulkhead"
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	s += " is full"
	if e.Limit > 0 {
		s += " (limit " + strconv.Itoa(e.Limit) + ")"
	}
	if e.Cause != nil {
		s += " and the wait for a permit ended: " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is [ErrFull].
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Unwrap returns the Cause.
func (e *FullError) Unwrap() error { return e.Cause }

// RejectedBy returns [resilience.KindBulkhead].
func (e *FullError) RejectedBy() resilience.Kind { return resilience.KindBulkhead }
