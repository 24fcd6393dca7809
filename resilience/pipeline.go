package resilience

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Gate is a policy in two steps: Enter admits one attempt (or refuses it),
// and Exit is told, exactly once, how the admitted attempt ended. Circuit
// breakers, rate limiters, bulkheads and per-attempt timeouts are gates; a
// [Pipeline] runs them in order.
//
// Enter returns the context the rest of the attempt runs with (a timeout
// derives one; most gates return ctx unchanged) and a [Permit] that Exit gets
// back. A refusal is a [Rejection]. Exit receives the same ctx that Enter
// received, and returns the error the attempt ends with for the gates
// outside it and the caller: r.Err unchanged, or r.Err wrapped (a timeout
// marks the errors its own deadline caused).
//
// Implementations must be safe for concurrent use and must not block in
// Exit.
type Gate interface {
	Enter(ctx context.Context) (context.Context, Permit, error)
	Exit(ctx context.Context, p Permit, r Result) error
}

// An EarlyGate is a [Gate] that may take an attempt's result as soon as the
// attempt commits (see [Admission.Commit]), before it ends: a half-open
// circuit breaker's probe takes a stream's first response as its verdict, so
// that a stream that lives for hours never holds a probe nor keeps the
// breaker from deciding. Commit reports whether the gate has exited; if not,
// its Exit comes when the attempt ends, as for any gate.
type EarlyGate interface {
	Gate
	Commit(ctx context.Context, p Permit, r Result) (exited bool)
}

// A TimedGate is a [Gate] that needs the time to admit an attempt (the
// adaptive throttler's window): a [Pipeline] gives it the time it read for
// the attempt, so that no gate reads the clock of its own.
type TimedGate interface {
	Gate
	// EnterAt is Enter at now.
	EnterAt(ctx context.Context, now time.Time) (context.Context, Permit, error)
}

// Permit is a gate's admission of one attempt. Its fields belong to the gate
// that issued it; hold pointer-shaped values in them so that building a
// Permit does not allocate.
type Permit struct {
	Ref, Aux any
}

// Result is how an admitted attempt ended, as a [Pipeline] reports it to
// each gate's Exit.
type Result struct {
	// Err is the attempt's error; [ErrPanicked] when it panicked.
	Err error
	// Outcome is Err classified by the pipeline's [Classifier], once for every
	// gate. A panic in the attempt is a [Failure], as Resilience4j counts an
	// exception; a panic in a gate, before the attempt ran, is [Ignored].
	Outcome Outcome
	// Duration is the attempt's own time, from the moment every gate had
	// admitted it: time spent waiting at a gate (a bulkhead's queue) is local
	// and not counted, so it never makes a call "slow".
	Duration time.Duration
	// End is when the attempt ended, read from the pipeline's clock.
	End time.Time
}

// ErrPanicked is the error a [Result] carries when the attempt panicked. The
// panic itself goes on up to the caller unchanged.
var ErrPanicked = errors.New("resilience: the call panicked")

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
	gates    []Gate
	timed    [MaxGates]TimedGate // gates[i] as a TimedGate, or nil
	classify Classifier
	clock    Clock
	observe  bool // admits what a gate refuses (Observing)
	mayWait  bool // a gate may make an attempt wait: read the time after the gates
}

// NewPipeline returns a pipeline of gates, outermost first; nil gates are
// skipped. classify decides each attempt's [Outcome] ([DefaultClassifier] when
// nil); clock measures each attempt's [Result.Duration] (the precise system
// clock when nil). More than [MaxGates] gates is an error.
func NewPipeline(classify Classifier, clock Clock, gates ...Gate) (*Pipeline, error) {
	p := &Pipeline{classify: classify, clock: clock}
	if p.classify == nil {
		p.classify = DefaultClassifier
	}
	if p.clock == nil {
		p.clock = preciseClock{}
	}
	for _, g := range gates {
		if g != nil {
			p.gates = append(p.gates, g)
		}
	}
	if len(p.gates) > MaxGates {
		return nil, &OptionError{Option: "gates", Value: len(p.gates), Problem: "at most " + strconv.Itoa(MaxGates)}
	}
	for i, g := range p.gates {
		p.timed[i], _ = g.(TimedGate)
	}
	return p, nil
}

// Waiting returns a pipeline of the same gates whose gates may make an
// attempt wait (a bulkhead with a maxWaitDuration, a rate limiter with a
// timeoutDuration): [Pipeline.AdmitAt] reads the time again once they have
// all admitted an attempt, so that waiting at a gate never counts in the
// attempt's [Result.Duration].
func (p *Pipeline) Waiting() *Pipeline {
	q := *p
	q.mayWait = true
	return &q
}

// Len returns the number of gates.
func (p *Pipeline) Len() int { return len(p.gates) }

// Observing returns a pipeline of the same gates in observe mode (see
// [Observe]): a gate's refusal (a [Rejection]) does not refuse the attempt,
// which goes on to the next gate without that gate's permit, and that gate
// is not told how it ended. Admit the attempts of an observed context only
// (the gates' events then tell the refusal apart, and they neither wait nor
// shorten its deadline). Any other error from a gate refuses the attempt as
// usual.
func (p *Pipeline) Observing() *Pipeline {
	q := *p
	q.observe = true
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
	permits [MaxGates]Permit
	n       int
	start   time.Time
	exited  uint8 // gates that exited early (Commit), by index
}

// Admit enters every gate in order. When a gate refuses, the gates already
// entered are exited with the refusal as an [Ignored] result, and Admit
// returns the refusal. a must not hold an attempt that has not ended.
func (p *Pipeline) Admit(ctx context.Context, a *Admission) error {
	var now time.Time
	if p.timed != [MaxGates]TimedGate{} {
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
	return p.admit(ctx, a, now, p.mayWait)
}

func (p *Pipeline) admit(ctx context.Context, a *Admission, now time.Time, reread bool) (err error) {
	a.p, a.n, a.exited = p, 0, 0
	admitted := false
	defer func() {
		if !admitted { // a refusal, or a panic in a gate
			r := Result{Err: err, Outcome: Ignored}
			if err == nil {
				r.Err = ErrPanicked
			}
			a.exit(r)
		}
	}()
	for i, g := range p.gates {
		a.in[i] = ctx
		var next context.Context
		var pm Permit
		var gerr error
		if t := p.timed[i]; t != nil {
			next, pm, gerr = t.EnterAt(ctx, now)
		} else {
			next, pm, gerr = g.Enter(ctx)
		}
		if gerr != nil {
			if !p.observe || !IsRejection(gerr) {
				return gerr
			}
			// Observe mode: the refusal was reported; the attempt goes on,
			// and the gate, which holds nothing, is not exited.
			a.permits[i], a.n, a.exited = Permit{}, i+1, a.exited|1<<i
			continue
		}
		a.permits[i], a.n, ctx = pm, i+1, next
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
// the gates passed it on (see [Gate]). Calls after the first return err and
// do nothing else.
func (a *Admission) Done(err error) error {
	if a.n == 0 {
		return err
	}
	return a.DoneAt(err, a.p.clock.Now())
}

// DoneAt is Done at end, a time the caller read from the pipeline's clock.
func (a *Admission) DoneAt(err error, end time.Time) error {
	if a.n == 0 {
		return err
	}
	return a.exit(Result{Err: err, Outcome: a.p.classify(err), Duration: end.Sub(a.start), End: end})
}

// Commit tells the early gates ([EarlyGate]) how the attempt went so far —
// err is nil for a stream's first response; those that take it now are not
// exited again by Done or Abort. Call it at most once per attempt.
func (a *Admission) Commit(err error) {
	if a.n == 0 {
		return
	}
	end := a.p.clock.Now()
	r := Result{Err: err, Outcome: a.p.classify(err), Duration: end.Sub(a.start), End: end}
	for i := a.n - 1; i >= 0; i-- {
		if g, ok := a.p.gates[i].(EarlyGate); ok && a.exited&(1<<i) == 0 && g.Commit(a.in[i], a.permits[i], r) {
			a.exited |= 1 << i
		}
	}
}

// Abort ends an attempt that did not reach Done — it panicked — giving every
// permit back with a [Failure] result and [ErrPanicked]. After Done it does
// nothing, so it is meant to be deferred.
func (a *Admission) Abort() {
	if a.n == 0 {
		return
	}
	end := a.p.clock.Now()
	a.exit(Result{Err: ErrPanicked, Outcome: Failure, Duration: end.Sub(a.start), End: end})
}

// exit exits the entered gates, innermost first, each with the error the
// gate inside it passed on. When an Exit panics, the gates outside it are
// still exited before the panic goes on.
func (a *Admission) exit(r Result) error {
	i := a.n - 1
	a.n = 0
	defer func() {
		if i >= 0 { // gates[i].Exit panicked
			for i--; i >= 0; i-- {
				if a.exited&(1<<i) == 0 {
					a.p.gates[i].Exit(a.in[i], a.permits[i], r)
				}
			}
		}
	}()
	for ; i >= 0; i-- {
		if a.exited&(1<<i) == 0 {
			r.Err = a.p.gates[i].Exit(a.in[i], a.permits[i], r)
		}
	}
	return r.Err
}

// Run runs fn as one attempt through the pipeline: fn runs only when every
// gate admits it, with the context they return; its error is returned
// as the gates pass it on. A refusal is returned without running fn. A panic in fn gives
// every permit back and goes on up.
func (p *Pipeline) Run(ctx context.Context, fn Func) error {
	var a Admission
	if err := p.Admit(ctx, &a); err != nil {
		return err
	}
	defer a.Abort()
	return a.Done(fn(a.ctx))
}
