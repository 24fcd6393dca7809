package resilience

import (
	"context"
	"errors"
	"time"
)

// Gate is a policy in two steps: Enter admits one attempt (or refuses it),
// and Exit is told, exactly once, how the admitted attempt ended. Circuit
// breakers, rate limiters, bulkheads, adaptive throttlers and per-attempt
// timeouts are gates; meshless's engine (the grpcmw and httpmw chains) runs
// them in order around each attempt, and gives every permit back on every
// path, panics included.
//
// Enter returns the context the rest of the attempt runs with (a timeout
// derives one; most gates return ctx unchanged) and a [Permit] that Exit gets
// back. A refusal is a [Rejection]. Exit receives the same ctx that Enter
// received, and returns the error the attempt ends with for the gates
// outside it and the caller: r.Err unchanged, or r.Err wrapped (a timeout
// marks the errors its own deadline caused).
//
// Implementations must be safe for concurrent use and must not block in
// Exit.
type Gate interface {
	Enter(ctx context.Context) (context.Context, Permit, error)
	Exit(ctx context.Context, p Permit, r Result) error
}

// Permit is a gate's admission of one attempt. Its fields belong to the gate
// that issued it; hold pointer-shaped values in them so that building a
// Permit does not allocate.
type Permit struct {
	Ref, Aux any
}

// Result is how an admitted attempt ended, as it is reported to each gate's
// Exit.
type Result struct {
	// Err is the attempt's error; [ErrPanicked] when it panicked.
	Err error
	// Outcome is Err classified by the caller's [Classifier], once for every
	// gate. A panic in the attempt is a [Failure], as Resilience4j counts an
	// exception; a panic in a gate, before the attempt ran, is [Ignored].
	Outcome Outcome
	// Duration is the attempt's own time, from the moment every gate had
	// admitted it: time spent waiting at a gate (a bulkhead's queue) is local
	// and not counted, so it never makes a call "slow".
	Duration time.Duration
	// End is when the attempt ended, read from the pipeline's clock.
	End time.Time
}

// ErrPanicked is the error a [Result] carries when the attempt panicked. The
// panic itself goes on up to the caller unchanged.
var ErrPanicked = errors.New("resilience: the call panicked")
