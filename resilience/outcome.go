package resilience

import (
	"context"
	"errors"
	"strconv"
)

// Outcome is what a finished call means for the health of what it called.
type Outcome uint8

const (
	// Success: the dependency answered; the answer may still be an error that
	// the caller sees (a "not found" is a healthy dependency saying no).
	Success Outcome = iota
	// Failure: the call says the dependency is unhealthy.
	Failure
	// Ignored: neither; the call does not count at all (the caller gave up,
	// or a policy rejected the call locally).
	Ignored
)

// String returns "success", "failure" or "ignored".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignored:
		return "ignored"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Classifier decides the [Outcome] of a finished call from its error.
// It must be safe for concurrent use and must not block.
type Classifier func(err error) Outcome

// DefaultClassifier is the classifier policies use when none is given:
//
//   - nil is a [Success];
//   - a [Rejection] (a local refusal, from this or another policy) and
//     [context.Canceled] are [Ignored];
//   - every other error, [context.DeadlineExceeded] included, is a [Failure].
//
// gRPC clients classify by status code instead; package grpcmw does that.
func DefaultClassifier(err error) Outcome {
	switch {
	case err == nil:
		return Success
	case IsRejection(err), errors.Is(err, context.Canceled):
		return Ignored
	}
	return Failure
}
