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
