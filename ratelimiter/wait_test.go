package ratelimiter_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// newWaiting returns, inside a bubble, a bursty limiter of one call per
// 100ms that lets calls wait up to timeout, with its period's permit spent,
// and the observer that sees its events.
func newWaiting(t *testing.T, timeout time.Duration) (*ratelimiter.Limiter, *resiliencetest.Observer) {
	obs := new(resiliencetest.Observer)
	l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
		c.LimitForPeriod = 1
		c.LimitRefreshPeriod = 100 * time.Millisecond
		c.TimeoutDuration = timeout
	})), ratelimiter.WithName("w"), ratelimiter.WithObserver(obs))
	if _, _, err := l.Enter(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l, obs
}

func TestWaiterIsAdmittedWhenTheNextPeriodBeginsInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, obs := newWaiting(t, 200*time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		start := time.Now()
		_, _, err := l.Enter(t.Context())
		if err != nil {
			t.Fatalf("Enter: %v, want a permit at the next period", err)
		}
		if waited := time.Since(start); waited != 70*time.Millisecond {
			t.Fatalf("admitted after %v, want 70ms (the next period)", waited)
		}
		acq := obs.Events(resilience.EventAcquired)
		if len(acq) != 2 || acq[1].Duration != 70*time.Millisecond {
			t.Fatalf("acquired events %+v, want the second with a 70ms wait", acq)
		}
	})
}

func TestWaiterIsRejectedAtOnceWhenNoPermitComesInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, obs := newWaiting(t, 50*time.Millisecond)
		start := time.Now()
		_, _, err := l.Enter(t.Context())
		if time.Since(start) != 0 {
			t.Fatalf("Enter waited %v before refusing, want 0", time.Since(start))
		}
		var le *ratelimiter.LimitedError
		if !errors.As(err, &le) || le.Cause != nil {
			t.Fatalf("err = %v, want a LimitedError without a cause", err)
		}
		if rej := obs.Events(resilience.EventRejection); len(rej) != 1 || rej[0].Err != err || rej[0].Duration != 0 {
			t.Fatalf("rejection events %+v", rej)
		}
		// The refused call reserved nothing: the next period's permit is free.
		time.Sleep(100 * time.Millisecond)
		if got := admitAll(t, l); got != 1 {
			t.Fatalf("next period admitted %d, want 1", got)
		}
	})
}

func TestWaitersAreServedInOrderWithinTimeoutDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newWaiting(t, 250*time.Millisecond)
		start := time.Now()
		type result struct {
			i      int
			err    error
			waited time.Duration
		}
		results := make(chan result, 4)
		for i := range 4 {
			go func() {
				_, _, err := l.Enter(t.Context())
				results <- result{i, err, time.Since(start)}
			}()
			synctest.Wait() // goroutine i has reserved (or been refused) before i+1 asks
		}
		got := map[int]result{}
		for range 4 {
			r := <-results
			got[r.i] = r
		}
		for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
			if r := got[i]; r.err != nil || r.waited != want {
				t.Errorf("waiter %d: %v after %v, want admitted after %v", i, r.err, r.waited, want)
			}
		}
		for i := 2; i < 4; i++ { // 300ms and 400ms are beyond the 250ms timeoutDuration
			if r := got[i]; !errors.Is(r.err, ratelimiter.ErrLimited) || r.waited != 0 {
				t.Errorf("waiter %d: %v after %v, want refused at once", i, r.err, r.waited)
			}
		}
	})
}

func TestWaiterWhoseContextEndsReturnsAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{name: "cancelled", want: context.Canceled, ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(30*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{name: "deadline", want: context.DeadlineExceeded, ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
			// A deadline that the permit would miss is refused up front;
			// hide it, so that its end interrupts the wait.
			ctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			return withoutDeadline{ctx}, cancel
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, obs := newWaiting(t, time.Second)
				ctx, cancel := tt.ctx(t.Context())
				defer cancel()
				start := time.Now()
				_, _, err := l.Enter(ctx)
				if waited := time.Since(start); waited != 30*time.Millisecond {
					t.Fatalf("Enter returned after %v, want 30ms, when the context ended", waited)
				}
				var le *ratelimiter.LimitedError
				if !errors.As(err, &le) || !errors.Is(err, tt.want) || !errors.Is(err, ratelimiter.ErrLimited) ||
					!resilience.IsRejection(err) {
					t.Fatalf("err = %v, want a LimitedError with cause %v", err, tt.want)
				}
				if rej := obs.Events(resilience.EventRejection); len(rej) != 1 || rej[0].Duration != 30*time.Millisecond {
					t.Fatalf("rejection events %+v, want one after 30ms", rej)
				}
			})
		})
	}
}

// withoutDeadline hides a context's deadline, so that the limiter cannot
// refuse the call up front and the context's end interrupts the wait.
type withoutDeadline struct{ context.Context }

func (withoutDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

func TestCallWhoseDeadlineComesBeforeThePermitIsRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newWaiting(t, time.Second)
		for _, d := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			_, _, err := l.Enter(ctx)
			cancel()
			var le *ratelimiter.LimitedError
			if !errors.As(err, &le) || le.Cause != nil {
				t.Fatalf("deadline in %v: err = %v, want refused at once without a cause", d, err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 101*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, _, err := l.Enter(ctx); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("deadline in 101ms: %v after %v, want admitted at 100ms", err, time.Since(start))
		}
	})
}

func TestCallWhoseContextHasEndedIsRefusedWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newWaiting(t, time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, _, err := l.Enter(ctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ratelimiter.ErrLimited) {
			t.Fatalf("err = %v", err)
		}
		// A free permit is taken whatever the context.
		time.Sleep(100 * time.Millisecond)
		if _, _, err := l.Enter(ctx); err != nil {
			t.Fatalf("free permit with an ended context: %v", err)
		}
	})
}

func TestSmoothWaitersAreSpacedByTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitForPeriod = 10
			c.TimeoutDuration = 250 * time.Millisecond
		})))
		start := time.Now()
		waited := make([]time.Duration, 5)
		errs := make([]error, 5)
		done := make(chan struct{})
		for i := range 5 {
			go func() {
				_, _, errs[i] = l.Enter(t.Context())
				waited[i] = time.Since(start)
				done <- struct{}{}
			}()
			synctest.Wait() // in order
		}
		for range 5 {
			<-done
		}
		for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
			if errs[i] != nil || waited[i] != want {
				t.Errorf("call %d: %v after %v, want admitted after %v", i, errs[i], waited[i], want)
			}
		}
		for i := 3; i < 5; i++ {
			if !errors.Is(errs[i], ratelimiter.ErrLimited) || waited[i] != 0 {
				t.Errorf("call %d: %v after %v, want refused at once (due beyond 250ms)", i, errs[i], waited[i])
			}
		}
	})
}
