package grpcmw

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// The google.rpc.ErrorInfo that marks meshless's own rejections on the wire.
const (
	// ErrorDomain is the ErrorInfo domain of meshless's rejections.
	ErrorDomain = "meshless.dev"
	// ReasonCircuitOpen marks a call a circuit breaker rejected (UNAVAILABLE).
	ReasonCircuitOpen = "CIRCUIT_OPEN"
	// ReasonBulkheadFull marks a call a bulkhead rejected (RESOURCE_EXHAUSTED).
	ReasonBulkheadFull = "BULKHEAD_FULL"
	// ReasonRateLimited marks a call a rate limiter rejected
	// (RESOURCE_EXHAUSTED).
	ReasonRateLimited = "RATE_LIMITED"
	// PushbackTrailer is the trailer in which a server asks the client to wait
	// before retrying (gRFC A6), in milliseconds; a negative value asks it not
	// to retry.
	PushbackTrailer = "grpc-retry-pushback-ms"
)

// RejectionError is a local rejection as a gRPC status error: status.Code
// gives UNAVAILABLE (breaker) or RESOURCE_EXHAUSTED (bulkhead, rate
// limiter), the status carries a google.rpc.ErrorInfo with the reason, and
// errors.Is matches the policy's sentinel (circuitbreaker.ErrOpen,
// bulkhead.ErrFull, ratelimiter.ErrLimited). It is a
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

// rejectionCache keeps the wire error of the last rejection a policy
// instance made: a breaker shares one *OpenError per state, so while it
// stays open every rejection reuses one RejectionError.
type rejectionCache struct {
	last atomic.Pointer[RejectionError]
}

func (c *rejectionCache) wrap(err error) error {
	if last := c.last.Load(); last != nil && last.err == err {
		return last
	}
	r := newRejection(err)
	c.last.Store(r)
	return r
}

func newRejection(err error) *RejectionError {
	var oe *circuitbreaker.OpenError
	var fe *bulkhead.FullError
	var le *ratelimiter.LimitedError
	var st *status.Status
	switch {
	case errors.As(err, &oe):
		st = withInfo(codes.Unavailable, err.Error(), ReasonCircuitOpen, map[string]string{
			"name": oe.Name, "state": oe.State.String(),
		})
	case errors.As(err, &fe):
		st = withInfo(codes.ResourceExhausted, err.Error(), ReasonBulkheadFull, map[string]string{"name": fe.Name})
	case errors.As(err, &le):
		st = withInfo(codes.ResourceExhausted, err.Error(), ReasonRateLimited, map[string]string{"name": le.Name})
	default:
		st = status.New(codes.Unavailable, err.Error())
	}
	return &RejectionError{st: st, err: err}
}

func withInfo(c codes.Code, msg, reason string, md map[string]string) *status.Status {
	st := status.New(c, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: md}); err == nil {
		return d
	}
	return st
}

// RejectionReason returns the meshless rejection reason an error carries on
// the wire (ReasonCircuitOpen, ReasonBulkheadFull or ReasonRateLimited), made here or by a
// downstream service whose error was passed on unchanged; "" otherwise.
func RejectionReason(err error) string {
	if err == nil {
		return ""
	}
	var re *RejectionError
	if errors.As(err, &re) {
		err = re
	}
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.Unavailable && st.Code() != codes.ResourceExhausted) {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain &&
			(info.GetReason() == ReasonCircuitOpen || info.GetReason() == ReasonBulkheadFull || info.GetReason() == ReasonRateLimited) {
			return info.GetReason()
		}
	}
	return ""
}

// codeOf returns the gRPC code of an attempt's error, and false for an error
// that carries none (a transport error that is not a status).
func codeOf(err error) (codes.Code, bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, true
	case errors.Is(err, context.Canceled):
		return codes.Canceled, true
	}
	if st, ok := status.FromError(err); ok {
		return st.Code(), true
	}
	return codes.Unknown, false
}

// classes maps each code to its outcome for a breaker.
type classes [17]resilience.Outcome

func newClasses(failure, ignored Codes) classes {
	var c classes
	for _, x := range failure {
		c[x] = resilience.Failure
	}
	for _, x := range ignored {
		c[x] = resilience.Ignored
	}
	return c
}

// outcome classifies an attempt's error: a failure code or any error that is
// not a status is a failure, an ignored code, a local rejection or a relayed
// RATE_LIMITED is ignored, every other code (NOT_FOUND…) is a success.
func (c *classes) outcome(err error) resilience.Outcome {
	if err == nil {
		return resilience.Success
	}
	if resilience.IsRejection(err) {
		return resilience.Ignored
	}
	code, ok := codeOf(err)
	if !ok {
		return resilience.Failure
	}
	if code == codes.ResourceExhausted && RejectionReason(err) == ReasonRateLimited {
		// A rate limit one hop down says nothing of the backend's health.
		return resilience.Ignored
	}
	if int(code) < len(c) {
		return c[code]
	}
	return resilience.Failure
}

// pushback reads a server's grpc-retry-pushback-ms trailer: a delay, or a
// negative one (do not retry) for a value that is negative or not a number.
func pushback(md metadata.MD) (time.Duration, bool) {
	vs := md.Get(PushbackTrailer)
	if len(vs) == 0 {
		return 0, false
	}
	ms, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || ms < 0 {
		return -1, true
	}
	if ms > int64(time.Hour/time.Millisecond) {
		ms = int64(time.Hour / time.Millisecond)
	}
	return time.Duration(ms) * time.Millisecond, true
}

// pushbackError carries a server's pushback with an attempt's error to the
// retry policy. It is transparent: status.Code and errors.Is see the error
// it wraps.
type pushbackError struct {
	error
	delay time.Duration
}

func (e *pushbackError) Unwrap() error { return e.error }

// GRPCStatus returns the wrapped error's status.
func (e *pushbackError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.error)
	return st
}

// errorType names an error for metrics: circuit_open or bulkhead_full for a
// local rejection, else the gRPC code's name; "" for nil.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	var re *RejectionError
	if errors.As(err, &re) {
		if errors.Is(re.err, circuitbreaker.ErrOpen) {
			return "circuit_open"
		}
		if errors.Is(re.err, ratelimiter.ErrLimited) {
			return "rate_limited"
		}
		return "bulkhead_full"
	}
	code, _ := codeOf(err)
	return codeName(code)
}
