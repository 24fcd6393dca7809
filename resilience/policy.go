package resilience

import (
	"context"
	"time"

	"github.com/meshless/meshless/internal/timely"
)

// Func is the call that policies protect.
type Func func(ctx context.Context) error

// Policy is one resilience pattern wrapped around a call.
//
// Apply runs next, the rest of the chain, under the policy: a breaker asks for
// a permit first and records the outcome after, a retry may run next several
// times, a timeout runs it with a shorter context. A policy that refuses the
// call returns a [Rejection] without running next.
//
// Implementations must be safe for concurrent use.
type Policy interface {
	Apply(ctx context.Context, next Next) error
}

// PolicyFunc adapts a function to a [Policy].
type PolicyFunc func(ctx context.Context, next Next) error

// Apply calls f(ctx, next).
func (f PolicyFunc) Apply(ctx context.Context, next Next) error { return f(ctx, next) }

// Next is the rest of a chain: the policies inside the current one, then the
// call. It is a small value, passed by value, so running a chain does not
// allocate.
type Next struct {
	// The fields fit in registers beside a context, so that a policy's
	// Apply gets its Next without a copy through memory.
	l       *link // the rest's first policy; nil: the call alone
	fn      Func
	entered time.Time // see Entered; zero when the policy outside passed none
}

// Run runs the rest of the chain with ctx. A policy may call Run more than
// once (a retry) or not at all (a rejection).
func (n *Next) Run(ctx context.Context) error {
	return n.RunAt(ctx, time.Time{})
}

// RunAt is [Next.Run] for a policy that has just read the clock: now, a
// reading of the system clock ([time.Now]), is passed to the next policy as
// the time it was entered (see [Next.Entered]), so that it need not read the
// clock again — a circuit breaker's reading of a call's start becomes the
// start of the per-attempt timeout inside it, and a call reads the clock
// once where each policy read it before. Pass only a reading of the real
// clock taken with nothing between it and RunAt that may wait (a bulkhead
// that queued a call calls Run); the zero time passes none.
func (n *Next) RunAt(ctx context.Context, now time.Time) error {
	l := n.l
	if l == nil {
		if n.fn == nil {
			return nil
		}
		return n.fn(ctx)
	}
	return l.p.Apply(ctx, Next{l: l.next, fn: n.fn, entered: now})
}

// Entered returns when the current policy — the one whose Apply received
// this Next — was entered, as the policy outside it read the system clock
// and passed it with [Next.RunAt], and whether it passed one. A policy that
// needs the time a call starts (a breaker, a timeout) takes it instead of
// reading the clock, when its own clock is the system clock; a policy that
// does not wait passes it on with RunAt, and one that waited does not.
func (n *Next) Entered() (time.Time, bool) { return n.entered, !n.entered.IsZero() }

// Chain composes policies in the order given: the first is the outermost.
// The zero Chain runs the call alone. A Chain is immutable and safe for
// concurrent use.
//
// meshless's default order for a gRPC client, outer to inner, is
//
//	overall timeout → retry (or hedging) → circuit breaker → rate limiter → bulkhead → per-attempt timeout → call
//
// (see docs/order.md for why). Chain itself imposes no order.
type Chain struct {
	head *link // nil for the zero Chain
}

// link is a chain's policy and the rest of the chain inside it: a policy's
// Next points to its link, one load from the policy it runs (a slice and an
// index took two, and a word more in every Next).
type link struct {
	p    Policy
	next *link
}

// NewChain returns a chain of the given policies, outermost first. Nil
// policies are skipped.
//
// A circuit breaker on the system clock with a timeout inside it, and
// between them nothing but a fixed bulkhead without an observer or a
// maxWaitDuration, or a rate limiter without a timeoutDuration (neither
// makes a call wait), counts a success that came while the timeout's
// deadline was live without reading the clock at its end, when the timeout
// is at most half its slow-call threshold: the call took less than the
// timeout, so it is not slow (docs/circuitbreaker.md).
func NewChain(policies ...Policy) Chain {
	policies = timely.Tellers(policies, func(p any) (Policy, bool) { q, ok := p.(Policy); return q, ok })
	var head *link
	for i := len(policies) - 1; i >= 0; i-- {
		if p := policies[i]; p != nil {
			head = &link{p: p, next: head}
		}
	}
	return Chain{head: head}
}

// Len returns the number of policies in the chain.
func (c Chain) Len() int {
	n := 0
	for l := c.head; l != nil; l = l.next {
		n++
	}
	return n
}

// Execute runs fn under every policy of the chain. It allocates nothing of its
// own; the policies allocate only what they need (a timeout its context).
func (c Chain) Execute(ctx context.Context, fn Func) error {
	// Run's first step, from Execute's frame: one frame less between the
	// caller and fn (docs/benchmarks/b4-parts.md, the depth run).
	if l := c.head; l != nil {
		return l.p.Apply(ctx, Next{l: l.next, fn: fn})
	}
	if fn == nil {
		return nil
	}
	return fn(ctx)
}

// Apply runs next under the chain's policies, so a chain is itself a [Policy]
// and chains nest.
func (c Chain) Apply(ctx context.Context, next Next) error {
	if c.head == nil {
		return next.RunAt(ctx, next.entered)
	}
	// The chain's first policy is entered when the chain is.
	n := Next{l: c.head, fn: next.Run}
	return n.RunAt(ctx, next.entered)
}
