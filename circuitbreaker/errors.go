package circuitbreaker

import (
	"strconv"
	"time"

	"github.com/meshless/meshless/resilience"
)

// ErrOpen is the sentinel of every rejection by a breaker:
// errors.Is(err, ErrOpen) is true for each [*OpenError]. It is itself a
// [resilience.Rejection].
var ErrOpen error = &OpenError{State: StateOpen}

// OpenError is the error of a call that a breaker refused: the breaker is
// open or forced open, or in the half-open state with all its probes taken.
// One OpenError is built per state change and shared by every rejection
// while that state lasts, so rejecting allocates nothing.
type OpenError struct {
	// Name is the breaker's name.
	Name string
	// State is the state that rejected the call: [StateOpen],
	// [StateForcedOpen] or [StateHalfOpen].
	State State
	// Until is when the breaker lets the next probe through, read from the
	// breaker's clock; zero when that is not known (forced open, or waiting
	// for half-open probes).
	Until time.Time
}

func (e *OpenError) Error() string {
	s := "circuit breaker"
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	s += " is " + e.State.String()
	if e.State == StateHalfOpen {
		s += " and all its probes are taken"
	}
	return s
}

// Is reports whether target is [ErrOpen].
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// RejectedBy returns [resilience.KindCircuitBreaker].
func (e *OpenError) RejectedBy() resilience.Kind { return resilience.KindCircuitBreaker }

// RetryAfter returns how long after now the next probe is let through, or 0
// when that is not known or already past. Pass the breaker's clock's time.
func (e *OpenError) RetryAfter(now time.Time) time.Duration {
	if e.Until.IsZero() || !e.Until.After(now) {
		return 0
	}
	return e.Until.Sub(now)
}
