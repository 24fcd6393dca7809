package resilience

import "context"

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
	policies []Policy
	fn       Func
}

// Run runs the rest of the chain with ctx. A policy may call Run more than
// once (a retry) or not at all (a rejection).
func (n Next) Run(ctx context.Context) error {
	if len(n.policies) == 0 {
		if n.fn == nil {
			return nil
		}
		return n.fn(ctx)
	}
	return n.policies[0].Apply(ctx, Next{policies: n.policies[1:], fn: n.fn})
}

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
	policies []Policy
}

// NewChain returns a chain of the given policies, outermost first. Nil
// policies are skipped.
func NewChain(policies ...Policy) Chain {
	ps := make([]Policy, 0, len(policies))
	for _, p := range policies {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return Chain{policies: ps}
}

// Len returns the number of policies in the chain.
func (c Chain) Len() int { return len(c.policies) }

// Execute runs fn under every policy of the chain. It allocates nothing of its
// own; the policies allocate only what they need (a timeout its context).
func (c Chain) Execute(ctx context.Context, fn Func) error {
	return Next{policies: c.policies, fn: fn}.Run(ctx)
}

// Apply runs next under the chain's policies, so a chain is itself a [Policy]
// and chains nest.
func (c Chain) Apply(ctx context.Context, next Next) error {
	if len(c.policies) == 0 {
		return next.Run(ctx)
	}
	return c.Execute(ctx, next.Run)
}
