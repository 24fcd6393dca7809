package engine

import (
	"context"
	"errors"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
)

// This file is a unary call's path through the engine, in the order a call
// runs it, from the method's lookup to the call's end. It is one file for
// the sake of the code's layout: the Go linker keeps a package's functions
// in the order of its source files, so the path's code sits together on a
// few pages of memory instead of spread over the package. A real call runs
// it cold, after gRPC's own path has evicted it, and every page and call it
// spans shows (docs/benchmarks/b5-pairs.md, "What a cold call pays for").

// Cached returns the policy set of key when a call has built it: one atomic
// load and a map read, no lock, no allocation.
func (e *Engine) Cached(key string) (*Method, bool) { return e.state.Load().methods.load(key) }

// load returns the entry of key from the hot cache or the snapshot.
func (t *methodTable) load(key string) (*Method, bool) {
	if e := t.hot[hotIndex(key)].Load(); e != nil && e.key == key {
		return e.m, true
	}
	return t.loadSnap(key)
}

// hotIndex returns key's slot in the hot cache: a hash of its length and
// its last 8 bytes (a method's name).
func hotIndex(key string) int {
	n := len(key)
	var x uint64
	if n >= 8 {
		b := key[n-8:] // one 8-byte load, as the compiler combines it
		x = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	} else {
		for i := range n {
			x = x<<8 | uint64(key[i])
		}
	}
	x ^= uint64(n)
	return int((x * 0x9E3779B97F4A7C15) >> (64 - hotBits))
}

// Run runs one unary call through the method's policies: the attempt policy
// calls a once per attempt — retries one after another, hedged copies
// concurrently — each admitted by the gates. It returns the number of the
// attempt whose result the call returns (0 when none ran) and the call's
// error as the caller sees it.
func (m *Method) Run(ctx context.Context, a Attempt) (int, error) {
	if err := ctx.Err(); err != nil {
		return m.ended(ctx, a, err)
	}
	if m.hedge != nil {
		return m.runHedged(ctx, a)
	}
	if m.plain {
		return m.runPlain(ctx, a)
	}
	var c Call
	m.begin(&c, ctx, false)
	n, err := c.retried(a)
	return n, c.End(c.deferCall(a, err))
}

// The stages of runPlain's attempt, for what a panic gives back.
const (
	idle     = iota // no gate is held
	entering        // the gates are entered
	running         // the attempt runs
	exiting         // the gates are exited
	telling         // the attempt policy is told of a success (an observer may panic)
)

// runPlain is Run of a plain method (Method.plain): the call that nearly
// every call is, one attempt that succeeds, runs in this one function,
// which enters and exits the gates itself (pipeline.Gates), as
// begin, attempt, Finish and End would, with no Call; a first attempt that
// fails goes on in a Call, as retried's would. It reads the clock twice,
// at the call's start and at the attempt's end, as a Call does.
//
// On a 2-core virtual machine, measured in pairs with one context deadline
// (docs/benchmarks/b5-pairs.md, the plain run), the same steps taken
// through a Call and a pipeline.Admission cost about 90 ns more: each call
// between functions of the engine, each state passed by pointer, shows at
// this speed.
func (m *Method) runPlain(ctx context.Context, a Attempt) (int, error) {
	start := m.e.now()
	var dls deadline.Call
	dls.Begin(&m.unaryDeadlines, ctx, start)
	var att retry.Attempts // begun when the attempt is over: a success needs no deadline
	g := m.unary.Gates()   // neither observing nor waiting
	var in [pipeline.MaxGates]context.Context
	var held [pipeline.MaxGates]resilience.Permit
	var d deadline.AttemptDeadline
	var r resilience.Result // while exiting: the result as the gates inside passed it on
	k, stage := 0, idle     // the gates held; while exiting, the gate being exited
	defer func() {
		// A panic gives back what the attempt holds, with the results a
		// pipeline.Admission gives (Admit's, Abort's, exit's).
		switch stage {
		case entering: // in a gate's Enter: no attempt was made, but the call panicked
			g.ExitFrom(&in, &held, 0, k-1, resilience.Result{Err: resilience.ErrPanicked, Outcome: resilience.Ignored})
			m.endPanicked(ctx, &dls, start, time.Time{})
		case running: // in the attempt, or in its deadline's report (then the gates take the attempt's result)
			e := m.e.now()
			pr := resilience.Result{Err: resilience.ErrPanicked, Outcome: resilience.Failure, Duration: e.Sub(start), End: e}
			if err, ok := d.Telling(); ok {
				pr.Err, pr.Outcome = err, g.Classify(err)
			}
			d.Abort(e)
			g.ExitFrom(&in, &held, 0, k-1, pr)
			m.endPanicked(ctx, &dls, start, e)
		case exiting: // in gate k's Exit: the gates outside it are exited still
			g.ExitFrom(&in, &held, 1<<k, k, r)
			m.endPanicked(ctx, &dls, start, time.Time{})
		case telling: // the policy counted the attempt: the call ends as a Call's between attempts
			c := Call{m: m, caller: ctx, ctx: ctx, p: m.unary, deadlines: dls, att: att, hasAtt: true, start: start, between: true}
			c.EndPanicked()
		}
	}()
	var err error
	var end time.Time
	actx := ctx
	stage = entering
	for i := range g.N {
		in[i] = actx
		var next context.Context
		var pm resilience.Permit
		if t := g.Timed[i]; t != nil {
			next, pm, err = t.EnterAt(actx, start)
		} else {
			next, pm, err = g.Enters[i].Enter(actx)
		}
		if err != nil {
			if w := g.Refused[i]; w != nil {
				err = w.Refused(err)
			}
			break
		}
		held[i], k, actx = pm, i+1, next
	}
	if err != nil { // refused: the gates entered give the attempt up
		stage = idle
		g.ExitFrom(&in, &held, 0, k-1, resilience.Result{Err: err, Outcome: resilience.Ignored})
	} else {
		stage = running
		actx = dls.AttemptInto(&d, actx, start)
		err = a.Attempt(actx, 1)
		aerr := err // as the attempt returned it, for Took
		var took time.Duration
		switch {
		case !m.e.system:
			end, took = m.e.since(start)
		case err == nil && m.endFree > 0 && d.Live() && m.breakerTrusts():
			end = start // its deadline proves it fast: see Method.endFree
		default: // the end, without a call of its own (Engine.since)
			took = time.Since(start)
			end = start.Add(took)
		}
		// r, the gates' result, is written field by field, well before
		// its first copy, and a field only when it is not r's zero value:
		// each Exit gets a copy of r, and the copy of a field just stored
		// waits for the store (docs/benchmarks/b5-pairs.md, the registers
		// run). r is also what the deferred exits pass on.
		r.Duration, r.End = took, end
		err = d.EndIn(err, end, took) // d's start is start: it took took too
		if k > 0 {
			if o := g.Classify(err); o != resilience.Success {
				r.Outcome = o
			}
			if err != nil {
				r.Err = err
			}
			for stage, k = exiting, k-1; k >= 0; k-- {
				if e := g.Exits[k].Exit(in[k], held[k], r); e != nil || r.Err != nil {
					r.Err = e
				}
			}
			err = r.Err
		}
		stage = idle
		if m.e.timed { // once the attempt has ended everywhere, as Call.attempt tells it
			tellTook(a, 1, aerr, took)
		}
	}
	if err == nil {
		m.attempts.BeginInto(&att, ctx, time.Time{})
		stage = telling
		att.Next(nil) // a success ends the attempt policy's call
		stage = idle
		if m.call == nil && !dls.Reports() {
			return 1, nil // End would do nothing
		}
	} else {
		dl, _ := dls.Deadline() // zero: none; a backoff must end before it
		m.attempts.BeginInto(&att, ctx, dl)
	}
	c := Call{m: m, caller: ctx, ctx: ctx, p: m.unary, deadlines: dls, att: att, hasAtt: true, start: start, last: end}
	n := 1
	if err != nil {
		n, err = c.retry(a, 1, err)
	}
	return n, c.End(c.deferCall(a, err))
}

// breakerTrusts reports whether the method's breaker, if it has one, can
// count a success without its duration when the success came at most
// m.endFree after its start (see Method.endFree): the breaker tells no
// observer, and m.endFree is half its slow-call threshold or less. The
// threshold is read at each call, as Reconfigure may change it.
func (m *Method) breakerTrusts() bool {
	if m.breaker == nil {
		return true
	}
	slow, observed := breakerhooks.SlowThreshold(m.breaker)
	return !observed && m.endFree <= slow/2
}

// begin is Begin into c, a zero Call: a unary call's Call is not copied.
func (m *Method) begin(c *Call, ctx context.Context, stream bool) {
	if m.observe {
		ctx = resilience.Observe(ctx)
	}
	c.m, c.caller, c.ctx, c.p = m, ctx, ctx, m.unary
	plan := &m.unaryDeadlines
	if stream {
		c.p, plan = m.stream, &m.streamDeadlines
	}
	c.start = m.e.now()
	c.deadlines.Begin(plan, ctx, m.e.real(c.start))
	dl, bounded := c.deadlines.Deadline()
	if bounded && m.waits && !m.observe {
		c.ctx, c.cancel = context.WithDeadline(ctx, dl)
	}
	if m.attempts != nil {
		c.hasAtt = true
		if bounded {
			c.att = m.attempts.BeginWithDeadline(c.ctx, dl)
		} else {
			c.att = m.attempts.Begin(c.ctx)
		}
	}
}

// now reads the engine's clock: the system clock's with time.Now itself,
// not through the Clock interface.
func (e *Engine) now() time.Time {
	if e.system {
		return time.Now()
	}
	return e.opts.Clock.Now()
}

// real returns t, a reading of the engine's clock, as real time for a
// context deadline: t itself with the system clock, else a reading of
// package time (a test's custom clock).
func (e *Engine) real(t time.Time) time.Time {
	if e.realTime {
		return t
	}
	return time.Now()
}

// retried runs the attempts while the attempt policy allows. Every attempt
// after the first is marked (Transport.Mark).
func (c *Call) retried(a Attempt) (int, error) { return c.retry(a, 1, c.attempt(c.ctx, a, 1)) }

// retry goes on from attempt n, which ended with err: it runs the next
// attempts while the attempt policy allows, and returns the number of the
// attempt whose result the call returns and that result. When the call's
// context ends during a backoff, the result is the context's error: the
// caller gave up, as gRPC's own retry and net/http report it, and the
// backend's last answer, already counted, is not repeated as the call's.
func (c *Call) retry(a Attempt, n int, err error) (int, error) {
	defer c.endBetween()
	var last error
	for {
		wait, again := c.Next(err)
		if again && !c.Wait(wait) {
			return n, c.ctx.Err()
		}
		if !again {
			if last != nil && errors.Is(err, throttler.ErrThrottled) {
				// A retry the throttler held back: the caller gets what the
				// backend said, as for a retry the token bucket held back.
				return n - 1, last
			}
			return n, err
		}
		last = err
		n++
		err = c.attempt(c.ctx, a, n)
	}
}

// attempt is attempt n through the gates.
func (c *Call) attempt(ctx context.Context, a Attempt, n int) error {
	var adm pipeline.Admission
	var d deadline.AttemptDeadline
	finished := false
	defer func() {
		// A panicking attempt gives its permits back, and ends the call;
		// so does a gate that panics as it admits the attempt (the gates
		// entered are given back, and no attempt is made).
		if !finished {
			c.panicked(&adm, &d)
		}
	}()
	actx, err := c.admit(ctx, &adm, &d, n)
	if err != nil {
		finished = true
		return err
	}
	aerr := a.Attempt(actx, n)
	err = c.Finish(&adm, &d, aerr)
	finished = true
	if c.m.e.timed { // Finish read the end: c.last
		tellTook(a, n, aerr, c.last.Sub(adm.Start()))
	}
	return err
}

// admit is Admit into d, a zero AttemptDeadline, which it fills once the
// gates admitted the attempt.
func (c *Call) admit(ctx context.Context, a *pipeline.Admission, d *deadline.AttemptDeadline, n int) (context.Context, error) {
	if c.between { // read only, but after Next: a hedged stream's copies admit at once
		c.between = false
	}
	now := c.start
	if n > 1 {
		now = c.m.e.now()
	}
	if err := c.p.AdmitAt(ctx, a, now); err != nil {
		return ctx, err
	}
	actx := a.Context()
	if n > 1 {
		actx = c.m.e.t.Mark(actx, n-1)
	}
	return c.deadlines.AttemptInto(d, actx, c.m.e.real(a.Start())), nil
}

func (g *throttleGate) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	if g.breaker != nil {
		if s := g.breaker.State(); s == circuitbreaker.StateOpen || s == circuitbreaker.StateHalfOpen || s == circuitbreaker.StateForcedOpen {
			return ctx, resilience.Permit{}, nil
		}
		if n := g.reclosed.Load(); n != g.seen.Load() && g.seen.Swap(n) != n {
			g.t.Reset() // the breaker closed since the last call: see throttleGate
		}
	}
	return g.t.EnterAt(ctx, now)
}

// Finish ends an attempt that [Call.Admit] admitted, with its error: its
// deadline first (a timeout marks the errors it caused), then its gates.
// It returns the error as they passed it on.
func (c *Call) Finish(a *pipeline.Admission, d *deadline.AttemptDeadline, err error) error {
	c.last, err = c.finish(a, d, err)
	return err
}

// FinishTimed is [Call.Finish] that also returns how long the attempt
// took: from its start, before its gates, to the end Finish read, the time
// a [Timed] attempt is told. A stream's attempts, which the engine does not
// make itself, are timed with it.
func (c *Call) FinishTimed(a *pipeline.Admission, d *deadline.AttemptDeadline, err error) (time.Duration, error) {
	c.last, err = c.finish(a, d, err)
	return c.last.Sub(a.Start()), err
}

// finish is Finish without recording the end in c, which it returns.
func (c *Call) finish(a *pipeline.Admission, d *deadline.AttemptDeadline, err error) (time.Time, error) {
	var end time.Time
	var took time.Duration
	if start := a.Start(); c.m.e.system { // since, without a call of its own
		took = time.Since(start)
		end = start.Add(took)
	} else {
		end, took = c.m.e.since(start)
	}
	if c.m.e.realTime { // d's start is a.Start(): it took took too
		return end, a.DoneIn(d.EndIn(err, end, took), end, took)
	}
	return end, a.DoneIn(d.End(err, c.m.e.real(end)), end, took)
}

// since reads the engine's clock at the end of what began at start, a
// reading of the same clock: with the system clock it reads the monotonic
// clock only (time.Since, half the cost of time.Now) and returns start
// plus the time elapsed, the reading time.Now would have given but for a
// step of the wall clock in between, which the monotonic reading ignores,
// as every duration and deadline comparison does; and the time elapsed.
func (e *Engine) since(start time.Time) (end time.Time, took time.Duration) {
	if e.system {
		took = time.Since(start)
		return start.Add(took), took
	}
	end = e.opts.Clock.Now()
	return end, end.Sub(start)
}

// classifier returns c.outcome as a function. Its closure, unlike the
// method value c.outcome, is compiled here, beside the rest of the path
// (not inlined, so that it stays here).
//
//go:noinline
func (c *classes) classifier() resilience.Classifier {
	return func(err error) resilience.Outcome {
		if err == nil { // a success, without a second call
			return resilience.Success
		}
		return c.outcome(err)
	}
}

// verdicts returns c.verdict as a function (see classifier).
//
//go:noinline
func (c *classes) verdicts() func(resilience.Result) throttler.Verdict {
	return func(r resilience.Result) throttler.Verdict {
		if r.Err == nil { // an accept, without a second call
			return throttler.Accepted
		}
		return c.verdict(r)
	}
}

// outcome classifies an attempt's error for the breaker: a failure code or
// an error that carries no code is a failure, an ignored code or a local
// rejection is ignored, every other code (NOT_FOUND, 404…) is a success. A
// rejection relayed from a downstream meshless counts as its kind says
// (resilience.Kind.RelayedOutcome), whatever the configured codes say.
func (c *classes) outcome(err error) resilience.Outcome {
	if err == nil {
		return resilience.Success
	}
	if resilience.IsRejection(err) {
		return resilience.Ignored
	}
	code, ok := c.t.Code(err)
	if !ok {
		return resilience.Failure
	}
	if k, ok := c.t.Relayed(err); ok {
		return k.RelayedOutcome()
	}
	switch {
	case c.failure.Has(code):
		return resilience.Failure
	case c.ignored.Has(code):
		return resilience.Ignored
	case c.cl != nil:
		return c.byClass(code)
	}
	return resilience.Success
}

// verdict says what an attempt's result tells the adaptive throttler: an
// answer from a backend that did its work (OK, NOT_FOUND…) is an accept; a
// failure or a sign of overload (RESOURCE_EXHAUSTED: a backend that sheds,
// or a meshless one hop down that rejected) is a refusal; a local rejection
// inside the throttler or a call the caller gave up is not counted.
func (c *classes) verdict(r resilience.Result) throttler.Verdict {
	if r.Err == nil {
		return throttler.Accepted
	}
	if resilience.IsRejection(r.Err) {
		return throttler.Uncounted
	}
	if c.t.Overloaded(r.Err) {
		return throttler.Refused
	}
	return throttler.DefaultVerdict(r)
}

// Abort ends an admitted attempt that panicked: its deadline counts it as
// an attempt that failed with resilience.ErrPanicked (its context
// released) and every permit is given back. After Finish it does nothing
// but for the deadline, which is released once.
func (c *Call) Abort(a *pipeline.Admission, d *deadline.AttemptDeadline) { c.abort(a, d) }

// Next reports a failed attempt's result to the attempt policy: true and
// the wait before the next attempt when it retries. A method that does not
// retry only counts the attempt in the retry budget.
func (c *Call) Next(err error) (time.Duration, bool) {
	if !c.hasAtt {
		return 0, false
	}
	c.between = true // until the policy returns: a panic in it ends the call (EndPanicked)
	wait, again := c.att.Next(err)
	c.between = again
	return wait, again
}

// deferCall keeps the call in its key's dead-letter queue when err is one
// of the method's triggers, and returns the error for its caller: the
// transport's DEFERRED rejection when the call is kept, err itself when it
// is not (not a trigger, a call the transport cannot encode, a replay, a
// full queue).
func (c *Call) deferCall(a Attempt, err error) error {
	if err == nil || c.m.dlq == nil {
		return err // inlined: the call path of a call that succeeded stays short
	}
	return c.deferFailed(a, err)
}

// End ends the call with err: the overall timeout reports it (and marks
// the errors its own deadline caused), the per-call event is recorded, and
// the error is returned as the caller sees it. Call it once.
func (c *Call) End(err error) error {
	err = pushback.Without(err)
	end := c.last
	if end.IsZero() { // no attempt ended: refused, or hedged
		end = c.m.e.now()
	}
	if c.cancel != nil {
		c.cancel()
	}
	if err != nil || c.deadlines.Reports() {
		told := false
		defer func() { // the overall timeout's observer panicked: the call panicked
			if !told {
				c.record(resilience.ErrPanicked, end)
			}
		}()
		err = c.deadlines.End(c.caller, err, c.m.e.real(end))
		told = true
	}
	return c.record(err, end)
}

// record records the per-call event of the call ended at end with err,
// and returns err as the caller sees it.
func (c *Call) record(err error, end time.Time) error {
	if err != nil {
		err = c.m.e.t.Final(err)
	}
	if c.m.call != nil {
		c.m.call.Record(c.caller, resilience.Event{Type: resilience.EventCall, Duration: end.Sub(c.start), Err: err,
			Outcome: c.m.classes.outcome(err), ErrorType: c.m.classes.errorType(err)})
	}
	return err
}
