package ratelimiter_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/ratelimiter"
)

// lagCtx is a context whose Deadline takes lag to answer, standing for any
// delay between acquireWaiting's start := time.Now() and failsafe-go's own
// clock read inside TryReservePermit (preemption, failsafe-go's mutex held by
// other waiters, a context implementation that does work in Deadline).
// acquireWaiting reads the clock before ctx.Deadline and never again, and
// failsafe-go returns its wait relative to its own, later, reading.
type lagCtx struct {
	context.Context
	lag time.Duration
}

func (c lagCtx) Deadline() (time.Time, bool) {
	time.Sleep(c.lag)
	return c.Context.Deadline()
}

// A call whose permit would come only after its deadline must be refused at
// once and spend nothing (docs/ratelimiter.md). With 300ms between start and
// the reservation, a permit due at 1.0s is reserved for a call whose deadline
// is 0.9s: it waits until its deadline, is refused with a Cause, and its
// permit of the next period is gone.
func TestAPermitDueAfterTheDeadlineIsNotWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 1
			c.LimitRefreshPeriod = time.Second
			c.TimeoutDuration = 5 * time.Second
		})))
		t0 := time.Now()
		if _, _, err := l.Enter(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		dctx, cancel := context.WithDeadline(t.Context(), t0.Add(900*time.Millisecond))
		defer cancel()
		_, _, err := l.Enter(lagCtx{dctx, 300 * time.Millisecond})
		var le *ratelimiter.LimitedError
		if !errors.As(err, &le) {
			t.Fatalf("Enter = %v, want a rejection: the next permit (1.0s) comes after the deadline (0.9s)", err)
		}
		if le.Cause != nil || time.Since(t0) != 600*time.Millisecond {
			t.Fatalf("refused at %v with cause %v; want refused at once (0.6s, after Deadline's lag) without waiting", time.Since(t0), le.Cause)
		}
		time.Sleep(t0.Add(time.Second).Sub(time.Now()))
		if got := admitAll(t, l); got != 1 {
			t.Fatalf("the second period admits %d calls, want 1: the refused call spent its permit", got)
		}
	})
}

// A bursty waiter that gives up schedules refresh for when its permit falls
// due, computed as wait - time.Since(start); with the same lag, that fires
// before the period begins, refresh sees the old period and does nothing,
// and failsafe-go's uncapped pay-back comes back: lent 1 permit of a limit
// of 2, then idle for 3 periods, the limiter admits 5 calls in one period.
func TestAWaiterThatGivesUpKeepsLaterPeriodsWithinTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 2
			c.LimitRefreshPeriod = time.Second
			c.TimeoutDuration = 5 * time.Second
		})))
		t0 := time.Now()
		for range 2 {
			if _, _, err := l.Enter(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { _, _, err := l.Enter(lagCtx{ctx, 300 * time.Millisecond}); done <- err }()
		time.Sleep(400 * time.Millisecond) // 0.7s: the waiter reserved a permit due at 1.0s and waits
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter: %v, want a rejection caused by its context", err)
		}
		time.Sleep(t0.Add(3500 * time.Millisecond).Sub(time.Now()))
		if got := admitAll(t, l); got != 2 {
			t.Fatalf("%d calls admitted at once in period 3, want limitForPeriod (2)", got)
		}
	})
}
