// Package timeouthooks gives internal/deadline what package timeout keeps
// unexported: whether a timeout only observes, and its per-call event. It
// imports nothing of meshless, so that package timeout can set the hooks
// (in its init) without importing internal/deadline, which imports it.
package timeouthooks

import (
	"context"
	"time"
)

var (
	// Observes reports whether t, a *timeout.Timeout, only observes
	// (timeout.WithObserve).
	Observes func(t any) bool
	// Reports reports whether t's per-call events are heard (it has an
	// observer): Report does nothing otherwise.
	Reports func(t any) bool
	// Report records t's per-call event: the call took d, and timedOut
	// says whether t's deadline ended it (or, observing, would have).
	Report func(ctx context.Context, t any, d time.Duration, timedOut bool)
)
