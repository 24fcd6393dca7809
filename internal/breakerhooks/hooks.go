package breakerhooks

import "time"

// SlowThreshold returns the current slow-call duration threshold of b, a
// *circuitbreaker.Breaker (it follows Reconfigure), and whether b records
// each call's events (an observer, which is told every call's duration).
var SlowThreshold func(b any) (threshold time.Duration, observed bool)

// OnClosed makes b, a *circuitbreaker.Breaker, call f each time it moves to
// CLOSED (its probes passed, here or, in cluster mode, on another instance;
// or a manual Reset), from the goroutine that moved it, with no lock held;
// f must not block. It replaces the f set before. Nothing of it is on the
// call path: a breaker that closes replays its key's dead letters without an
// observer, which would hear every call.
var OnClosed func(b any, f func())
