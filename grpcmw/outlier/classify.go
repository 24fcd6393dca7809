package outlier

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/resilience"
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

// classify: nil is a success; CANCELLED and a rejection a meshless server
// relayed that says nothing of its health (resilience.Kind.RelayedOutcome:
// a bulkhead full, a rate limit, a throttle, a deferred call) are ignored; a
// failure code or an error that is not a gRPC status is a failure; every
// other code (NOT_FOUND…) is a success.
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
		if k, ok := grpcwire.Relayed(st); ok && k.RelayedOutcome() == resilience.Ignored {
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
