package coord

import "time"

// Coordination is how a breaker works as part of a cluster; see
// [Link.Coordinate]. A nil Coordination is a breaker on its own.
type Coordination struct {
	// OnTransition, when set, is called after each state change the breaker
	// makes by itself (its thresholds, its timers, its probes), with the
	// breaker's lock released, from the goroutine that caused the change —
	// often a caller's. b is the *circuitbreaker.Breaker. It must not block
	// and must not call back into the breaker synchronously. Manual changes
	// (ForceOpen, Reset, …) and those made through OpenRemote and
	// CloseRemote are not reported.
	OnTransition func(b any, from, to, reason uint8)
	// LeaseProbes makes each HALF_OPEN period start with no probes to hand
	// out: calls are rejected until GrantProbes grants some, and the probes
	// decide once all those granted have reported.
	LeaseProbes bool
	// ClusterDecides stops the breaker's own window from opening it: only
	// Trip (a decision on the cluster's counts) or OpenRemote does.
	// Half-open probes still decide locally.
	ClusterDecides bool
}

// Window is a breaker's state and counts at one moment.
type Window struct {
	State uint8 // a circuitbreaker.State
	// Calls, Failures and Slow are the counts of the sliding window in the
	// CLOSED and METRICS_ONLY states; zero in the others.
	Calls, Failures, Slow int64
	// Since is when the current state began, by the breaker's clock.
	Since time.Time
	// Until is when an OPEN breaker moves to HALF_OPEN; zero otherwise.
	Until time.Time
	// Reopens counts the consecutive re-opens that led to this state.
	Reopens int
	// Leased reports a HALF_OPEN breaker that leases its probes (it turned
	// HALF_OPEN under a Coordination with LeaseProbes).
	Leased bool
	// Granted is the probes granted so far to a HALF_OPEN breaker that
	// leases them.
	Granted int
	// Out is the probes of Granted handed out so far (not given back by
	// an ignored probe).
	Out int
	// Rejected counts the calls rejected in the current state so far.
	Rejected int64
}

// Link is a breaker's side of cluster mode. None of it is on the call path.
type Link interface {
	// Coordinate sets how the breaker works with a cluster; nil returns it
	// to working alone. Turning LeaseProbes off while the breaker is
	// half-open grants it every probe it has not been granted.
	Coordinate(c *Coordination)
	// Window reads the breaker's state and window counts, under its lock.
	Window() Window
	// Trip opens a CLOSED breaker as if its window had crossed a threshold
	// (a decision on the cluster's counts); OnTransition is told. It reports
	// whether the breaker opened.
	Trip(reason uint8) bool
	// OpenRemote opens the breaker for wait because another instance opened
	// the same key (or re-times an OPEN breaker's wait). It reports whether
	// the state changed.
	OpenRemote(wait time.Duration, reopens int, reason uint8) bool
	// CloseRemote closes an OPEN or HALF_OPEN breaker because another
	// instance's probes succeeded. It reports whether the state changed.
	CloseRemote() bool
	// GrantProbes lets a HALF_OPEN breaker that leases its probes hand out
	// up to n more; it returns how many it granted.
	GrantProbes(n int) int
	// ReturnProbes takes back the probes a HALF_OPEN breaker that leases
	// them was granted, when it has handed out none; it returns how many.
	ReturnProbes() int
}

var of func(b any) Link

// Register is called once, by package circuitbreaker's init, with the
// function that makes a breaker's Link.
func Register(f func(b any) Link) { of = f }

// Of returns the Link of b, a *circuitbreaker.Breaker.
func Of(b any) Link { return of(b) }
