package sysclock

import (
	"sync/atomic"
	"time"
)

// Refresh is how much monotonic time an anchor serves before [Now] reads
// time.Now again.
const Refresh = time.Second

// anchor is the last reading of time.Now that Now renewed; nil before the
// first.
var anchor atomic.Pointer[time.Time]

// Now returns the current time, as time.Now does: with a monotonic reading
// outside a synctest bubble, without one inside. It reads the monotonic
// clock only, but once per [Refresh] (one allocation of a time.Time).
func Now() time.Time {
	if a := anchor.Load(); a != nil {
		// A negative d (an anchor from another clock domain) converts to
		// a huge uint64: renewed, as a stale anchor is.
		if d := time.Since(*a); uint64(d) < uint64(Refresh) {
			return a.Add(d)
		}
	}
	return renew()
}

// renew reads time.Now and makes it the anchor.
func renew() time.Time {
	now := time.Now()
	anchor.Store(&now)
	return now
}
