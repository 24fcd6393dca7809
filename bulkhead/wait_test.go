package bulkhead_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// The waits are timed by failsafe-go with the runtime's timers, which a
// resilience.Clock cannot drive; these tests run in a synctest bubble, where
// time is fake and moves only when every goroutine in the bubble is blocked.
// The bulkheads measure waits with resilience.SystemClock(), whose Now is the
// bubble's time.

// newWaiting returns a bulkhead of limit 1 with a 100ms maxWaitDuration,
// built inside the bubble, and the observer that sees its events.
func newWaiting(t *testing.T, kind func(*bulkhead.Config)) (*bulkhead.Bulkhead, *resiliencetest.Observer) {
	obs := new(resiliencetest.Observer)
	b := mustNew(t,
		bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			kind(c)
			c.MaxWaitDuration = 100 * time.Millisecond
		})),
		bulkhead.WithClock(resilience.SystemClock()),
		bulkhead.WithObserver(obs))
	return b, obs
}

var waitKinds = []struct {
	name string
	opt  func(*bulkhead.Config)
}{
	{name: "fixed", opt: func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 }},
	{name: "adaptive", opt: func(c *bulkhead.Config) {
		c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MinLimit: 1, MaxLimit: 1, InitialLimit: 1}
	}},
}

func TestWaiterIsRejectedAtMaxWaitDuration(t *testing.T) {
	for _, k := range waitKinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, obs := newWaiting(t, k.opt)
				held := hold(t, b, 1)
				start := time.Now()
				_, err := enter(b, t.Context())
				if waited := time.Since(start); waited != 100*time.Millisecond {
					t.Fatalf("Acquire returned after %v, want the 100ms maxWaitDuration", waited)
				}
				var fe *bulkhead.FullError
				if !errors.As(err, &fe) || fe.Cause != nil || fe.Limit != 1 {
					t.Fatalf("err = %v, want a FullError without a cause", err)
				}
				rej := obs.Events(resilience.EventRejection)
				if len(rej) != 1 || rej[0].Duration != 100*time.Millisecond || rej[0].Err != err {
					t.Fatalf("rejection events %+v, want one that waited 100ms with the error", rej)
				}
				releaseAll(held)
			})
		})
	}
}

func TestWaiterIsAdmittedWhenAPermitComesBackInTime(t *testing.T) {
	for _, k := range waitKinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, obs := newWaiting(t, k.opt)
				held := hold(t, b, 1)
				go func() {
					time.Sleep(30 * time.Millisecond) // fake time: instant
					held[0].Release()
				}()
				start := time.Now()
				p, err := enter(b, t.Context())
				if err != nil {
					t.Fatalf("Acquire: %v, want the permit released after 30ms", err)
				}
				if waited := time.Since(start); waited != 30*time.Millisecond {
					t.Fatalf("admitted after %v, want 30ms", waited)
				}
				acq := obs.Events(resilience.EventAcquired)
				if len(acq) != 2 || acq[0].Duration != 0 || acq[1].Duration != 30*time.Millisecond {
					t.Fatalf("acquired events %+v, want waits of 0 and 30ms", acq)
				}
				if b.Active() != 1 {
					t.Fatalf("Active = %d, want 1", b.Active())
				}
				p.Release()
			})
		})
	}
}

func TestWaitersAreServedInOrder(t *testing.T) {
	for _, k := range waitKinds {
		t.Run(k.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				b := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
					k.opt(c)
					c.MaxWaitDuration = time.Hour
				})), bulkhead.WithClock(resilience.SystemClock()), bulkhead.WithObserver(obs))
				held := hold(t, b, 1)
				order := make(chan int, 3)
				var wg sync.WaitGroup
				defer wg.Wait()
				for i := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_ = b.Execute(context.Background(), func(context.Context) error {
							order <- i
							time.Sleep(time.Second)
							return nil
						})
					}()
					synctest.Wait() // waiter i is queued before i+1 starts
				}
				held[0].Release()
				for want := range 3 {
					if got := <-order; got != want {
						t.Fatalf("waiter %d admitted in place %d", got, want)
					}
				}
				var waits []time.Duration
				for _, e := range obs.Events(resilience.EventAcquired)[1:] {
					waits = append(waits, e.Duration)
				}
				if len(waits) != 3 || waits[0] != 0 || waits[1] != time.Second || waits[2] != 2*time.Second {
					t.Fatalf("waits %v, want 0s, 1s, 2s", waits)
				}
			})
		})
	}
}

func TestWaitEndsWithTheCallersContext(t *testing.T) {
	for _, k := range waitKinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tt := range []struct {
				name  string
				ctx   func(context.Context) (context.Context, context.CancelFunc)
				cause error
				after time.Duration
			}{
				{
					name: "deadline before the max wait",
					ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
						return context.WithTimeout(ctx, 40*time.Millisecond)
					},
					cause: context.DeadlineExceeded,
					after: 40 * time.Millisecond,
				},
				{
					name: "cancelled while waiting",
					ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
						ctx, cancel := context.WithCancel(ctx)
						time.AfterFunc(25*time.Millisecond, cancel)
						return ctx, cancel
					},
					cause: context.Canceled,
					after: 25 * time.Millisecond,
				},
				{
					name: "already cancelled",
					ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
						ctx, cancel := context.WithCancel(ctx)
						cancel()
						return ctx, cancel
					},
					cause: context.Canceled,
				},
			} {
				t.Run(tt.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						b, obs := newWaiting(t, k.opt)
						held := hold(t, b, 1)
						ctx, cancel := tt.ctx(t.Context())
						defer cancel()
						start := time.Now()
						_, err := enter(b, ctx)
						if waited := time.Since(start); waited != tt.after {
							t.Fatalf("Acquire returned after %v, want %v", waited, tt.after)
						}
						var fe *bulkhead.FullError
						if !errors.As(err, &fe) || fe.Cause != tt.cause {
							t.Fatalf("err = %v, want a FullError caused by %v", err, tt.cause)
						}
						if !errors.Is(err, bulkhead.ErrFull) || !errors.Is(err, tt.cause) || !resilience.IsRejection(err) {
							t.Fatalf("err = %v: want ErrFull, %v and a rejection", err, tt.cause)
						}
						// Still a rejection: a breaker ignores it.
						if o := resilience.DefaultClassifier(err); o != resilience.Ignored {
							t.Fatalf("DefaultClassifier = %v, want ignored", o)
						}
						if rej := obs.Events(resilience.EventRejection); len(rej) != 1 || rej[0].Err != err || rej[0].Duration != tt.after {
							t.Fatalf("rejection events %+v", rej)
						}
						releaseAll(held)
					})
				})
			}
		})
	}
}

func TestNoWaitWhenAPermitIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, obs := newWaiting(t, func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })
		// A free permit is taken whatever the context says: the call itself
		// will see its context.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		start := time.Now()
		p, err := enter(b, ctx)
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("Acquire = %v after %v, want a permit at once", err, time.Since(start))
		}
		p.Release()
		if acq := obs.Events(resilience.EventAcquired); len(acq) != 1 || acq[0].Duration != 0 {
			t.Fatalf("acquired events %+v", acq)
		}
	})
}
