// Package timely lets a circuit breaker in a [resilience.Chain] count a fast
// success without reading the clock at its end, as meshless's engine does
// (docs/circuitbreaker.md): a per-attempt timeout inside the breaker, with
// only policies between it and the breaker that hand an error on unchanged,
// tells the breaker that a call succeeded while the timeout's deadline was
// live (its timer had not fired). The call then took less than the timeout,
// at most half the breaker's slow-call threshold: it is not slow, whatever
// its exact duration.
//
// Packages circuitbreaker, timeout, bulkhead and ratelimiter register their
// policies' parts (in their init); package resilience, building a chain,
// puts a telling copy of such a timeout in the chain. It imports nothing of
// meshless, so that they can import it without an import cycle.
//
// [resilience.Chain]: https://pkg.go.dev/github.com/meshless/meshless/resilience#Chain
package timely
