package breakerhooks

import (
	"sync/atomic"
	"time"
)

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

// Reclosed returns the count of b's moves to CLOSED from OPEN, HALF_OPEN
// or FORCED_OPEN (b a *circuitbreaker.Breaker), however they came: its own
// probes, another instance's close in cluster mode, a manual Reset. It is
// counted before the state changes, so that a call that sees the breaker
// CLOSED sees the count of that close too.
var Reclosed func(b any) *atomic.Uint64
