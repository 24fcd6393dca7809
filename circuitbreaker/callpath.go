package circuitbreaker

import (
	"context"
	"time"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
)

// This file is the path every call takes through the breaker, in the order a
// call runs it. It is one file for the sake of the code's layout: the Go
// linker keeps a package's functions in the order of its source files, so
// the path's code sits together on few pages of memory. A real call runs it
// cold, after the transport's own path has evicted it, and every page it
// spans shows (docs/benchmarks/b5-pairs.md, "What a cold call pays for").

// Execute runs fn if the breaker admits it and records its result: the
// error fn returns, classified, and how long it took. When the breaker
// rejects the call, fn does not run and Execute returns the rejection
// (errors.Is(err, [ErrOpen])). A panic in fn is recorded as a failure, as
// Resilience4j counts an exception, and goes on up. Otherwise Execute returns fn's error unchanged.
//
// Execute and Apply call fn (next) from their own frame, not through a
// helper: every frame between a caller and its call costs a mispredicted
// return once the call has been deep in the runtime or the kernel
// (docs/benchmarks/b4-parts.md, the depth run). What follows the call is
// in ended.
func (b *Breaker) Execute(ctx context.Context, fn func(context.Context) error) error {
	p := b.cur.Load()
	switch p.state {
	case StateClosed, StateMetricsOnly:
	case StateOpen, StateForcedOpen:
		return b.reject(ctx, p)
	default:
		return b.executeSlow(ctx, fn)
	}
	c := b.config()
	start := c.clock.Now()
	done := false
	defer func() {
		if !done {
			b.panicked(ctx, p, c, start)
		}
	}()
	err := fn(ctx)
	done = true
	if err == timely.Err { // fn is a chain's next, with a timeout that tells (internal/timely)
		err = nil
	}
	return b.ended(ctx, err, start, p, c)
}

// Apply is [Breaker.Execute] in the shape of [resilience.Policy], the method
// through which [resilience.NewChain] composes policies; it is not a second
// way in: call Execute, or put the breaker in a chain.
//
// In a chain the breaker shares its clock reading: on the system clock, a
// call's start is the time the policy outside passed ([resilience.Next.Entered]),
// or the breaker's own reading, and the breaker passes it on
// ([resilience.Next.RunAt]) — a per-attempt timeout inside derives its
// deadline from it instead of reading the clock again.
func (b *Breaker) Apply(ctx context.Context, next resilience.Next) error {
	p := b.cur.Load()
	switch p.state {
	case StateClosed, StateMetricsOnly:
	case StateOpen, StateForcedOpen:
		return b.reject(ctx, p)
	default:
		return b.executeSlow(ctx, next.Run)
	}
	c := b.config()
	if !c.system {
		return b.Execute(ctx, next.Run) // on another clock nothing is passed on (it loads the state again)
	}
	start, ok := next.Entered()
	if !ok {
		start = time.Now()
	}
	done := false
	defer func() {
		if !done {
			b.panicked(ctx, p, c, start)
		}
	}()
	err := next.RunAt(ctx, start)
	done = true
	// ended's system-clock path, inline: measured, the call to ended costs
	// B4 5-10 ns more than its work (b4-parts.md, the depth run).
	o := resilience.Success
	if err != nil {
		if err == timely.Err {
			// A timeout inside succeeded with its deadline live: the call
			// took less than half the slow-call threshold (internal/timely).
			if b.rec == nil && p.win.clean() {
				return nil // quiet, without the call's end
			}
			err = nil
		} else {
			o = b.outcome(err)
		}
	}
	took := time.Since(start)
	if b.quiet(p, c, o, took) {
		return err
	}
	b.finish(ctx, p, nil, o, took, start.Add(took))
	return err
}

// ended records a call on the closed path of period p that began at start,
// a reading of c's clock, and returned err, which it returns. (The
// parameters are in the order that passes start in registers.)
func (b *Breaker) ended(ctx context.Context, err error, start time.Time, p *period, c *config) error {
	o := resilience.Success
	if err != nil {
		o = b.outcome(err)
	}
	if c.system {
		took := time.Since(start) // the monotonic clock only: half the cost of time.Now
		if b.quiet(p, c, o, took) {
			return err // no end time to compute
		}
		b.finish(ctx, p, nil, o, took, start.Add(took))
		return err
	}
	now := c.clock.Now()
	b.finish(ctx, p, nil, o, now.Sub(start), now)
	return err
}

// panicked records a call on the closed path of period p that began at
// start and panicked: a failure.
func (b *Breaker) panicked(ctx context.Context, p *period, c *config, start time.Time) {
	now := c.clock.Now()
	b.finish(ctx, p, nil, resilience.Failure, now.Sub(start), now)
}

// Enter is the first step of the [resilience.Gate] contract, for meshless's
// engine, which runs a call's gates in order around each attempt: it admits
// the attempt or rejects it (an [*OpenError]), as [Breaker.Execute] does, and
// [Breaker.Exit] must then be told, exactly once, how the attempt ended. A
// closed breaker admits without reading the clock: the engine measures the
// attempt. Users run calls with [Breaker.Execute].
func (b *Breaker) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	switch p := b.cur.Load(); p.state {
	case StateClosed, StateMetricsOnly:
		return ctx, resilience.Permit{Ref: p}, nil
	case StateDisabled:
		return ctx, resilience.Permit{}, nil
	}
	pm, err := b.acquire(ctx)
	switch {
	case err != nil:
		return ctx, resilience.Permit{}, err
	case pm.probe != nil:
		return ctx, resilience.Permit{Ref: pm.probe}, nil
	case pm.per != nil:
		return ctx, resilience.Permit{Ref: pm.per}, nil
	}
	return ctx, resilience.Permit{}, nil // disabled: nothing to record
}

// Exit records the result of a call that [Breaker.Enter] admitted: its
// outcome, and its duration as the pipeline measured it (the call's own
// time, without local queueing) for the slow-call rate.
func (b *Breaker) Exit(ctx context.Context, pm resilience.Permit, r resilience.Result) error {
	switch v := pm.Ref.(type) {
	case *period:
		if !b.quiet(v, b.config(), r.Outcome, r.Duration) {
			b.finish(ctx, v, nil, r.Outcome, r.Duration, r.End)
		}
	case *probe: // unless settled by its context's end
		v.report(func() { b.finish(ctx, v.per, v, r.Outcome, r.Duration, r.End) })
	}
	return r.Err
}

func (b *Breaker) outcome(err error) resilience.Outcome {
	switch {
	case err == nil:
		return resilience.Success
	case resilience.IsRejection(err):
		return resilience.Ignored
	}
	return b.config().classify(err)
}

// quiet reports whether finish, for a call of period p on the closed path
// that ended with o after d, would do nothing: the breaker has no observer
// and the call would not change p's window.
func (b *Breaker) quiet(p *period, c *config, o resilience.Outcome, d time.Duration) bool {
	return b.rec == nil && (o == resilience.Ignored ||
		o == resilience.Success && d <= c.SlowCallDurationThreshold && p.win.clean())
}

func (b *Breaker) finish(ctx context.Context, p *period, pr *probe, o resilience.Outcome, d time.Duration, now time.Time) {
	c := b.config()
	slow := d > c.SlowCallDurationThreshold
	if b.rec != nil {
		b.finishObserved(ctx, p, pr, o, d, slow, now)
		return
	}
	b.count(ctx, p, pr, o, slow, now)
}

// finishObserved is finish with an observer: the call's event first, then
// the call counted — also when the recorder panics, so that a probe's
// place is given back (a breaker never stays half-open for want of it).
func (b *Breaker) finishObserved(ctx context.Context, p *period, pr *probe, o resilience.Outcome, d time.Duration, slow bool, now time.Time) {
	defer b.count(ctx, p, pr, o, slow, now)
	b.rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Outcome: o, Duration: d, Slow: slow})
}

// count counts a call that ended with o in p: in its window, or as a
// half-open probe.
func (b *Breaker) count(ctx context.Context, p *period, pr *probe, o resilience.Outcome, slow bool, now time.Time) {
	switch {
	case pr != nil:
		b.recordProbe(ctx, p, o, slow)
	case o == resilience.Ignored:
	case o == resilience.Success && !slow && p.win.clean():
		// The window would not change: nothing to write.
	default:
		b.recordWindow(ctx, p, o == resilience.Failure, slow, now)
	}
}

func (w *countWindow) clean() bool { return w.isClean.Load() }

func (w *timeWindow) clean() bool { return false }
