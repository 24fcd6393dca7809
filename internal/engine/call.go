package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/internal/hedgehooks"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/internal/retryhooks"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// Call is one logical call in progress, in the order of order.go: its
// deadlines (the overall and per-attempt timeouts, applied with one derived
// context per attempt at most), its attempt policy's state (retry, or
// budget counting only), and the pipeline its attempts go through.
// [Method.Run] drives a unary call with it; a stream drives it step by
// step: [Method.Begin], then for each attempt [Call.Admit] and
// [Call.Finish], and, on a failure, [Call.Next] and [Call.Wait];
// [Call.Done] when the call can no longer be retried; and [Call.End],
// once, with the error the call ends with.
//
// The clock is read once when the call begins (its first attempt's start)
// and once when each attempt ends; a later attempt reads it when it
// starts. Every stage takes these times: none reads its own.
//
// A Call is used by one goroutine at a time (a stream holds its lock); a
// hedged call's copies each admit and finish their own attempt.
type Call struct {
	m         *Method
	caller    context.Context // the caller's context (marked in observe mode)
	ctx       context.Context // the caller's, or bounded by the overall deadline (see Begin)
	cancel    context.CancelFunc
	deadlines deadline.Call
	p         *pipeline.Pipeline
	att       retry.Attempts
	hasAtt    bool
	between   bool      // the last attempt was told to att, and the next is not admitted yet
	start     time.Time // when the call began: its first attempt's start
	last      time.Time // when its last attempt ended (sequential calls)
}

// Begin starts a call: a stream's when stream is set (its per-attempt and
// overall timeouts are its method level's own), else a unary call's. The
// overall deadline is set now, so it bounds everything the call does: local
// queues, attempts and backoffs. The call's context carries it only when a
// gate may make attempts wait (a queue must end at it); otherwise each
// attempt's context carries the earliest deadline that applies to it, and
// the retry policy knows the call's.
func (m *Method) Begin(ctx context.Context, stream bool) Call {
	var c Call
	m.begin(&c, ctx, stream)
	return c
}

// Ended ends a call whose context, the caller's, had ended before it began
// (a request that waited out its propagated deadline in a queue): no gate
// admits it and no attempt is made, so nothing counts for or against the
// backend, which was never asked — the error a transport would give it at
// once (gRPC's DEADLINE_EXCEEDED) is no sign of the backend's health. The
// call is recorded with err, the context's error, which Ended returns as
// the caller sees it (Transport.Final). In observe mode a transport passes
// the call on instead, and records it with Ended (see [Method.Observes]).
func (m *Method) Ended(ctx context.Context, err error) error {
	if m.observe {
		ctx = resilience.Observe(ctx)
	}
	c := Call{m: m, caller: ctx, ctx: ctx, p: m.unary, start: m.e.now()}
	return c.End(err)
}

// Observes reports whether the method is in observe mode, which changes
// nothing about a call: a transport passes on a call whose context had
// ended before it began (see [Method.Ended]) as it would without meshless,
// and records it with Ended.
func (m *Method) Observes() bool { return m.observe }

// ended ends a unary call whose context, the caller's, had ended before it
// began, with err, the context's error: as [Method.Ended] in enforce mode.
// Observe mode changes nothing about the call: a makes it once, with ctx as
// the caller gave it and outside every policy (nothing counts it for or
// against the backend), and its error is returned as it is; the call is
// recorded as Ended records it under enforce, with err. It returns the
// number of the attempt whose result the call returns, as Run does.
func (m *Method) ended(ctx context.Context, a Attempt, err error) (int, error) {
	if !m.observe {
		return 0, m.Ended(ctx, err)
	}
	defer func() { _ = m.Ended(ctx, err) }()
	return 1, pushback.Without(a.Attempt(ctx, 1))
}

// Context returns the call's context: the caller's, bounded by the overall
// deadline when a gate may make attempts wait.
func (c *Call) Context() context.Context { return c.ctx }

// Attempts returns the number of attempts reported to [Call.Next] so far.
func (c *Call) Attempts() int {
	if !c.hasAtt {
		return 0
	}
	return c.att.Attempt()
}

// Admit admits attempt n (from 1) through the gates, with ctx (the call's
// context, or a hedged copy's), and returns the context the attempt runs
// with — marked as following n-1 attempts, and carrying the attempt's
// deadline — and that deadline, for [Call.Finish]. On a refusal a holds
// nothing; otherwise end the attempt with Finish, and defer a.Abort so that
// a panic gives every permit back.
func (c *Call) Admit(ctx context.Context, a *pipeline.Admission, n int) (context.Context, deadline.AttemptDeadline, error) {
	var d deadline.AttemptDeadline
	actx, err := c.admit(ctx, a, &d, n)
	return actx, d, err
}

// FinishCopy is [Call.FinishTimed] for one of a hedged call's concurrent
// copies: it records no last end in c, which the copies share.
func (c *Call) FinishCopy(a *pipeline.Admission, d *deadline.AttemptDeadline, err error) (time.Duration, error) {
	end, err := c.finish(a, d, err)
	return end.Sub(a.Start()), err
}

// Wait sleeps a backoff; false when the call's context ended first (the
// call is then over for the attempt policy, with the context's error, the
// error Run returns and a stream ends with: the caller gave up, so the
// policy's "retry done" event agrees with the call's own record).
func (c *Call) Wait(d time.Duration) bool {
	ok := retryhooks.WaitOrEnd(&c.att, d)
	c.between = c.between && ok
	return ok
}

// Done reports the result of the call's last attempt when it can no longer
// be retried (a stream that committed), and ends the attempt policy's call.
// It does nothing once the policy has ended it. Call it before the call's
// context ends: a done context moves no retry-budget token.
func (c *Call) Done(err error) {
	if c.hasAtt {
		c.between = true // as for Next: a panic as the policy is told ends the call (EndPanicked)
		c.att.Done(err)
		c.between = false
	}
}

// runHedged is Run for a method that hedges: its copies run concurrently
// (hedgedCall). Each copy's context carries the earliest deadline that
// applies to it, the overall one included, so a copy sent at or past the
// overall deadline ends at once, as a timeout that is not non-fatal: the
// hedge sends no more.
func (m *Method) runHedged(ctx context.Context, a Attempt) (int, error) {
	c := m.Begin(ctx, false)
	returned := false
	defer func() {
		if !returned { // a copy panicked: it goes on up once every copy has returned
			c.endPanicked(time.Time{})
		}
	}()
	h := hedgedCalls.Get().(*hedgedCall)
	h.m, h.p, h.deadlines, h.start, h.a, h.caller = m, c.p, c.deadlines, c.start, a, c.ctx
	h.deadline, _ = c.deadlines.Deadline() // worked out by Begin: a read
	n, err := hedgehooks.Run(m.hedge, c.ctx, h)
	// Run returned once every copy had: nothing reads h any more (a call
	// that panics leaves it to the collector).
	if !h.more.Load() {
		c.last = h.firstEnd // the call's one copy: its end is the call's, as an unhedged attempt's
	}
	*h = hedgedCall{}
	hedgedCalls.Put(h)
	returned = true
	return n, c.End(c.deferCall(a, err))
}

// hedgedCalls are the hedgedCall values of hedged calls, reused.
var hedgedCalls = sync.Pool{New: func() any { return new(hedgedCall) }}

// hedgedCall is a unary call's hedged copies, as the hedging policy runs
// them (hedgehooks.Copies): a copy of what they read of the call, whose
// Call stays on its goroutine's stack. The first copy runs under the one
// context its attempt derives anyway, which CancelFirst ends; one more
// only when its attempt derives none, or when a gate may make it wait.
type hedgedCall struct {
	m         *Method
	p         *pipeline.Pipeline
	deadlines deadline.Call
	start     time.Time
	deadline  time.Time // the overall deadline, zero when none (Deadline)
	a         Attempt
	caller    context.Context // the call's context, which no copy's end cancels

	firstEnd time.Time   // when the first copy ended, when it ran on the caller's goroutine
	more     atomic.Bool // a copy after the first was made

	mu        sync.Mutex
	decided   time.Time                // when the policy decided the call (Decided), real time; zero before
	cancelled bool                     // CancelFirst was called
	first     deadline.AttemptDeadline // the first copy's: its Release ends it
	cancel    context.CancelFunc       // or this, when its attempt derived none
}

// Copy is copy n of the call: an attempt like any ([Call.Admit] and
// [Call.FinishCopy]), but copies run at once, so each reads its own times
// and none records the call's last end.
func (h *hedgedCall) Copy(ctx context.Context, n int) error {
	c := Call{m: h.m, ctx: h.caller, p: h.p, deadlines: h.deadlines, start: h.start}
	if n > 1 {
		h.more.Store(true)
		return c.hedgedCopy(ctx, h, n) // ctx: the policy cancels it
	}
	if h.m.waits {
		// A gate may make the copy wait: it waits under a context that
		// CancelFirst ends.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		h.hold(nil, cancel)
		return c.hedgedCopy(ctx, h, 1)
	}
	var adm pipeline.Admission
	actx, d, err := c.Admit(ctx, &adm, 1)
	if err != nil {
		return err
	}
	defer c.Abort(&adm, &d)
	if actx == adm.Context() { // no deadline derived a context
		var cancel context.CancelFunc
		actx, cancel = context.WithCancel(actx)
		defer cancel()
		h.hold(nil, cancel)
	} else {
		h.hold(&d, nil)
	}
	aerr := h.a.Attempt(actx, 1)
	if aerr != nil {
		d.CutAt(h.decidedAt()) // a loser the winner cancelled before the deadline is not the deadline's
	}
	end, err := c.finish(&adm, &d, aerr)
	h.firstEnd = end // read once every copy has returned (runHedged)
	if h.m.e.timed {
		tellTook(h.a, 1, aerr, end.Sub(adm.Start()))
	}
	return err
}

// OutsideBubble reports whether the call runs outside a testing/synctest
// bubble (hedgehooks.OutsideBubble): its start was read with time.Now (the
// system clock), whose readings carry the monotonic clock outside a bubble
// and never inside one.
func (h *hedgedCall) OutsideBubble() bool { return h.m.e.system && h.start != h.start.Round(0) }

// Deadline returns the call's overall deadline (hedgehooks.Deadliner),
// which each copy's context carries but the caller's does not: the policy
// sends no copy, and waits no pushback, past it.
func (h *hedgedCall) Deadline() (time.Time, bool) { return h.deadline, !h.deadline.IsZero() }

// hold keeps what ends the first copy's context, d's or cancel, and ends
// it at once when CancelFirst came first.
func (h *hedgedCall) hold(d *deadline.AttemptDeadline, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d != nil {
		h.first = *d // a copy: its Release ends the same context
	}
	h.cancel = cancel
	if h.cancelled {
		h.end()
	}
}

// Decided records when the call was decided (hedgehooks.Decider), before
// the policy cancels the copies still running: a copy whose context that
// cancel ended before its deadline was ended by the winner, not by the
// deadline (deadline.AttemptDeadline.CutAt). Its deadlines are real time.
func (h *hedgedCall) Decided() {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decided = now
}

// decidedAt returns when the call was decided, zero before.
func (h *hedgedCall) decidedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.decided
}

// CancelFirst ends the first copy: a hedge decided the call.
func (h *hedgedCall) CancelFirst() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cancelled = true
	h.end()
}

func (h *hedgedCall) end() {
	if h.cancel != nil {
		h.cancel()
	}
	h.first.Release()
}

// RunOnce runs a unary call that can make one attempt only (a hedging
// method's call whose copies the transport cannot keep apart; an HTTP
// request that may not be sent twice): the overall timeout, the gates and
// the attempt. A retrying method's attempt policy counts the call as one
// that could not be retried ([Call.Done]).
func (m *Method) RunOnce(ctx context.Context, a Attempt) error {
	if err := ctx.Err(); err != nil {
		_, err = m.ended(ctx, a, err)
		return err
	}
	c := m.Begin(ctx, false)
	err := c.attempt(c.ctx, a, 1)
	defer c.endBetween() // Done panicked
	c.Done(err)
	return c.End(err)
}

// hedgedCopy is copy n of a hedged call: an attempt like any, but copies
// run at once, so each reads its own times and none records the call's
// last end.
func (c *Call) hedgedCopy(ctx context.Context, h *hedgedCall, n int) error {
	var adm pipeline.Admission
	var d deadline.AttemptDeadline
	actx, err := c.admit(ctx, &adm, &d, n)
	if err != nil {
		return err
	}
	defer c.Abort(&adm, &d)
	d.Within(c.ctx) // one outcome per copy sent: a copy the deadline ended is the deadline's
	a := h.a
	aerr := a.Attempt(actx, n)
	if aerr != nil {
		d.CutAt(h.decidedAt()) // but a loser the winner cancelled before the deadline is not
	}
	end, err := c.finish(&adm, &d, aerr)
	if c.m.e.timed {
		tellTook(a, n, aerr, end.Sub(adm.Start()))
	}
	return err
}

// Hedge runs the copies of a hedged call (a stream's) under ctx (the
// call's context or one derived from it): fn makes copy n, admitting it
// itself with [Call.Admit] (a stream's copy holds its permits past fn when
// it is committed). It returns the winning copy's number (0 when none won)
// and its error.
func (c *Call) Hedge(ctx context.Context, fn func(ctx context.Context, n int) error) (int, error) {
	return c.m.hedge.Run(ctx, fn)
}

// Serve runs a server's call through the method's gates (its bulkhead and
// rate limiter) and reports whether the gates refused it.
func (m *Method) Serve(ctx context.Context, fn func(ctx context.Context) error) (err error, refused bool) {
	if m.unary.Len() == 0 {
		return fn(ctx), false
	}
	hctx := ctx // the handler's
	if m.observe {
		// The mark is for the server's own gates: the handler keeps the
		// caller's context, so that its own calls' policies act as they are
		// set (a server's gates derive no context of their own).
		ctx = resilience.Observe(ctx)
	}
	var adm pipeline.Admission
	if err := m.unary.Admit(ctx, &adm); err != nil {
		return err, true
	}
	defer adm.Abort() // a panicking handler gives its permits back
	if !m.observe {
		hctx = adm.Context()
	}
	return adm.Done(fn(hctx)), false
}

// ServeStream is [Method.Serve] for a stream's handler.
func (m *Method) ServeStream(ctx context.Context, fn func() error) (err error, refused bool) {
	if m.stream.Len() == 0 {
		return fn(), false
	}
	if m.observe {
		ctx = resilience.Observe(ctx)
	}
	var adm pipeline.Admission
	if err := m.stream.Admit(ctx, &adm); err != nil {
		return err, true
	}
	defer adm.Abort()
	return adm.Done(fn()), false
}

// panicked ends attempt a, which panicked, and its call, on the panic's
// way up, as runPlain's deferred function does: the attempt's deadline
// and permits, when Finish had not ended them, at an end read once (abort),
// the attempt policy's call, and the call, at that end (endPanicked); when
// a gate's Exit panicked (Finish ended the attempt), the call ends now.
func (c *Call) panicked(a *pipeline.Admission, d *deadline.AttemptDeadline) {
	end := c.abort(a, d)
	c.Done(resilience.ErrPanicked) // the attempt policy's call: failed, not retried
	c.endPanicked(end)
}

// abort is Abort, which returns the end it gave the attempt's deadline and
// gates, zero when Finish had given it them (a gate's Exit panicked).
func (c *Call) abort(a *pipeline.Admission, d *deadline.AttemptDeadline) time.Time {
	if !a.Held() && !d.Pending() {
		d.Release()
		return time.Time{}
	}
	end := c.m.e.now()
	if err, ok := d.Telling(); ok { // the attempt returned: the gates take its result
		a.DoneIn(err, end, end.Sub(a.Start()))
		return end
	}
	d.Abort(end)
	a.AbortAt(end)
	return end
}

// endPanicked ends a call whose attempt panicked, once the attempt has
// given its permits back, as End ends a call that failed with
// resilience.ErrPanicked at end (now when zero): the overall timeout
// counts it (completed, unless its deadline had passed), the call's
// context is released and the per-call event is recorded, a failure whose
// error type is the transport's name for an error without a code. Nothing
// is returned: the caller gets the panic, unchanged.
func (c *Call) endPanicked(end time.Time) {
	c.last = end
	_ = c.End(resilience.ErrPanicked)
}

// EndPanicked ends a call, a stream's, whose attempt panicked once
// [Call.Abort] has ended the attempt, on the panic's way up, which it
// does not stop: its attempt policy's call ends with a failure that is not
// retried, and the call as End ends one that failed with
// resilience.ErrPanicked now (endPanicked). Call it instead of End.
func (c *Call) EndPanicked() {
	if c.between { // between attempts (Next or Wait panicked): each made is counted
		retryhooks.Stop(&c.att, resilience.ErrPanicked)
	} else {
		c.Done(resilience.ErrPanicked)
	}
	c.endPanicked(time.Time{})
}

// endPanicked is Call.endPanicked for runPlain's first attempt, which
// panicked: the call began at start, under the caller's ctx, with dls. Its
// attempt policy's call, which runPlain begins once the attempt is over,
// begins and ends now, as Call.panicked ends it.
func (m *Method) endPanicked(ctx context.Context, dls *deadline.Call, start, end time.Time) {
	c := Call{m: m, caller: ctx, ctx: ctx, p: m.unary, deadlines: *dls, hasAtt: true, start: start}
	m.attempts.BeginInto(&c.att, ctx, time.Time{})
	c.Done(resilience.ErrPanicked)
	c.endPanicked(end)
}

// endBetween ends the call when Next, Wait or Done panicked (EndPanicked).
func (c *Call) endBetween() {
	if c.between {
		c.EndPanicked()
	}
}

// timeoutOf returns the timeout error in err's chain.
func timeoutOf(err error) (*timeout.Error, bool) {
	var te *timeout.Error
	ok := errors.As(err, &te)
	return te, ok
}
