package deadline

import (
	"context"
	"time"

	"github.com/meshless/meshless/internal/timeouthooks"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/timeout"
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
// Make one with [NewPlan], which reads what its calls need of the timeouts
// (their durations, whether they only observe, whether anyone hears their
// events) once; a Plan written as a literal is prepared at each call's
// Begin. A Plan is immutable and safe for concurrent use.
type Plan struct {
	Attempt, Overall *timeout.Timeout

	prepared           bool          // made by NewPlan: the fields below hold
	attemptD, overallD time.Duration // 0 without the timeout
	observes           bool          // either timeout only observes
	attemptObserves    bool
	overallObserves    bool
	attemptReports     bool // the timeout's events are heard
	overallReports     bool
}

// NewPlan returns the plan of the two timeouts, either of which may be nil.
func NewPlan(attempt, overall *timeout.Timeout) Plan {
	p := Plan{Attempt: attempt, Overall: overall, prepared: true}
	if attempt != nil && attempt.Duration() > 0 {
		p.attemptD = attempt.Duration()
	}
	if overall != nil && overall.Duration() > 0 {
		p.overallD = overall.Duration()
	}
	p.attemptObserves, p.overallObserves = observes(attempt), observes(overall)
	p.observes = p.attemptObserves || p.overallObserves
	p.attemptReports = attempt != nil && timeouthooks.Reports(attempt)
	p.overallReports = overall != nil && timeouthooks.Reports(overall)
	return p
}

// Call is one call's deadlines under a [Plan]. It is a value used by one
// goroutine at a time (concurrent attempts each get their own [AttemptDeadline]).
type Call struct {
	plan      *Plan
	caller    context.Context // the caller's context, whose deadline the overall one may follow
	start     time.Time
	overallAt time.Time // the overall timeout's deadline; zero without one, or when the caller's comes first
	pending   bool      // overallAt is not worked out yet (see overall)
}

// Begin starts a call at now, under ctx, the caller's context.
func (p Plan) Begin(ctx context.Context, now time.Time) Call {
	var c Call
	c.Begin(&p, ctx, now)
	return c
}

// Begin is [Plan.Begin] into c, which it overwrites: a caller that keeps
// its Call in place saves copying it. c keeps p, which must not change.
func (c *Call) Begin(p *Plan, ctx context.Context, now time.Time) {
	if !p.prepared {
		q := NewPlan(p.Attempt, p.Overall)
		p = &q
	}
	c.plan, c.caller, c.start, c.overallAt = p, ctx, now, time.Time{}
	c.pending = p.overallD > 0
}

// overall returns the overall timeout's deadline, zero without one or when
// the caller's comes first. It works it out when first asked: a call whose
// first attempt succeeds under its own, earlier, deadline never needs it
// (one time.Time.Add and one ctx.Deadline less on a call's fast path).
func (c *Call) overall() time.Time {
	if c.pending {
		c.pending = false
		at := c.start.Add(c.plan.overallD)
		if dl, ok := c.caller.Deadline(); !ok || at.Before(dl) {
			c.overallAt = at
		}
	}
	return c.overallAt
}

// Deadline returns the call's deadline: the overall timeout's, when it
// comes before the caller's (whose own is in its context). A caller that
// runs attempts from more than one goroutine asks for it before they start
// (it is worked out on the first call: Call is one goroutine's at a time).
func (c *Call) Deadline() (time.Time, bool) {
	at := c.overall()
	return at, !at.IsZero()
}

// Attempt starts an attempt at now: it returns ctx (the caller's context,
// or a hedged copy's) with the attempt's deadline — the earliest of ctx's,
// the call's overall deadline and now plus the per-attempt timeout — or ctx
// itself when ctx's deadline comes first, or when the timeouts only observe
// (timeout.WithObserve).
func (c *Call) Attempt(ctx context.Context, now time.Time) (context.Context, AttemptDeadline) {
	var a AttemptDeadline
	return c.AttemptInto(&a, ctx, now), a
}

// AttemptInto is [Call.Attempt] into a, a zero AttemptDeadline (a new
// one: it sets only what it needs): a caller that keeps the AttemptDeadline
// in place saves copying it.
func (c *Call) AttemptInto(a *AttemptDeadline, ctx context.Context, now time.Time) context.Context {
	a.plan, a.parent, a.start = c.plan, ctx, now
	var at time.Time
	scope := timeout.Attempt
	if d := c.plan.attemptD; c.pending && d > 0 && d < c.plan.overallD && now == c.start {
		// The first attempt, at the call's start, with a per-attempt
		// timeout shorter than the overall one: its deadline comes first,
		// and the overall's is not needed yet.
		at = now.Add(d)
	} else {
		at, scope = c.overall(), timeout.Overall
		if d > 0 {
			if pa := now.Add(d); at.IsZero() || pa.Before(at) {
				at, scope = pa, timeout.Attempt
			}
		}
	}
	if at.IsZero() || c.plan.observes {
		return ctx
	}
	if dl, ok := ctx.Deadline(); ok && !at.Before(dl) {
		return ctx // the caller's deadline governs
	}
	a.ctx, a.cancel = context.WithDeadline(ctx, at)
	a.at, a.scope = at, scope
	return a.ctx
}

// observes reports whether t is set and only observes.
func observes(t *timeout.Timeout) bool { return t != nil && timeouthooks.Observes(t) }

// report records t's per-call event.
func report(ctx context.Context, t *timeout.Timeout, d time.Duration, timedOut bool) {
	timeouthooks.Report(ctx, t, d, timedOut)
}

// AttemptDeadline is one attempt's deadline.
type AttemptDeadline struct {
	plan   *Plan           // nil in the zero AttemptDeadline
	parent context.Context // the context Attempt was given
	start  time.Time
	ctx    context.Context // derived; nil when none was
	cancel context.CancelFunc
	at     time.Time
	scope  timeout.Scope // the timeout whose deadline ctx carries
	cut    bool          // a hedge's decision cancelled ctx before its deadline (CutAt)
	// told is End's result while End reports the per-attempt timeout's
	// event, and telling is set meanwhile (see Telling).
	told    error
	telling bool
}

// Telling reports whether End has not returned from the per-attempt
// timeout's report — an observer told of it panicked — and the result End
// was to return: the attempt's, which the gates are to take, not a panic.
func (a *AttemptDeadline) Telling() (error, bool) { return a.told, a.telling }

// Release releases the derived context without reporting anything (an
// attempt that panicked). It may be called after End, and again: the
// context is released once.
func (a *AttemptDeadline) Release() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
}

// End ends the attempt at end, with err: it releases the derived context,
// reports the per-attempt timeout's event, and returns err as an [*timeout.Error]
// of the timeout whose deadline ended the attempt (per-attempt, or
// overall), or err unchanged. Call it once.
func (a *AttemptDeadline) End(err error, end time.Time) error {
	return a.EndIn(err, end, end.Sub(a.start))
}

// EndIn is [AttemptDeadline.End] of an attempt that took took, end minus
// the start it was given, for a caller that has it: it saves subtracting
// again.
func (a *AttemptDeadline) EndIn(err error, end time.Time, took time.Duration) error {
	ctx := a.parent
	if ctx == nil {
		return err // the zero AttemptDeadline, or ended
	}
	a.parent = nil // ended: Abort only releases (see Pending)
	ours := false
	if a.ctx != nil {
		ours = err != nil && ctx.Err() == nil && (a.ctx.Err() == context.DeadlineExceeded || !a.cut && !end.Before(a.at))
		a.cancel()
		a.cancel = nil // released: a Release after End (a deferred Abort) does nothing
	}
	p := a.plan
	if ours {
		if a.scope == timeout.Overall {
			err = &timeout.Error{Scope: timeout.Overall, Timeout: p.overallD, Err: err}
		} else {
			err = &timeout.Error{Scope: timeout.Attempt, Timeout: p.attemptD, Err: err}
		}
	}
	if p.attemptD > 0 && p.attemptReports {
		timedOut := ours && a.scope == timeout.Attempt || p.attemptObserves && took >= p.attemptD
		a.told, a.telling = err, true
		report(ctx, p.Attempt, took, timedOut)
		a.told, a.telling = nil, false
	}
	return err
}

// Within makes the attempt's end ask caller, the call's context, whether
// the caller's context ended, instead of the context [Call.Attempt] was
// given: a hedged copy's, which the hedging policy cancels once the call
// is decided. A copy that ran to its deadline is then that deadline's,
// whether its own timer or the policy's cancel reached it first (when
// another copy's end at the same deadline decided the call).
func (a *AttemptDeadline) Within(caller context.Context) {
	if a.parent != nil {
		a.parent = caller
	}
}

// CutAt tells the attempt, once it has returned and before it ends, that
// the hedging policy decided its call at decided (zero: not yet), and so
// cancelled the context it was given, which ends ctx: a hedged copy whose
// context that cancel ended before its deadline was ended by the copy that
// won, not by the deadline, also when it returns past the deadline (its
// goroutine ran late). Its end is then not the deadline's: a loser that
// the winner cancelled stays CANCELLED, which the breaker ignores. A copy
// whose deadline came first (its timer ended ctx, or the call was decided
// at or past it) is the deadline's, as [AttemptDeadline.Within] says.
// decided is real time, as the deadline is.
func (a *AttemptDeadline) CutAt(decided time.Time) {
	if a.ctx != nil && !decided.IsZero() && decided.Before(a.at) && a.ctx.Err() == context.Canceled {
		a.cut = true
	}
}

// Pending reports whether the attempt has a deadline that End has not yet
// ended: an attempt that panicked before it ended is to be aborted.
func (a *AttemptDeadline) Pending() bool { return a.parent != nil }

// Abort ends an attempt that panicked at end, as End ends one that failed
// with resilience.ErrPanicked then: the per-attempt timeout counts it
// (completed, unless its deadline had passed). After End it only releases
// the context, as Release does.
func (a *AttemptDeadline) Abort(end time.Time) {
	if a.parent == nil {
		a.Release()
		return
	}
	_ = a.EndIn(resilience.ErrPanicked, end, end.Sub(a.start))
}

// FirstBound returns how long after a call's start its first attempt's
// deadline comes at the latest, when the plan derives one: the per-attempt
// timeout, or the overall one without it; 0 when neither sets a deadline
// (none, or observing). An attempt that ended while [AttemptDeadline.Live]
// took less (but for its timer's lateness).
func (p *Plan) FirstBound() time.Duration {
	if p.observes {
		return 0
	}
	if p.attemptD > 0 {
		return p.attemptD
	}
	return p.overallD
}

// Live reports whether the attempt ran under a deadline the plan derived
// and that deadline has not yet ended it: its timer has not fired, so the
// attempt, ended now, took less than the deadline's distance from its
// start. Ask it before [AttemptDeadline.EndIn], which releases the context.
func (a *AttemptDeadline) Live() bool { return a.ctx != nil && a.ctx.Err() == nil }

// Reports reports whether [Call.End] has anything to do for a call that
// succeeded: report the overall timeout's event. A caller may skip End for
// a nil error when it does not.
func (c *Call) Reports() bool { return c.plan != nil && c.plan.overallReports }

// End ends the call at end, with err, its final error, and ctx, the
// caller's context: it reports the overall timeout's event and returns err
// as an [*timeout.Error] of the overall timeout when the overall deadline ended the
// call (an attempt cut at it), or err unchanged. A local rejection stays
// that rejection, also when the deadline cut the gate's wait or the gate's
// own wait ended with it (docs/grpc.md, "Deadlines"): the event reports the
// timeout, the caller gets the rejection, its code and its message. Observing (timeout.WithObserve), it reports the call timed out when it
// took the timeout or longer, and returns err unchanged.
func (c *Call) End(ctx context.Context, err error, end time.Time) error {
	p := c.plan
	if p == nil || p.overallD <= 0 || err == nil && !p.overallReports {
		return err // nothing to report, and no error to mark
	}
	d := end.Sub(c.start)
	if p.overallObserves {
		if p.overallReports {
			report(ctx, p.Overall, d, d >= p.overallD)
		}
		return err
	}
	te, wrapped := asError(err)
	wrapped = wrapped && te.Scope == timeout.Overall
	ours := wrapped
	if !ours && err != nil && ctx.Err() == nil {
		at := c.overall()
		ours = !at.IsZero() && !end.Before(at)
	}
	if p.overallReports {
		report(ctx, p.Overall, d, ours)
	}
	if ours && !wrapped && !resilience.IsRejection(err) {
		return &timeout.Error{Scope: timeout.Overall, Timeout: p.overallD, Err: err}
	}
	return err
}

func asError(err error) (*timeout.Error, bool) {
	for err != nil {
		if te, ok := err.(*timeout.Error); ok {
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
