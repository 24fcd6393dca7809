// Package breakerhooks gives the engine what package circuitbreaker keeps
// unexported: a breaker's slow-call threshold, read without copying its
// configuration. It imports nothing of meshless, so that package
// circuitbreaker can set the hook (in its init) without an import cycle.
package breakerhooks

import "time"

// SlowThreshold returns the current slow-call duration threshold of b, a
// *circuitbreaker.Breaker (it follows Reconfigure), and whether b records
// each call's events (an observer, which is told every call's duration).
var SlowThreshold func(b any) (threshold time.Duration, observed bool)
