package timeout

import (
	"context"
	"time"
)

// Plan is a call's two timeouts, the overall one and the per-attempt one,
// applied together so that each attempt runs under one derived context at
// most: its deadline is the earliest of the caller's, the overall and the
// per-attempt, and none is derived when the caller's comes first. A retry
// or a hedge between the attempts asks [Call.Deadline] whether a backoff
// still fits. Either timeout may be nil. The times are given, not read: a
// caller that measures attempts anyway shares its clock reads (they must be
// real time, the time context deadlines are in).
//
// A Plan is a value of two pointers; it is safe for concurrent use.
type Plan struct {
	Attempt, Overall *Timeout
}

// Call is one call's deadlines under a [Plan]. It is a value used by one
// goroutine at a time (concurrent attempts each get their own [AttemptDeadline]).
type Call struct {
	plan      Plan
	start     time.Time
	overallAt time.Time // the overall timeout's deadline; zero without one, or when the caller's comes first
}

// Begin starts a call at now, under ctx, the caller's context.
func (p Plan) Begin(ctx context.Context, now time.Time) Call {
	c := Call{plan: p, start: now}
	if o := p.Overall; o != nil && o.d > 0 {
		at := now.Add(o.d)
		if dl, ok := ctx.Deadline(); !ok || at.Before(dl) {
			c.overallAt = at
		}
	}
	return c
}

// Deadline returns the call's deadline: the overall timeout's, when it
// comes before the caller's (whose own is in its context).
func (c *Call) Deadline() (time.Time, bool) { return c.overallAt, !c.overallAt.IsZero() }

// Attempt starts an attempt at now: it returns ctx (the caller's context,
// or a hedged copy's) with the attempt's deadline — the earliest of ctx's,
// the call's overall deadline and now plus the per-attempt timeout — or ctx
// itself when ctx's deadline comes first, or when the timeouts only observe
// (WithObserve).
func (c *Call) Attempt(ctx context.Context, now time.Time) (context.Context, AttemptDeadline) {
	a := AttemptDeadline{plan: c.plan, parent: ctx, start: now}
	at, scope := c.overallAt, Overall
	if t := c.plan.Attempt; t != nil && t.d > 0 {
		if pa := now.Add(t.d); at.IsZero() || pa.Before(at) {
			at, scope = pa, Attempt
		}
	}
	if at.IsZero() || c.observes() {
		return ctx, a
	}
	if dl, ok := ctx.Deadline(); ok && !at.Before(dl) {
		return ctx, a // the caller's deadline governs
	}
	a.ctx, a.cancel = context.WithDeadline(ctx, at)
	a.at, a.scope = at, scope
	return a.ctx, a
}

func (c *Call) observes() bool {
	return c.plan.Attempt != nil && c.plan.Attempt.observe || c.plan.Overall != nil && c.plan.Overall.observe
}

// AttemptDeadline is one attempt's deadline.
type AttemptDeadline struct {
	plan   Plan
	parent context.Context // the context Attempt was given
	start  time.Time
	ctx    context.Context // derived; nil when none was
	cancel context.CancelFunc
	at     time.Time
	scope  Scope // the timeout whose deadline ctx carries
}

// Release releases the derived context without reporting anything (an
// attempt that panicked). It may be called after End.
func (a *AttemptDeadline) Release() {
	if a.cancel != nil {
		a.cancel()
	}
}

// End ends the attempt at end, with err: it releases the derived context,
// reports the per-attempt timeout's event, and returns err as an [*Error]
// of the timeout whose deadline ended the attempt (per-attempt, or
// overall), or err unchanged. Call it once.
func (a *AttemptDeadline) End(err error, end time.Time) error {
	ctx := a.parent
	if ctx == nil {
		return err // the zero AttemptDeadline
	}
	ours := false
	if a.ctx != nil {
		ours = err != nil && ctx.Err() == nil && (a.ctx.Err() == context.DeadlineExceeded || !end.Before(a.at))
		a.cancel()
	}
	t := a.plan.Attempt
	if t != nil && t.d > 0 {
		d := end.Sub(a.start)
		timedOut := ours && a.scope == Attempt || t.observe && d >= t.d
		t.report(ctx, d, timedOut)
	}
	if !ours {
		return err
	}
	if a.scope == Overall {
		return &Error{Scope: Overall, Timeout: a.plan.Overall.d, Err: err}
	}
	return &Error{Scope: Attempt, Timeout: t.d, Err: err}
}

// End ends the call at end, with err, its final error, and ctx, the
// caller's context: it reports the overall timeout's event and returns err
// as an [*Error] of the overall timeout when the overall deadline ended the
// call (an attempt cut at it, or a wait a gate cut there), or err
// unchanged. Observing (WithObserve), it reports the call timed out when it
// took the timeout or longer, and returns err unchanged.
func (c *Call) End(ctx context.Context, err error, end time.Time) error {
	o := c.plan.Overall
	if o == nil || o.d <= 0 {
		return err
	}
	d := end.Sub(c.start)
	if o.observe {
		o.report(ctx, d, d >= o.d)
		return err
	}
	te, wrapped := asError(err)
	wrapped = wrapped && te.Scope == Overall
	ours := wrapped || err != nil && ctx.Err() == nil && !c.overallAt.IsZero() && !end.Before(c.overallAt)
	o.report(ctx, d, ours)
	if ours && !wrapped {
		return &Error{Scope: Overall, Timeout: o.d, Err: err}
	}
	return err
}

func asError(err error) (*Error, bool) {
	for err != nil {
		if te, ok := err.(*Error); ok {
			return te, true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return nil, false
		}
		err = u.Unwrap()
	}
	return nil, false
}
