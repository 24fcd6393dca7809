package engine

import (
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/resilience"
)

// This file is the one place where meshless's order is written, for every
// kind of call and every transport:
//
//	overall timeout → retry (or hedging, or retry-budget counting) → circuit breaker → rate limiter → adaptive throttler → bulkhead → per-attempt timeout → the attempt
//
// gates.inOrder builds an attempt's gates, outer to inner; Call (call.go, callpath.go)
// puts the overall timeout and the attempt policy around them, and the
// per-attempt timeout inside them (both applied with one context per
// attempt: deadline.Plan), for unary calls, streams and hedged calls alike;
// a server runs the pipeline alone. A policy joins the order here, once.

// gates are one method's attempt gates, nil when off.
type gates struct {
	breaker, limiter, throttler, bulkhead resilience.Gate
}

// inOrder returns the pipeline of one attempt's gates, in order: circuit breaker →
// rate limiter → adaptive throttler → bulkhead; the per-attempt timeout
// comes next, innermost (Call.Admit, Call.Finish).
//
//   - The rate limiter is inside the breaker, so an open breaker spends no
//     quota, and outside the throttler and the bulkhead, so a call refused by
//     the limit is neither a request to the backend nor holds a slot.
//   - The throttler is inside the breaker (an open breaker spends nothing in
//     it and its rejections are not requests) and outside the bulkhead (what
//     it rejects takes no permit; a bulkhead rejection is not counted by it).
//   - The bulkhead is inside the breaker: an open breaker rejects before a
//     permit is taken, and a full bulkhead is a local event the breaker
//     ignores.
//   - The per-attempt timeout is innermost: a timed-out attempt gives its
//     bulkhead permit back and counts as a breaker failure.
//
// Every permit they hand out is given back by the pipeline on every path,
// panics included.
func (g gates) inOrder(c *classes, clock resilience.Clock) *pipeline.Pipeline {
	p, _ := pipeline.NewPipeline(c.classifier(), clock, g.breaker, g.limiter, g.throttler, g.bulkhead) // nil gates are skipped
	return p
}
