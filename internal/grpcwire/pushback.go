package grpcwire

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/internal/pushback"
)

// PushbackTrailer is the trailer in which a server asks the client to wait
// before retrying (gRFC A6), in milliseconds; a negative value asks it not
// to retry. It is grpcmw.PushbackTrailer.
const PushbackTrailer = "grpc-retry-pushback-ms"

// Pushback reads a server's grpc-retry-pushback-ms trailer (gRFC A6): a
// delay, or a negative one, which means "do not retry", for a value that is
// not a plain decimal integer in [0, 2^31-1] ("-1", "+5", " 5", "5.5",
// "soon", a value past int32) and for a trailer sent more than once. Leading
// zeros are read, as grpc-go reads them.
func Pushback(md metadata.MD) (time.Duration, bool) {
	vs := md.Get(PushbackTrailer)
	switch len(vs) {
	case 0:
		return 0, false
	case 1:
	default:
		return -1, true
	}
	v := vs[0]
	if v == "" {
		return -1, true
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return -1, true
		}
	}
	ms, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return -1, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// ContextStatus returns err, a context's own error (the caller's cancel
// or deadline, met where no gRPC stream reported it) as the status gRPC
// gives it, CANCELLED or DEADLINE_EXCEEDED: status.Code of the bare error
// is UNKNOWN, which one hop up counts against this service.
func ContextStatus(err error) error {
	if err == context.Canceled || err == context.DeadlineExceeded {
		return status.FromContextError(err).Err()
	}
	return err
}

// WithPushback attaches the pushback of an attempt's trailer, if it holds
// one ([Pushback]), to the attempt's error.
func WithPushback(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	if d, ok := Pushback(trailer); ok {
		return pushback.With(err, d)
	}
	return err
}
