package grpcmw

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// transport is gRPC for the engine: status codes, ErrorInfo rejections, the
// previous-attempts header, DEADLINE_EXCEEDED for timeouts, and the replay
// of deferred calls on the chain's connection (deadletter.go).
type transport struct {
	conn conn
}

// Code returns the gRPC code of an attempt's error, and false for an error
// that carries none (a transport error that is not a status). A code gRPC
// does not define (a server may send any number; grpc-go passes it on) is
// UNKNOWN, as grpc-java and gRPC C-core read it: the
// breaker and the retry classify it as such, as the outlier balancer does.
// The caller gets the code as it came, and ErrorType names it _OTHER.
func (*transport) Code(err error) (uint32, bool) {
	c, ok := codeOf(err)
	if c > codes.Unauthenticated {
		c = codes.Unknown
	}
	return uint32(c), ok
}

func (*transport) Relayed(err error) (resilience.Kind, bool) { return relayedKind(err) }

// Overloaded: RESOURCE_EXHAUSTED, a backend that sheds (or a meshless one
// hop down that rejected).
func (*transport) Overloaded(err error) bool {
	c, ok := codeOf(err)
	return ok && c == codes.ResourceExhausted
}

func (*transport) ErrorType(err error) string {
	c, _ := codeOf(err)
	if c > codes.Unauthenticated {
		// A code gRPC does not define, from the server (any number up to
		// 2^31-1): one value, OpenTelemetry's _OTHER, so that the server
		// does not choose the set of error.type values an observer labels
		// by. The caller still gets the code as it came.
		return otherErrorType
	}
	return config.CodeName(c)
}

// otherErrorType is OpenTelemetry's fallback value of error.type.
const otherErrorType = "_OTHER"

func (*transport) Rejection(err error) error { return newRejection(err) }

func (*transport) Final(err error) error { return wireError(err) }

// Mark sets the grpc-previous-rpc-attempts header of gRFC A6 to n, the
// attempts made before this one, replacing any value the caller's metadata
// had.
func (*transport) Mark(ctx context.Context, n int) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(PreviousAttemptsHeader, strconv.Itoa(n))
	return metadata.NewOutgoingContext(ctx, md)
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
