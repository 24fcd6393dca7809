package engine

import (
	"context"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Transport is what a transport (grpcmw, httpmw) supplies to the engine:
// how to read an attempt's result and how to put the engine's errors on its
// wire. Everything else — the order, the policies, the table — is the
// engine's. A Transport must be safe for concurrent use.
type Transport interface {
	// Code returns the status code an attempt's error carries (a gRPC code,
	// an HTTP status), and false for an error that carries none (a
	// transport failure: a failure whatever the configuration lists). The
	// end of the caller's context is a code too: gRPC's CANCELLED and
	// DEADLINE_EXCEEDED.
	Code(err error) (uint32, bool)
	// Relayed returns the kind of the meshless rejection that err carries
	// from a downstream service, passed on unchanged.
	Relayed(err error) (resilience.Kind, bool)
	// Overloaded reports whether err says the backend sheds load
	// (RESOURCE_EXHAUSTED; HTTP 429 and 503): a refusal for the adaptive
	// throttler, whatever the breaker's classification says.
	Overloaded(err error) bool
	// ErrorType names a call's error for metrics (OpenTelemetry's
	// error.type) when it is not a local rejection.
	ErrorType(err error) string
	// Rejection returns a gate's refusal (a resilience.Rejection) as the
	// transport's caller sees it. The engine calls it once per refusal
	// value and reuses its result.
	Rejection(err error) error
	// Final returns a call's error as its caller sees it (grpcmw makes a
	// timeout DEADLINE_EXCEEDED on every reading). The engine calls it with
	// an error only: a call that succeeded is nil on every transport.
	Final(err error) error
	// Mark returns ctx for an attempt that n attempts came before (n ≥ 1):
	// gRFC A6's grpc-previous-rpc-attempts header.
	Mark(ctx context.Context, n int) context.Context
}

// Classer is a Transport whose codes have classes: a code that no list of
// the configuration names is read as the code of its class when it has one
// (HTTP: an unregistered status as the x00 of its class, RFC 9110 §15).
type Classer interface {
	// Class returns the code that stands for code when no list names
	// code itself, and false when code stands for itself.
	Class(code uint32) (uint32, bool)
}

// Attempt is one attempt of a call, as a transport makes it.
type Attempt interface {
	// Attempt makes attempt n (from 1) with ctx. A hedged call makes its
	// copies concurrently, each with its own n.
	Attempt(ctx context.Context, n int) error
}

// Timed is an Attempt that is told how long each of its attempts took,
// when the engine's Options.TimedAttempts is set: the time from the
// attempt's start (before its gates) to the engine's reading of its end,
// the readings every gate and the call's duration take too. It is told of
// each attempt of a unary call that ran, each hedged copy included (not of
// one its gates refused, nor of one that panicked), on the attempt's
// goroutine, once Attempt has returned err.
type Timed interface {
	Attempt
	Took(n int, err error, took time.Duration)
}

// tellTook tells a, if it is Timed, that attempt n ended with err after d.
func tellTook(a Attempt, n int, err error, d time.Duration) {
	if t, ok := a.(Timed); ok {
		t.Took(n, err, d)
	}
}
