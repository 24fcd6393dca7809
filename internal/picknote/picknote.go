package picknote

import (
	"context"
	"time"
)

// Endpoint is what a picker notes: the endpoint an attempt was picked to.
type Endpoint interface {
	// Took counts one call to the endpoint, which ended with err after
	// took, as slow or not.
	Took(err error, took time.Duration)
}

// Note is an attempt's context, with the endpoint its last pick chose. It
// is made once per attempt and never reused: gRPC, or an interceptor, may
// keep an attempt's context after the attempt.
//
// The pick and Took run on the attempt's goroutine (a unary call picks on
// its caller's goroutine, Done included, before the invoker returns), so
// the endpoint needs no synchronisation.
type Note struct {
	context.Context
	picked Endpoint
}

// key is the Note's context key.
type key struct{}

// New returns a note for an attempt with ctx.
func New(ctx context.Context) *Note { return &Note{Context: ctx} }

// Value returns n for the note's key, else the value of its parent context.
func (n *Note) Value(k any) any {
	if _, ok := k.(key); ok {
		return n
	}
	return n.Context.Value(k)
}

// From returns the nearest note in ctx, and nil when it holds none.
func From(ctx context.Context) *Note {
	n, _ := ctx.Value(key{}).(*Note)
	return n
}

// Picked notes the endpoint the attempt was picked to. gRPC may pick again
// within one attempt (a transparent retry of a stream that no server
// accepted): the last pick's endpoint is the one the attempt ran on.
func (n *Note) Picked(e Endpoint) { n.picked = e }

// Took passes the attempt's error and duration to the endpoint of its last
// pick, if one was noted.
func (n *Note) Took(err error, took time.Duration) {
	if n.picked != nil {
		n.picked.Took(err, took)
	}
}
