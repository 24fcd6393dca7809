package circuitbreaker

import "github.com/meshless/meshless/resilience"

// Metrics is a snapshot of a breaker's window, as [Breaker.Metrics] returns
// it.
//
// In the CLOSED and METRICS_ONLY states the counts are those of the sliding
// window; in HALF_OPEN those of the probes so far; in OPEN those that tripped
// the breaker, kept for display. DISABLED and FORCED_OPEN keep none.
type Metrics struct {
	State State
	// FailureRate and SlowCallRate are in percent, or -1 while the counts
	// hold fewer than the minimum number of calls (no decision yet).
	FailureRate, SlowCallRate float64
	// Calls counts the calls that entered the window (ignored ones never do);
	// Calls = SuccessfulCalls + FailedCalls.
	Calls, SuccessfulCalls, FailedCalls int64
	// SlowCalls = SlowSuccessfulCalls + SlowFailedCalls.
	SlowCalls, SlowSuccessfulCalls, SlowFailedCalls int64
	// NotPermittedCalls counts the calls rejected in the current state.
	NotPermittedCalls int64
}

// Metrics returns a snapshot of the breaker's counts and rates.
func (b *Breaker) Metrics() Metrics {
	b.mu.Lock()
	p := b.cur.Load()
	n, minCalls := p.counts(b)
	b.mu.Unlock()
	m := Metrics{
		State:               p.state,
		FailureRate:         -1,
		SlowCallRate:        -1,
		Calls:               n.calls,
		SuccessfulCalls:     n.calls - n.failures,
		FailedCalls:         n.failures,
		SlowCalls:           n.slow,
		SlowSuccessfulCalls: n.slow - n.slowFailures,
		SlowFailedCalls:     n.slowFailures,
		NotPermittedCalls:   p.notPermitted.Load(),
	}
	if n.calls > 0 && n.calls >= minCalls {
		m.FailureRate = float64(n.failures) * 100 / float64(n.calls)
		m.SlowCallRate = float64(n.slow) * 100 / float64(n.calls)
	}
	return m
}

// counts returns the period's counts and the minimum number of calls that
// makes its rates meaningful. Called with b.mu held.
func (p *period) counts(b *Breaker) (counts, int64) {
	switch p.state {
	case StateClosed, StateMetricsOnly:
		return p.win.snapshot(b.config().clock.Now()), int64(b.config().MinimumNumberOfCalls)
	case StateHalfOpen:
		return p.probes, int64(b.config().PermittedNumberOfCallsInHalfOpenState)
	case StateOpen:
		return p.frozen, p.frozenMin
	}
	return counts{}, 1
}

func (b *Breaker) snapshot() resilience.Snapshot {
	m := b.Metrics()
	return resilience.Snapshot{State: m.State, FailureRate: m.FailureRate, SlowCallRate: m.SlowCallRate}
}
