package circuitbreaker

import (
	"context"
	"time"

	"github.com/meshless/meshless/resilience"
)

var (
	_ resilience.Policy = (*Breaker)(nil)
	_ resilience.Gate   = (*Breaker)(nil)
)

// Execute runs fn if the breaker admits it and records its result: the
// error fn returns, classified, and how long it took. When the breaker
// rejects the call, fn does not run and Execute returns the rejection
// (errors.Is(err, [ErrOpen])). A panic in fn is recorded as a failure, as
// Resilience4j counts an exception, and goes on up. Otherwise Execute returns fn's error unchanged.
func (b *Breaker) Execute(ctx context.Context, fn func(context.Context) error) error {
	p := b.cur.Load()
	switch p.state {
	case StateClosed, StateMetricsOnly:
	case StateOpen, StateForcedOpen:
		return b.reject(ctx, p)
	default:
		return b.executeSlow(ctx, fn)
	}
	clk := b.config().clock
	return b.closed(ctx, p, clk, clk.Now(), fn, resilience.Next{})
}

// closed runs fn on the closed path, without building a permit: a call
// that began at start, a reading of clk. When fn is nil it runs next,
// passing start on ([resilience.Next.RunAt]).
func (b *Breaker) closed(ctx context.Context, p *period, clk resilience.Clock, start time.Time, fn func(context.Context) error, next resilience.Next) error {
	done := false
	defer func() {
		if !done {
			now := clk.Now()
			b.finish(ctx, p, nil, resilience.Failure, now.Sub(start), now)
		}
	}()
	var err error
	if fn != nil {
		err = fn(ctx)
	} else {
		err = next.RunAt(ctx, start)
	}
	done = true
	now := endOf(clk, start)
	b.finish(ctx, p, nil, b.outcome(err), now.Sub(start), now)
	return err
}

// endOf reads clk at the end of a call that began at start, a reading of
// clk: with the system clock, the monotonic clock only (time.Since, half
// the cost of time.Now), start plus the time elapsed.
func endOf(clk resilience.Clock, start time.Time) time.Time {
	if clk == resilience.SystemClock() {
		return start.Add(time.Since(start))
	}
	return clk.Now()
}

func (b *Breaker) executeSlow(ctx context.Context, fn func(context.Context) error) error {
	pm, err := b.acquire(ctx)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			pm.Record(resilience.Failure)
		}
	}()
	err = fn(ctx)
	done = true
	pm.Done(err)
	return err
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
	clk := b.config().clock
	if clk != resilience.SystemClock() {
		return b.closed(ctx, p, clk, clk.Now(), next.Run, resilience.Next{})
	}
	start, ok := next.Entered()
	if !ok {
		start = time.Now()
	}
	return b.closed(ctx, p, clk, start, nil, next)
}
