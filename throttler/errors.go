package throttler

import (
	"strconv"

	"github.com/meshless/meshless/resilience"
)

// ErrThrottled is the sentinel of every rejection by a throttler:
// errors.Is(err, ErrThrottled) is true for each [*RejectedError]. It is itself
// a [resilience.Rejection].
var ErrThrottled error = &RejectedError{}

// RejectedError is the error of a request a throttler rejected locally: the
// backend refused too many of the recent ones. A throttler builds it once and
// returns it to every rejection, so rejecting does not allocate; do not
// modify one you receive.
type RejectedError struct {
	// Name is the throttler's name.
	Name string
}

func (e *RejectedError) Error() string {
	s := "throttler"
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	return s + ": the backend refuses too many requests; rejected locally"
}

// Is reports whether target is [ErrThrottled].
func (e *RejectedError) Is(target error) bool { return target == ErrThrottled }

// RejectedBy returns [resilience.KindThrottler].
func (e *RejectedError) RejectedBy() resilience.Kind { return resilience.KindThrottler }
