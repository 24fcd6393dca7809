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

// The limiters' time is failsafe-go's, which reads time.Now: these tests
// build and drive them inside synctest bubbles, where time is fake and moves
// only when every goroutine in the bubble is blocked (time.Sleep is instant).

func TestBurstyAdmitsTheLimitEachPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 5
			c.LimitRefreshPeriod = time.Second
		})))
		start := time.Now()
		for period := range 4 {
			if got := admitAll(t, l); got != 5 {
				t.Fatalf("period %d: %d calls admitted at once, want 5", period, got)
			}
			// Just before the next period: still nothing.
			time.Sleep(start.Add(time.Duration(period+1)*time.Second - time.Nanosecond).Sub(time.Now()))
			if got := admitAll(t, l); got != 0 {
				t.Fatalf("period %d: %d calls admitted at its very end, want 0", period, got)
			}
			time.Sleep(time.Nanosecond) // the next period begins
		}
	})
}

func TestBurstyUnusedPermitsDoNotCarryOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 3
			c.LimitRefreshPeriod = time.Second
		})))
		time.Sleep(10 * time.Second) // ten idle periods
		if got := admitAll(t, l); got != 3 {
			t.Fatalf("%d calls admitted after idle periods, want 3", got)
		}
	})
}

// failsafe-go v0.9.8's bursty limiter pays back permits lent to waiters of
// the next period by adding limitForPeriod per elapsed period, without a
// cap: lent 2, then idle for 3 periods, it admitted 13 calls of a limit of 5
// at once. The limiter refreshes failsafe-go's period when the lent permits
// fall due, whether their waiters are still there or gave up.
func TestBurstyPermitsLentToWaitersArePaidBackOnce(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cancel bool
	}{
		{name: "waiters admitted"},
		{name: "waiters gave up", cancel: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
					c.LimitForPeriod = 5
					c.LimitRefreshPeriod = time.Second
					c.TimeoutDuration = 2 * time.Second
				})))
				for range 5 {
					if _, _, err := l.Enter(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				done := make(chan error, 2)
				for range 2 {
					go func() { _, _, err := l.Enter(ctx); done <- err }()
				}
				synctest.Wait() // both wait for a permit of the second period
				if tt.cancel {
					time.Sleep(500 * time.Millisecond)
					cancel()
				}
				for range 2 {
					if err := <-done; (err != nil) != tt.cancel {
						t.Fatalf("waiter: %v", err)
					}
				}
				time.Sleep(3500*time.Millisecond - time.Duration(time.Now().UnixNano()%int64(time.Second)))
				if got := admitAll(t, l); got != 5 {
					t.Fatalf("%d calls admitted at once in a later period, want 5", got)
				}
			})
		})
	}
}

func TestSmoothSpacesThePermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitForPeriod = 10
			c.LimitRefreshPeriod = time.Second
		})))
		if got := admitAll(t, l); got != 1 {
			t.Fatalf("%d calls admitted at once, want 1 (one per 100ms)", got)
		}
		time.Sleep(99 * time.Millisecond)
		if got := admitAll(t, l); got != 0 {
			t.Fatalf("%d calls admitted 99ms later, want 0", got)
		}
		time.Sleep(time.Millisecond)
		if got := admitAll(t, l); got != 1 {
			t.Fatalf("%d calls admitted 100ms later, want 1", got)
		}
		// Asked every millisecond for a period, it admits limitForPeriod calls.
		total := 0
		for range 1000 {
			time.Sleep(time.Millisecond)
			total += admitAll(t, l)
		}
		if total != 10 {
			t.Fatalf("%d calls admitted in one period, want 10", total)
		}
	})
}

func TestBurstyAndSmoothDifferOnABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			mode ratelimiter.Mode
			want int
		}{
			{mode: ratelimiter.Bursty, want: 10},
			{mode: ratelimiter.Smooth, want: 1},
		} {
			l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
				c.Mode = tt.mode
				c.LimitForPeriod = 10
			})))
			if got := admitAll(t, l); got != tt.want {
				t.Errorf("%v: a burst of calls admitted %d, want %d", tt.mode, got, tt.want)
			}
			if l.Mode() != tt.mode {
				t.Errorf("Mode() = %v, want %v", l.Mode(), tt.mode)
			}
		}
	})
}

func TestDefaults(t *testing.T) {
	l := mustNew(t)
	if l.LimitForPeriod() != 50 || l.LimitRefreshPeriod() != time.Second || l.TimeoutDuration() != 0 ||
		l.Mode() != ratelimiter.Bursty || l.Name() != "" {
		t.Fatalf("defaults: %d per %v, timeout %v, %v, name %q; want 50 per 1s, 0s, bursty, \"\"",
			l.LimitForPeriod(), l.LimitRefreshPeriod(), l.TimeoutDuration(), l.Mode(), l.Name())
	}
}

func TestRejectionIsASharedLimitedError(t *testing.T) {
	l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
		c.LimitForPeriod = 1
		c.LimitRefreshPeriod = time.Hour
	})), ratelimiter.WithName("payments"))
	if _, _, err := l.Enter(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, _, err1 := l.Enter(t.Context())
	err2 := l.Execute(t.Context(), func(context.Context) error { t.Fatal("fn ran"); return nil })
	var le *ratelimiter.LimitedError
	if !errors.As(err1, &le) || err1 != err2 {
		t.Fatalf("errors %v, %v: want one shared *LimitedError", err1, err2)
	}
	if le.Name != "payments" || le.LimitForPeriod != 1 || le.LimitRefreshPeriod != time.Hour || le.Cause != nil {
		t.Fatalf("LimitedError %+v", le)
	}
	if want := `rate limiter "payments": limit reached (1 calls per 1h0m0s)`; err1.Error() != want {
		t.Fatalf("Error() = %q, want %q", err1, want)
	}
	if !errors.Is(err1, ratelimiter.ErrLimited) || !resilience.IsRejection(err1) {
		t.Fatal("not ErrLimited, or not a rejection")
	}
	if r, _ := resilience.AsRejection(err1); r.RejectedBy() != resilience.KindRateLimiter {
		t.Fatalf("RejectedBy = %v", r.RejectedBy())
	}
	if got := resilience.DefaultClassifier(err1); got != resilience.Ignored {
		t.Fatalf("classified %v, want ignored", got)
	}
	if errors.Is(errUnavailable, ratelimiter.ErrLimited) {
		t.Fatal("an unrelated error is ErrLimited")
	}
}

func TestExecuteReturnsTheCallsError(t *testing.T) {
	l := mustNew(t)
	if err := l.Execute(t.Context(), func(context.Context) error { return errUnavailable }); err != errUnavailable {
		t.Fatalf("Execute = %v, want fn's error", err)
	}
	chain := resilience.NewChain(l)
	ran := false
	if err := chain.Execute(t.Context(), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("chain Execute = %v, ran %v", err, ran)
	}
}

func TestObserverSeesPermittedAndRejectedCalls(t *testing.T) {
	obs := new(resiliencetest.Observer)
	l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
		c.LimitForPeriod = 2
		c.LimitRefreshPeriod = time.Hour
	})), ratelimiter.WithName("search"), ratelimiter.WithObserver(obs))
	src := obs.Sources()
	if len(src) != 1 || src[0].Name != "search" || src[0].Kind != resilience.KindRateLimiter {
		t.Fatalf("sources %+v, want one named search", src)
	}
	for range 3 {
		_ = l.Execute(t.Context(), noop)
	}
	ev := obs.Events()
	if len(ev) != 3 || ev[0].Type != resilience.EventAcquired || ev[1].Type != resilience.EventAcquired ||
		ev[2].Type != resilience.EventRejection || !errors.Is(ev[2].Err, ratelimiter.ErrLimited) {
		t.Fatalf("events %+v, want acquired, acquired, rejection", ev)
	}
}
