package outlier

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The google.rpc.ErrorInfo that marks meshless's rejections on the wire: a
// RESOURCE_EXHAUSTED that carries one of these reasons in this domain comes
// from a busy server, not a broken one, and never counts toward ejection.
const (
	errorDomain        = "meshless.dev"
	reasonBulkheadFull = "BULKHEAD_FULL"
	reasonRateLimited  = "RATE_LIMITED"
	reasonThrottled    = "THROTTLED"
)

// result is how one call counts for ejection.
type result uint8

const (
	resultSuccess result = iota
	resultFailure
	resultIgnored
)

// classifier maps a call's error to its result, with the same rules as the
// circuit breaker.
type classifier struct {
	failure uint32 // bit i set: code i is a failure
}

func newClassifier(failure []codes.Code) classifier {
	return classifier{failure: codeSet(failure)}
}

// classify: nil is a success; CANCELLED and a meshless BULKHEAD_FULL,
// RATE_LIMITED or THROTTLED rejection are ignored; a failure code or an error that is not
// a gRPC status is a failure; every other code (NOT_FOUND…) is a success.
func (c classifier) classify(err error) result {
	if err == nil {
		return resultSuccess
	}
	var code codes.Code
	switch {
	case errors.Is(err, context.Canceled):
		return resultIgnored
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	default:
		st, ok := status.FromError(err)
		if !ok {
			return resultFailure
		}
		code = st.Code()
		if code == codes.ResourceExhausted && busy(st) {
			return resultIgnored
		}
	}
	if code == codes.Canceled {
		return resultIgnored
	}
	if code > 16 || c.failure&(1<<code) != 0 {
		return resultFailure
	}
	return resultSuccess
}

// busy reports whether st carries meshless's BULKHEAD_FULL or RATE_LIMITED
// reason.
func busy(st *status.Status) bool {
	for _, d := range st.Proto().GetDetails() {
		var info errdetails.ErrorInfo
		if d.MessageIs(&info) && d.UnmarshalTo(&info) == nil && info.GetDomain() == errorDomain &&
			(info.GetReason() == reasonBulkheadFull || info.GetReason() == reasonRateLimited || info.GetReason() == reasonThrottled) {
			return true
		}
	}
	return false
}
