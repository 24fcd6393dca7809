package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// wired is a gate whose refusals reach the caller as its transport's
// rejection errors. It keeps the wire error of the last refusal: a policy
// returns one error value per kind of refusal (a breaker one per state), so
// while it keeps refusing, every refusal reuses one wire error and refusing
// does not allocate. Its Enter and Exit are its gate's, but for the
// refusals: a pipeline calls the gate's own (pipeline.Wrapper,
// pipeline.Forwarder), and w's Refused on a refusal.
type wired struct {
	g    resilience.Gate
	t    Transport
	last atomic.Pointer[wiredRefusal]
}

type wiredRefusal struct{ err, wire error }

func (w *wired) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	ctx, p, err := w.g.Enter(ctx)
	if err != nil {
		return ctx, p, w.wire(err)
	}
	return ctx, p, nil
}

func (w *wired) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return w.g.Exit(ctx, p, r)
}

// ExitsThrough returns the gate whose Exit is w's (pipeline.Forwarder).
func (w *wired) ExitsThrough() resilience.Gate { return w.g }

// EntersThrough returns the gate whose Enter is w's, but for its refusals
// (pipeline.Wrapper).
func (w *wired) EntersThrough() resilience.Gate { return w.g }

// Refused returns the wire error of the gate's refusal err
// (pipeline.Wrapper).
func (w *wired) Refused(err error) error { return w.wire(err) }

func (w *wired) wire(err error) error {
	if last := w.last.Load(); last != nil && last.err == err {
		return last.wire
	}
	r := &wiredRefusal{err: err, wire: w.t.Rejection(err)}
	w.last.Store(r)
	return r.wire
}

// wiredTimed is a wired gate that needs the time (pipeline.TimedGate): the
// check is made once, when it is wired.
type wiredTimed struct {
	wired
	timed pipeline.TimedGate
}

// EnterAt gives now to the gate.
func (w *wiredTimed) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	ctx, p, err := w.timed.EnterAt(ctx, now)
	if err != nil {
		return ctx, p, w.wire(err)
	}
	return ctx, p, nil
}

// wiredEarly is a wired gate that may exit early (a breaker: a half-open
// probe takes a stream's first response as its verdict).
type wiredEarly struct {
	wired
	early pipeline.EarlyGate
}

func (w *wiredEarly) Commit(ctx context.Context, p resilience.Permit, r resilience.Result) bool {
	return w.early.Commit(ctx, p, r)
}

// wiredEarlyTimed is both.
type wiredEarlyTimed struct {
	wiredTimed
	early pipeline.EarlyGate
}

func (w *wiredEarlyTimed) Commit(ctx context.Context, p resilience.Permit, r resilience.Result) bool {
	return w.early.Commit(ctx, p, r)
}

// wire wraps g, keeping the optional interfaces it has (pipeline.TimedGate,
// pipeline.EarlyGate) and only those.
func wire(g resilience.Gate, t Transport) resilience.Gate {
	e, early := g.(pipeline.EarlyGate)
	tg, timed := g.(pipeline.TimedGate)
	switch {
	case early && timed:
		w := &wiredEarlyTimed{wiredTimed: wiredTimed{timed: tg}, early: e}
		w.g, w.t = g, t
		return w
	case early:
		w := &wiredEarly{early: e}
		w.g, w.t = g, t
		return w
	case timed:
		w := &wiredTimed{timed: tg}
		w.g, w.t = g, t
		return w
	}
	return &wired{g: g, t: t}
}

// throttleGate is the adaptive throttler beside the circuit breaker of the
// same key. While the breaker is not closed (open, half-open: it already
// holds the calls back, and lets its probes through to learn whether the
// backend is back) the throttler stands aside: it admits the attempt and
// counts nothing. When the breaker closes again, its probes having passed,
// the throttler starts afresh: it does not hold back, as after an overload,
// a backend the probes just showed healthy — whoever sent them: in cluster
// mode another instance's probes may close the breaker while none of this
// instance's calls reached the throttler since the open (rejected by the
// breaker before it), so the gate follows the breaker's count of closes
// (breakerhooks.Reclosed), not the calls it saw stand aside.
type throttleGate struct {
	t        *throttler.Throttler
	clock    resilience.Clock
	breaker  *circuitbreaker.Breaker // nil when the key has none
	reclosed *atomic.Uint64          // the breaker's closes; nil without one
	seen     atomic.Uint64           // the closes the throttler has started afresh after
}

// newThrottleGate is t's gate beside b (nil: none).
func newThrottleGate(t *throttler.Throttler, clock resilience.Clock, b *circuitbreaker.Breaker) *throttleGate {
	g := &throttleGate{t: t, clock: clock, breaker: b}
	if b != nil {
		g.reclosed = breakerhooks.Reclosed(b)
		g.seen.Store(g.reclosed.Load())
	}
	return g
}

func (g *throttleGate) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return g.EnterAt(ctx, g.clock.Now())
}

func (g *throttleGate) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return g.t.Exit(ctx, p, r)
}

// ExitsThrough returns the throttler, whose Exit is g's (pipeline.Forwarder).
func (g *throttleGate) ExitsThrough() resilience.Gate { return g.t }
