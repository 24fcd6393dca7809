package pipeline

import (
	"context"
	"strconv"
	"time"

	"github.com/meshless/meshless/resilience"
)

// An EarlyGate is a [resilience.Gate] that may take an attempt's result as soon as the
// attempt commits (see [Admission.Commit]), before it ends: a half-open
// circuit breaker's probe takes a stream's first response as its verdict, so
// that a stream that lives for hours never holds a probe nor keeps the
// breaker from deciding. Commit reports whether the gate has exited; if not,
// its Exit comes when the attempt ends, as for any gate.
type EarlyGate interface {
	resilience.Gate
	Commit(ctx context.Context, p resilience.Permit, r resilience.Result) (exited bool)
}

// A TimedGate is a [resilience.Gate] that needs the time to admit an attempt (the
// adaptive throttler's window): a [Pipeline] gives it the time it read for
// the attempt, so that no gate reads the clock of its own.
type TimedGate interface {
	resilience.Gate
	// EnterAt is Enter at now.
	EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error)
}

// A Forwarder is a [resilience.Gate] whose Exit is another gate's Exit,
// called with the same arguments and returning its result unchanged (a
// gate that only rewrites its Enter's refusals): a [Pipeline] calls that
// gate's Exit directly, once per attempt, saving a call per gate.
type Forwarder interface {
	resilience.Gate
	// ExitsThrough returns the gate whose Exit this gate's Exit is.
	ExitsThrough() resilience.Gate
}

// A Wrapper is a [resilience.Gate] whose Enter is another gate's Enter,
// called with the same arguments, with its refusals rewritten (a
// transport's rejection errors): a [Pipeline] enters that gate directly and
// calls Refused on a refusal only, saving a call per gate on every attempt.
type Wrapper interface {
	resilience.Gate
	// EntersThrough returns the gate whose Enter this gate's Enter is.
	EntersThrough() resilience.Gate
	// Refused returns the refusal this gate's Enter returns for err, the
	// other gate's.
	Refused(err error) error
}

// maxForwards bounds the Forwarders a pipeline follows from one gate.
const maxForwards = 8

// exitOf returns the gate whose Exit g's Exit is.
func exitOf(g resilience.Gate) resilience.Gate {
	for range maxForwards {
		f, ok := g.(Forwarder)
		if !ok {
			return g
		}
		next := f.ExitsThrough()
		if next == nil {
			return g
		}
		g = next
	}
	return g
}

// MaxGates is the most gates one [Pipeline] runs; it keeps an [Admission] a
// fixed-size value that lives on the stack.
const MaxGates = 6

// Pipeline runs gates in order, outermost first, around attempts: it enters
// each gate, runs the attempt, classifies its result once, and exits every
// gate it entered in reverse order — on every path: a refusal by a later
// gate, an error, a panic in the attempt or in a gate. It is the one place
// where meshless composes policies around an attempt; package grpcmw builds
// its unary, stream and server paths on it.
//
// A Pipeline is immutable and safe for concurrent use.
type Pipeline struct {
	gates    []resilience.Gate
	g        Gates
	early    [MaxGates]EarlyGate // gates[i] as an EarlyGate, or nil
	anyTimed bool                // some gate is a TimedGate
	clock    resilience.Clock
}

// Gates is what a [Pipeline] runs an attempt with, for a caller that runs
// an attempt through the gates in a function of its own rather than with
// an [Admission] (meshless's engine, for a unary call's first attempt): it
// enters and exits them itself, as [Pipeline.AdmitAt] and
// [Admission.DoneIn] do, keeping the attempt's contexts and permits in its
// own frame, with no call per gate but the gate's own. Read it; never
// change it.
type Gates struct {
	// N is the number of gates.
	N int
	// Enters[i] is the gate whose Enter is gate i's (a [Wrapper]'s inner
	// gate); Timed[i] is Enters[i] as a [TimedGate], entered at a time, or
	// nil; Refused[i] is gate i as a Wrapper, which rewrites its refusals,
	// or nil; Exits[i] is the gate whose Exit is gate i's (a [Forwarder]'s).
	Enters  [MaxGates]resilience.Gate
	Timed   [MaxGates]TimedGate
	Refused [MaxGates]Wrapper
	Exits   [MaxGates]resilience.Gate
	// Classify classifies an attempt's error, once for every gate.
	Classify resilience.Classifier
	// Observe: a gate's refusal that is a [resilience.Rejection] does not
	// refuse the attempt, which goes on without the gate
	// ([Pipeline.Observing]).
	Observe bool
	// MayWait: a gate may make an attempt wait; the attempt starts at a
	// reading of the clock once the gates admitted it ([Pipeline.Waiting]).
	MayWait bool
}

// Gates returns the pipeline's gates as it runs them.
func (p *Pipeline) Gates() *Gates { return &p.g }

// NewPipeline returns a pipeline of gates, outermost first; nil gates are
// skipped. classify decides each attempt's [resilience.Outcome] ([resilience.DefaultClassifier] when
// nil); clock measures each attempt's [resilience.Result.Duration] (the precise system
// clock when nil). More than [MaxGates] gates is an error.
func NewPipeline(classify resilience.Classifier, clock resilience.Clock, gates ...resilience.Gate) (*Pipeline, error) {
	p := &Pipeline{g: Gates{Classify: classify}, clock: clock}
	if p.g.Classify == nil {
		p.g.Classify = resilience.DefaultClassifier
	}
	if p.clock == nil {
		p.clock = resilience.SystemClock()
	}
	for _, g := range gates {
		if g != nil {
			p.gates = append(p.gates, g)
		}
	}
	if len(p.gates) > MaxGates {
		return nil, &resilience.OptionError{Option: "gates", Value: len(p.gates), Problem: "at most " + strconv.Itoa(MaxGates)}
	}
	p.g.N = len(p.gates)
	for i, g := range p.gates {
		p.g.Enters[i] = g
		if w, ok := g.(Wrapper); ok {
			if in := w.EntersThrough(); in != nil {
				p.g.Enters[i], p.g.Refused[i] = in, w
			}
		}
		p.g.Timed[i], _ = p.g.Enters[i].(TimedGate)
		p.g.Exits[i] = exitOf(g)
		p.early[i], _ = g.(EarlyGate)
		p.anyTimed = p.anyTimed || p.g.Timed[i] != nil
	}
	return p, nil
}

// Waiting returns a pipeline of the same gates whose gates may make an
// attempt wait (a bulkhead with a maxWaitDuration, a rate limiter with a
// timeoutDuration): [Pipeline.AdmitAt] reads the time again once they have
// all admitted an attempt, so that waiting at a gate never counts in the
// attempt's [resilience.Result.Duration].
func (p *Pipeline) Waiting() *Pipeline {
	q := *p
	q.g.MayWait = true
	return &q
}

// Len returns the number of gates.
func (p *Pipeline) Len() int { return len(p.gates) }

// Observing returns a pipeline of the same gates in observe mode (see
// [resilience.Observe]): a gate's refusal (a [resilience.Rejection]) does not refuse the attempt,
// which goes on to the next gate without that gate's permit, and that gate
// is not told how it ended. Admit the attempts of an observed context only
// (the gates' events then tell the refusal apart, and they neither wait nor
// shorten its deadline). Any other error from a gate refuses the attempt as
// usual.
func (p *Pipeline) Observing() *Pipeline {
	q := *p
	q.g.Observe = true
	return &q
}

// Admission is the permits one attempt holds. Fill it with
// [Pipeline.Admit], run the attempt with [Admission.Context], and end it with
// [Admission.Done]; defer [Admission.Abort] right after a successful Admit so
// that a panic gives every permit back. The zero Admission is ended.
type Admission struct {
	p       *Pipeline
	ctx     context.Context
	in      [MaxGates]context.Context
	permits [MaxGates]resilience.Permit
	n       int
	start   time.Time
	exited  uint8 // gates that exited early (Commit), by index
	// answered: Commit ran; answerIn is how long after start it ran, the
	// attempt's duration for the gates (see Commit).
	answered bool
	answerIn time.Duration
}

// Admit enters every gate in order. When a gate refuses, the gates already
// entered are exited with the refusal as an [resilience.Ignored] result, and Admit
// returns the refusal. a must not hold an attempt that has not ended.
func (p *Pipeline) Admit(ctx context.Context, a *Admission) error {
	var now time.Time
	if p.anyTimed {
		now = p.clock.Now()
	}
	return p.admit(ctx, a, now, true)
}

// AdmitAt is Admit at now, a time the caller read from the pipeline's
// clock: the gates that need the time ([TimedGate]) get it, and it is the
// attempt's start, unless the pipeline is [Pipeline.Waiting] (Admit reads
// the time again once the gates admitted the attempt; AdmitAt saves that
// clock read when no gate makes attempts wait).
func (p *Pipeline) AdmitAt(ctx context.Context, a *Admission, now time.Time) error {
	return p.admit(ctx, a, now, p.g.MayWait)
}

func (p *Pipeline) admit(ctx context.Context, a *Admission, now time.Time, reread bool) (err error) {
	a.p, a.n, a.exited, a.answered = p, 0, 0, false
	admitted := false
	defer func() {
		if !admitted { // a refusal, or a panic in a gate
			r := resilience.Result{Err: err, Outcome: resilience.Ignored}
			if err == nil {
				r.Err = resilience.ErrPanicked
			}
			a.exit(r)
		}
	}()
	for i := range p.gates {
		a.in[i] = ctx
		var next context.Context
		var pm resilience.Permit
		var gerr error
		if t := p.g.Timed[i]; t != nil {
			next, pm, gerr = t.EnterAt(ctx, now)
		} else {
			next, pm, gerr = p.g.Enters[i].Enter(ctx)
		}
		if gerr != nil {
			if w := p.g.Refused[i]; w != nil {
				gerr = w.Refused(gerr)
			}
			if !p.g.Observe || !resilience.IsRejection(gerr) {
				return gerr
			}
			// Observe mode: the refusal was reported; the attempt goes on,
			// and the gate, which holds nothing, is not exited.
			a.permits[i], a.n, a.exited = resilience.Permit{}, i+1, a.exited|1<<i
			continue
		}
		a.permits[i], a.n, ctx = pm, i+1, next
	}
	if p.g.MayWait && !p.g.Observe {
		// A gate that made the attempt wait may have admitted it as its
		// context ended (the permit came first, the attempt's goroutine ran
		// after the deadline): the attempt is not made, as a call whose
		// context ended before it began is not; the gates are exited with
		// the context's error, ignored, so the backend, never asked, is
		// counted for nothing.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	a.ctx = ctx
	a.start = now
	if reread {
		a.start = p.clock.Now()
	}
	admitted = true
	return nil
}

// Start returns when the admitted attempt started: once every gate had
// admitted it.
func (a *Admission) Start() time.Time { return a.start }

// Context returns the context the admitted attempt runs with.
func (a *Admission) Context() context.Context { return a.ctx }

// Done ends the attempt with its error: classified once, then reported to
// every gate, innermost first. It returns the error for the caller: err, as
// the gates passed it on (see [resilience.Gate]). Calls after the first return err and
// do nothing else.
func (a *Admission) Done(err error) error {
	if a.n == 0 {
		return err
	}
	return a.DoneAt(err, a.p.clock.Now())
}

// DoneAt is Done at end, a time the caller read from the pipeline's clock.
func (a *Admission) DoneAt(err error, end time.Time) error {
	return a.DoneIn(err, end, end.Sub(a.start))
}

// DoneIn is [Admission.DoneAt] of an attempt that took took, end minus
// [Admission.Start], for a caller that has it: it saves subtracting again.
func (a *Admission) DoneIn(err error, end time.Time, took time.Duration) error {
	if a.n == 0 {
		return err
	}
	if a.answered {
		took = a.answerIn
	}
	return a.exit(resilience.Result{Err: err, Outcome: a.p.g.Classify(err), Duration: took, End: end})
}

// Commit tells the early gates ([EarlyGate]) how the attempt went so far —
// err is nil for a stream's first response; those that take it now are not
// exited again by Done or Abort. Call it at most once per attempt.
//
// The time from the attempt's start to Commit is then its duration for
// every gate, also when Done or Abort ends it later: a stream's first
// answer tells how fast its server is, while its life (a watch that runs
// for hours) is its caller's doing. So a breaker judges a stream slow by
// its time to that answer, as it judges a half-open probe by it.
func (a *Admission) Commit(err error) {
	if a.n == 0 {
		return
	}
	end := a.p.clock.Now()
	a.answered, a.answerIn = true, end.Sub(a.start)
	r := resilience.Result{Err: err, Outcome: a.p.g.Classify(err), Duration: a.answerIn, End: end}
	for i := a.n - 1; i >= 0; i-- {
		if g := a.p.early[i]; g != nil && a.exited&(1<<i) == 0 && g.Commit(a.in[i], a.permits[i], r) {
			a.exited |= 1 << i
		}
	}
}

// Abort ends an attempt that did not reach Done — it panicked — giving every
// permit back with a [resilience.Failure] result and [resilience.ErrPanicked]. After Done it does
// nothing, so it is meant to be deferred.
func (a *Admission) Abort() {
	if a.n == 0 {
		return
	}
	a.AbortAt(a.p.clock.Now())
}

// Held reports whether the admission holds permits that Done or Abort
// has yet to give back.
func (a *Admission) Held() bool { return a.n > 0 }

// AbortAt is [Admission.Abort] at end, a time the caller read from the
// pipeline's clock.
func (a *Admission) AbortAt(end time.Time) {
	if a.n == 0 {
		return
	}
	took := end.Sub(a.start)
	if a.answered {
		took = a.answerIn
	}
	a.exit(resilience.Result{Err: resilience.ErrPanicked, Outcome: resilience.Failure, Duration: took, End: end})
}

// exit exits the entered gates, innermost first, each with the error the
// gate inside it passed on. When an Exit panics, the gates outside it are
// still exited before the panic goes on.
func (a *Admission) exit(r resilience.Result) error {
	i := a.n - 1
	a.n = 0
	return a.p.g.ExitFrom(&a.in, &a.permits, a.exited, i, r)
}

// ExitFrom exits gates i down to 0 but those in skip (by index),
// innermost first, each with in's context and permits's permit for it and
// the error the gate inside it passed on, and returns the outermost's.
// When an Exit panics, the gates outside it are still exited before the
// panic goes on.
func (g *Gates) ExitFrom(in *[MaxGates]context.Context, permits *[MaxGates]resilience.Permit, skip uint8, i int, r resilience.Result) error {
	defer func() {
		if i >= 0 { // gate i's Exit panicked
			for i--; i >= 0; i-- {
				if skip&(1<<i) == 0 {
					g.Exits[i].Exit(in[i], permits[i], r)
				}
			}
		}
	}()
	for ; i >= 0; i-- {
		// r is written only when the error changes: each Exit gets a copy
		// of r, and the copy of a field just written waits for the store.
		if skip&(1<<i) == 0 {
			if e := g.Exits[i].Exit(in[i], permits[i], r); e != nil || r.Err != nil {
				r.Err = e
			}
		}
	}
	return r.Err
}

// Run runs fn as one attempt through the pipeline: fn runs only when every
// gate admits it, with the context they return; its error is returned
// as the gates pass it on. A refusal is returned without running fn. A panic in fn gives
// every permit back and goes on up.
func (p *Pipeline) Run(ctx context.Context, fn resilience.Func) error {
	var a Admission
	if err := p.Admit(ctx, &a); err != nil {
		return err
	}
	defer a.Abort()
	return a.Done(fn(a.ctx))
}
