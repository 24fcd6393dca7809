// Package coord is cluster mode's way into a circuit breaker: the hooks
// package cluster uses to share a breaker's decisions between instances,
// kept out of package circuitbreaker's public API. Package circuitbreaker
// registers the link when it is initialized; States and reasons travel as
// their circuitbreaker.State and circuitbreaker.Reason values.
package coord
