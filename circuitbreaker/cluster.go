package circuitbreaker

import (
	"context"
	"time"

	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience"
)

// This file holds the hooks through which cluster mode (package cluster)
// shares a breaker's decisions with other instances, reached through
// internal/coord so that they stay out of this package's API. None of them
// is on the call path: a call that succeeds reads nothing here and takes no
// lock.

func init() {
	coord.Register(func(b any) coord.Link { return (*link)(b.(*Breaker)) })
}

// link is a Breaker as cluster mode reaches it.
type link Breaker

func (l *link) Coordinate(c *coord.Coordination) { (*Breaker)(l).coordinate(c) }
func (l *link) Window() coord.Window             { return (*Breaker)(l).window() }
func (l *link) Trip(reason uint8) bool           { return (*Breaker)(l).trip(Reason(reason)) }
func (l *link) CloseRemote() bool                { return (*Breaker)(l).closeRemote() }
func (l *link) GrantProbes(n int) int            { return (*Breaker)(l).grantProbes(n) }
func (l *link) ReturnProbes() int                { return (*Breaker)(l).returnProbes() }
func (l *link) OpenRemote(wait time.Duration, reopens int, reason uint8) bool {
	return (*Breaker)(l).openRemote(wait, reopens, Reason(reason))
}

// Coordinate sets how the breaker works with a cluster; nil returns it to
// working alone. Turning LeaseProbes off while the breaker is half-open
// grants it every probe it has not been granted, so a breaker never waits
// on a cluster that went away.
func (b *Breaker) coordinate(c *coord.Coordination) {
	b.coord.Store(c)
	if c == nil || !c.LeaseProbes {
		b.grantProbes(b.config().PermittedNumberOfCallsInHalfOpenState)
	}
}

func (b *Breaker) clusterDecides() bool {
	co := b.coord.Load()
	return co != nil && co.ClusterDecides
}

// Window reads the breaker's state and window counts. It takes the breaker's
// lock briefly: call it off the call path (cluster mode calls it once per
// sync interval).
func (b *Breaker) window() coord.Window {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.cur.Load()
	w := coord.Window{State: uint8(p.state), Since: p.since, Until: p.until, Reopens: p.reopens, Granted: p.granted,
		Rejected: p.notPermitted.Load()}
	if p.leased {
		w.Leased, w.Out = true, p.granted-p.permits
	}
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
func (b *Breaker) trip(reason Reason) bool {
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
func (b *Breaker) openRemote(wait time.Duration, reopens int, reason Reason) bool {
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
	b.tellClosed(ev)
	return true
}

// CloseRemote closes an OPEN or HALF_OPEN breaker because another
// instance's probes succeeded. Observers see the transition; OnTransition is
// not told. It reports whether the state changed.
func (b *Breaker) closeRemote() bool {
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
	b.tellClosed(ev)
	return true
}

// GrantProbes lets a HALF_OPEN breaker that leases its probes hand out up to
// n more, never more in all than permittedNumberOfCallsInHalfOpenState. It
// returns how many it granted: 0 when the breaker is not half-open or not
// leasing.
func (b *Breaker) grantProbes(n int) int {
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

// ReturnProbes takes back the probes granted to a HALF_OPEN breaker that
// leases them, when it has handed out none of them, and returns how many.
func (b *Breaker) returnProbes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.cur.Load()
	if p.state != StateHalfOpen || !p.leased || p.permits != p.granted {
		return 0
	}
	n := p.permits
	p.permits, p.granted = 0, 0
	return n
}
