package otelmw

import (
	"context"
	"errors"
	"reflect"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/meshless/meshless/resilience"
)

// The span events, added to the caller's span when it is recording. They
// are on the failure path and may allocate.
const (
	eventRetry     = "meshless.retry"
	eventRejection = "meshless.rejection"
)

// Span event attribute keys (besides those of the metrics).
const (
	attrRetryAttempt    = attribute.Key("meshless.retry.attempt")
	attrRetryBackoff    = attribute.Key("meshless.retry.backoff")
	attrRejectionPolicy = attribute.Key("meshless.rejection.policy")
	attrRejectionReason = attribute.Key("meshless.rejection.reason")
	attrBulkheadWait    = attribute.Key("meshless.bulkhead.wait")
	attrStatusCode      = attribute.Key("rpc.response.status_code")
)

// retryEvent adds "meshless.retry" for a retry about to happen: the number
// of the attempt to come, the backoff before it (seconds), the method, and
// the error that caused it.
func retryEvent(ctx context.Context, method string, e resilience.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, attrRetryAttempt.Int(e.Attempt), attrRetryBackoff.Float64(e.Backoff.Seconds()))
	if method != "" {
		attrs = append(attrs, attrMethod.String(method))
	}
	attrs = appendError(ctx, attrs, e.Err)
	span.AddEvent(eventRetry, trace.WithAttributes(attrs...))
}

// breakerRejectionEvent adds "meshless.rejection" for a call a breaker
// refused: reason "circuit_open", and the state that refused it (open,
// half_open with its probes taken, forced_open).
func breakerRejectionEvent(ctx context.Context, name string, e resilience.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(eventRejection, trace.WithAttributes(
		attrRejectionPolicy.String(resilience.KindCircuitBreaker.String()),
		attrRejectionReason.String(resilience.KindCircuitBreaker.ErrorType()),
		attrBreakerName.String(name),
		attrState.String(stateValue(e.State)),
	))
}

// bulkheadRejectionEvent adds "meshless.rejection" for a call a bulkhead
// refused: reason "bulkhead_full" (no permit came free in time) or
// "context_done" (the caller's context ended while it waited), with the time
// it waited in seconds.
func bulkheadRejectionEvent(ctx context.Context, name string, e resilience.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	reason := resilience.KindBulkhead.ErrorType()
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		reason = "context_done"
	}
	span.AddEvent(eventRejection, trace.WithAttributes(
		attrRejectionPolicy.String(resilience.KindBulkhead.String()),
		attrBulkheadName.String(name),
		attrRejectionReason.String(reason),
		attrBulkheadWait.Float64(e.Duration.Seconds()),
	))
}

// appendError adds error.type and, when err carries a gRPC status,
// rpc.response.status_code. A code no gRPC code has (17 and up, which a
// server may send) is error.type "_OTHER", without a status code, as
// meshless.call.duration records it: the server does not choose the set of
// values. An HTTP call's error (ctx is, or wraps, an
// HTTPCall) that carries a response's status is named as its
// meshless.call.duration names it: error.type is the status ("503"), with
// http.response.status_code; a status outside 100–599 is "_OTHER", without
// one.
func appendError(ctx context.Context, attrs []attribute.KeyValue, err error) []attribute.KeyValue {
	if err == nil {
		return attrs
	}
	if hc, ok := httpCallOf(ctx); ok {
		if s := hc.HTTPResponseStatusCode(err); s != 0 {
			if s < 100 || s > 599 {
				return append(attrs, attrErrorType.String(otherValue))
			}
			return append(attrs, attrErrorType.String(strconv.Itoa(s)), attrHTTPStatus.Int(s))
		}
	}
	if code, ok := codeName(err); ok {
		if code == otherValue {
			return append(attrs, attrErrorType.String(otherValue))
		}
		return append(attrs, attrErrorType.String(code), attrStatusCode.String(code))
	}
	return append(attrs, attrErrorType.String(reflect.TypeOf(err).String()))
}

var grpcCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// codeName names err's gRPC code as grpcmw does for error.type: the
// context's errors are DEADLINE_EXCEEDED and CANCELLED; otherwise the code
// of the first error in the chain with a GRPCStatus method, which is what
// status.FromError reads; "_OTHER" for a code no gRPC code has. otelmw does not import grpc, so it calls
// GRPCStatus().Code() by reflection (on the failure path only).
func codeName(err error) (string, bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "DEADLINE_EXCEEDED", true
	case errors.Is(err, context.Canceled):
		return "CANCELLED", true
	}
	code, ok := statusCode(err)
	if !ok {
		return "", false
	}
	if int(code) < len(grpcCodeNames) {
		return grpcCodeNames[code], true
	}
	return otherValue, true
}

// statusCode returns the code of the first GRPCStatus() in err's chain.
func statusCode(err error) (uint32, bool) {
	for err != nil {
		if m := reflect.ValueOf(err).MethodByName("GRPCStatus"); m.IsValid() &&
			m.Type().NumIn() == 0 && m.Type().NumOut() == 1 {
			st := m.Call(nil)[0]
			if !((st.Kind() == reflect.Pointer || st.Kind() == reflect.Interface) && st.IsNil()) {
				if c := st.MethodByName("Code"); c.IsValid() && c.Type().NumIn() == 0 &&
					c.Type().NumOut() == 1 && c.Type().Out(0).Kind() == reflect.Uint32 {
					return uint32(c.Call(nil)[0].Uint()), true
				}
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if c, ok := statusCode(e); ok {
					return c, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}
