package circuitbreaker

import (
	"context"
	"time"

	"github.com/meshless/meshless/resilience"
)

// This file holds the hooks through which cluster mode (package cluster)
// shares a breaker's decisions with other instances. None of them is on the
// call path: a call that succeeds reads nothing here and takes no lock.

// Coordination is how a breaker works as part of a cluster; see
// [Breaker.Coordinate]. A nil Coordination is a breaker on its own.
type Coordination struct {
	// OnTransition, when set, is called after each state change the breaker
	// makes by itself (its thresholds, its timers, its probes), with the
	// breaker's lock released, from the goroutine that caused the change —
	// often a caller's. It must not block and must not call back into the
	// breaker synchronously. Manual changes (ForceOpen, Reset, …) and those
	// made through [Breaker.OpenRemote] and [Breaker.CloseRemote] are not
	// reported.
	OnTransition func(b *Breaker, from, to State, reason Reason)
	// LeaseProbes makes each HALF_OPEN period start with no probes to hand
	// out: calls are rejected until [Breaker.GrantProbes] grants some, and the
	// probes decide once all those granted have reported.
	LeaseProbes bool
	// ClusterDecides stops the breaker's own window from opening it: only
	// [Breaker.Trip] (a decision on the cluster's counts) or
	// [Breaker.OpenRemote] does. Half-open probes still decide locally.
	ClusterDecides bool
}

// Coordinate sets how the breaker works with a cluster; nil returns it to
// working alone. Turning LeaseProbes off while the breaker is half-open
// grants it every probe it has not been granted, so a breaker never waits
// on a cluster that went away.
func (b *Breaker) Coordinate(c *Coordination) {
	b.coord.Store(c)
	if c == nil || !c.LeaseProbes {
		b.GrantProbes(b.config().PermittedNumberOfCallsInHalfOpenState)
	}
}

func (b *Breaker) clusterDecides() bool {
	co := b.coord.Load()
	return co != nil && co.ClusterDecides
}

// Window is a breaker's state and counts at one moment, as
// [Breaker.Window] reads them for cluster mode.
type Window struct {
	State State
	// Calls, Failures and Slow are the counts of the sliding window in the
	// CLOSED and METRICS_ONLY states; zero in the others.
	Calls, Failures, Slow int64
	// Since is when the current state began, by the breaker's clock.
	Since time.Time
	// Until is when an OPEN breaker moves to HALF_OPEN; zero otherwise.
	Until time.Time
	// Reopens counts the consecutive re-opens that led to this state.
	Reopens int
	// Granted is the probes granted so far to a HALF_OPEN breaker that
	// leases them.
	Granted int
}

// Window reads the breaker's state and window counts. It takes the breaker's
// lock briefly: call it off the call path (cluster mode calls it once per
// sync interval).
func (b *Breaker) Window() Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.cur.Load()
	w := Window{State: p.state, Since: p.since, Until: p.until, Reopens: p.reopens, Granted: p.granted}
	if p.state == StateClosed || p.state == StateMetricsOnly {
		n := p.win.snapshot(b.config().clock.Now())
		w.Calls, w.Failures, w.Slow = n.calls, n.failures, n.slow
	}
	return w
}

// Trip opens a CLOSED breaker as if its window had crossed a threshold, for
// a decision taken on the cluster's counts: the open wait is the breaker's
// own and OnTransition is told, like any change the breaker makes itself. It
// reports whether the breaker opened.
func (b *Breaker) Trip(reason Reason) bool {
	var ev resilience.Event
	b.mu.Lock()
	if p := b.cur.Load(); p.state == StateClosed {
		ev = b.transitionLocked(p, StateOpen, reason, 0)
	}
	b.mu.Unlock()
	b.emit(context.Background(), ev)
	return ev.Type != 0
}

// OpenRemote opens the breaker for wait because another instance opened the
// same key: from CLOSED or HALF_OPEN, or, when OPEN, to re-time its wait (so
// that every instance probes at once). reopens is carried on, so the next
// waits grow as the opener's do. DISABLED, FORCED_OPEN and METRICS_ONLY are
// left alone. Observers see the transition; OnTransition is not told. It
// reports whether the state changed (a re-timed OPEN breaker reports false).
func (b *Breaker) OpenRemote(wait time.Duration, reopens int, reason Reason) bool {
	if wait <= 0 {
		return false
	}
	var ev resilience.Event
	b.mu.Lock()
	switch p := b.cur.Load(); p.state {
	case StateClosed, StateHalfOpen, StateOpen:
		ev = b.transitionWaitLocked(p, StateOpen, reason, max(reopens, 0), wait)
	}
	b.mu.Unlock()
	if ev.From == ev.To {
		return false
	}
	if b.rec != nil {
		b.rec.Record(context.Background(), ev)
	}
	return true
}

// CloseRemote closes an OPEN or HALF_OPEN breaker because another
// instance's probes succeeded. Observers see the transition; OnTransition is
// not told. It reports whether the state changed.
func (b *Breaker) CloseRemote() bool {
	var ev resilience.Event
	b.mu.Lock()
	switch p := b.cur.Load(); p.state {
	case StateOpen, StateHalfOpen:
		ev = b.transitionLocked(p, StateClosed, ReasonProbesSucceeded, 0)
	}
	b.mu.Unlock()
	if ev.Type == 0 {
		return false
	}
	if b.rec != nil {
		b.rec.Record(context.Background(), ev)
	}
	return true
}

// GrantProbes lets a HALF_OPEN breaker that leases its probes hand out up to
// n more, never more in all than permittedNumberOfCallsInHalfOpenState. It
// returns how many it granted: 0 when the breaker is not half-open or not
// leasing.
func (b *Breaker) GrantProbes(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.cur.Load()
	if p.state != StateHalfOpen || !p.leased || n <= 0 {
		return 0
	}
	g := min(n, b.config().PermittedNumberOfCallsInHalfOpenState-p.granted)
	if g <= 0 {
		return 0
	}
	p.granted += g
	p.permits += g
	return g
}
