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
	// The closed path, without building a permit.
	clk := b.config().clock
	start := clk.Now()
	done := false
	defer func() {
		if !done {
			now := clk.Now()
			b.finish(ctx, p, nil, resilience.Failure, now.Sub(start), now)
		}
	}()
	err := fn(ctx)
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
func (b *Breaker) Apply(ctx context.Context, next resilience.Next) error {
	return b.Execute(ctx, next.Run)
}
