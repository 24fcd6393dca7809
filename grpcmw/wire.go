package grpcmw

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
	"github.com/meshless/meshless/timeout"
)

// The google.rpc.ErrorInfo that marks meshless's own rejections on the wire.
const (
	// ErrorDomain is the ErrorInfo domain of meshless's rejections.
	ErrorDomain = grpcwire.ErrorDomain
	// ReasonCircuitOpen marks a call a circuit breaker rejected (UNAVAILABLE).
	ReasonCircuitOpen = resilience.ReasonCircuitOpen
	// ReasonBulkheadFull marks a call a bulkhead rejected (RESOURCE_EXHAUSTED).
	ReasonBulkheadFull = resilience.ReasonBulkheadFull
	// ReasonRateLimited marks a call a rate limiter rejected
	// (RESOURCE_EXHAUSTED).
	ReasonRateLimited = resilience.ReasonRateLimited
	// ReasonThrottled marks a call the adaptive throttler rejected locally
	// (RESOURCE_EXHAUSTED): the backend had refused too many recent requests.
	ReasonThrottled = resilience.ReasonThrottled
	// PushbackTrailer is the trailer in which a server asks the client to wait
	// before retrying (gRFC A6), in milliseconds; a negative value asks it not
	// to retry.
	PushbackTrailer = "grpc-retry-pushback-ms"
	// PreviousAttemptsHeader is the header a retry attempt carries (gRFC A6):
	// the number of attempts made before it, "1" on the second attempt. The
	// first attempt does not carry it.
	PreviousAttemptsHeader = "grpc-previous-rpc-attempts"
)

// RejectionError is a local rejection as a gRPC status error: status.Code
// gives UNAVAILABLE (breaker) or RESOURCE_EXHAUSTED (bulkhead, rate
// limiter, adaptive throttler), the status carries a google.rpc.ErrorInfo
// with the reason, and errors.Is matches the policy's sentinel
// (circuitbreaker.ErrOpen, bulkhead.ErrFull, ratelimiter.ErrLimited,
// throttler.ErrThrottled). It is a
// resilience.Rejection, so no retry policy retries it, here or, through the
// ErrorInfo, one hop up.
type RejectionError struct {
	st  *status.Status
	err error // the policy's own error
}

func (e *RejectionError) Error() string { return e.st.Message() }

// GRPCStatus returns the status with its ErrorInfo.
func (e *RejectionError) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the policy's error (an *circuitbreaker.OpenError or a
// *bulkhead.FullError).
func (e *RejectionError) Unwrap() error { return e.err }

func newRejection(err error) *RejectionError {
	var st *status.Status
	if r, ok := resilience.AsRejection(err); ok {
		st = grpcwire.Status(r.RejectedBy(), err.Error(), rejectionMetadata(r))
	} else {
		st = status.New(codes.Unavailable, err.Error())
	}
	return &RejectionError{st: st, err: err}
}

// rejectionMetadata is the ErrorInfo metadata of a rejection: the name of
// the policy instance that refused, and a breaker's state.
func rejectionMetadata(r resilience.Rejection) map[string]string {
	switch e := r.(type) {
	case *circuitbreaker.OpenError:
		return map[string]string{"name": e.Name, "state": e.State.String()}
	case *bulkhead.FullError:
		return map[string]string{"name": e.Name}
	case *ratelimiter.LimitedError:
		return map[string]string{"name": e.Name}
	case *throttler.RejectedError:
		return map[string]string{"name": e.Name}
	case *deadletter.DeferredError:
		return map[string]string{"key": e.Key, "id": e.ID}
	}
	return nil
}

// RejectionReason returns the meshless rejection reason an error carries on
// the wire (ReasonCircuitOpen, ReasonBulkheadFull, ReasonRateLimited,
// ReasonThrottled, or the dead-letter queue's DEFERRED), made here or by a
// downstream service whose error was passed on unchanged; "" otherwise.
func RejectionReason(err error) string {
	if k, ok := relayedKind(err); ok {
		return k.Reason()
	}
	return ""
}

// relayedKind returns the kind of meshless rejection err carries on the wire.
func relayedKind(err error) (resilience.Kind, bool) {
	if err == nil {
		return 0, false
	}
	var re *RejectionError
	if errors.As(err, &re) {
		err = re
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	return grpcwire.Relayed(st)
}

// timeoutError is a [*timeout.Error] as the caller of a gRPC call sees it:
// DEADLINE_EXCEEDED for status.Code, whatever the attempt's own error (a
// reply that came after the deadline, an attempt that failed otherwise while
// its deadline passed), so that the caller's error, its status code and the
// call's error.type agree. It unwraps to the *timeout.Error, and errors.Is
// matches context.DeadlineExceeded and timeout.ErrTimeout.
type timeoutError struct{ err *timeout.Error }

func (e *timeoutError) Error() string { return e.err.Error() }

// GRPCStatus returns DEADLINE_EXCEEDED with the timeout's message.
func (e *timeoutError) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, e.err.Error())
}

// Unwrap returns the *timeout.Error.
func (e *timeoutError) Unwrap() error { return e.err }

// wireError is the error a call returns to its caller: a timeout is
// DEADLINE_EXCEEDED on every reading of it, unless what it cut was a local
// rejection (a bulkhead's queue), which stays that rejection.
func wireError(err error) error {
	if err == nil || resilience.IsRejection(err) {
		return err
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		// A context's own error, met before any stream reported it (a
		// call that ended before it began): the status gRPC gives it,
		// not UNKNOWN, which one hop up counts against this service.
		return status.FromContextError(err).Err()
	}
	var te *timeout.Error
	if errors.As(err, &te) && status.Code(err) != codes.DeadlineExceeded {
		return &timeoutError{te}
	}
	return err
}
