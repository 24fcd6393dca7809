package resilience_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// stamp is a policy that has read the clock at t: it runs the rest with
// RunAt(t).
func stamp(t time.Time) resilience.Policy {
	return resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
		return next.RunAt(ctx, t)
	})
}

// entries records the time each run of a policy was entered with
// (Next.Entered), the zero time for none, and runs the rest with Run.
type entries struct {
	mu   sync.Mutex
	seen []time.Time
}

func (e *entries) Apply(ctx context.Context, next resilience.Next) error {
	at, ok := next.Entered()
	if ok != !at.IsZero() {
		panic("Entered: ok disagrees with the time")
	}
	e.mu.Lock()
	e.seen = append(e.seen, at)
	e.mu.Unlock()
	return next.Run(ctx)
}

func (e *entries) list() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.seen...)
}

func TestRunAtPassesTheTimeToTheNextPolicyAlone(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	first, second := new(entries), new(entries)
	chain := resilience.NewChain(first, stamp(t0), second, new(entries))
	if err := chain.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := first.list(); len(got) != 1 || !got[0].IsZero() {
		t.Errorf("the chain's first policy was entered with %v, want none: Execute reads no clock", got)
	}
	if got := second.list(); len(got) != 1 || !got[0].Equal(t0) {
		t.Errorf("the policy after RunAt(t0) was entered with %v, want t0 = %v", got, t0)
	}
}

func TestTheTimeGoesNoFurtherThanAPolicyThatRunsTheRestWithRun(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	pass, after := new(entries), new(entries)
	chain := resilience.NewChain(stamp(t0), pass, after)
	_ = chain.Execute(t.Context(), func(context.Context) error { return nil })
	if got := after.list(); len(got) != 1 || !got[0].IsZero() {
		t.Errorf("a policy behind one that called Run was entered with %v, want none", got)
	}
}

func TestANestedChainPassesTheTimeToItsFirstPolicy(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	in := new(entries)
	chain := resilience.NewChain(stamp(t0), resilience.NewChain(in), resilience.Chain{})
	_ = chain.Execute(t.Context(), func(context.Context) error { return nil })
	if got := in.list(); len(got) != 1 || !got[0].Equal(t0) {
		t.Errorf("a nested chain's first policy was entered with %v, want t0 = %v", got, t0)
	}
}

// In meshless's order a call's start is read once, by the first policy
// that needs it, and every policy inside takes it: the per-attempt timeout
// derives its deadline from the time the policy outside read, and the
// breaker measures the call from it. Inside a synctest bubble the clock
// stands still, so a policy that read its own clock would see now, not t0.
func TestTheDefaultOrderTakesOneReadingOfACallsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const attempt = 5 * time.Second
		obs := new(resiliencetest.Observer)
		overall, err1 := timeout.New(time.Minute, timeout.WithScope(timeout.Overall))
		rt, err2 := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 2
			c.Jitter = 0
		})))
		cb, err3 := circuitbreaker.New(circuitbreaker.WithObserver(obs))
		bh, err4 := bulkhead.New()
		perAttempt, err5 := timeout.New(attempt)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			t.Fatal(err)
		}
		inner := new(entries)
		t0 := time.Now().Add(-time.Second)
		chain := resilience.NewChain(stamp(t0), overall, rt, cb, bh, perAttempt, inner)

		var deadlines []time.Time
		var starts []time.Time
		err := chain.Execute(t.Context(), func(ctx context.Context) error {
			dl, _ := ctx.Deadline()
			deadlines = append(deadlines, dl)
			starts = append(starts, time.Now())
			time.Sleep(100 * time.Millisecond)
			if len(deadlines) == 1 {
				return errors.New("first attempt fails") // retried
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Execute = %v, want the second attempt's success", err)
		}
		if len(deadlines) != 2 {
			t.Fatalf("%d attempts, want 2", len(deadlines))
		}
		if want := t0.Add(attempt); !deadlines[0].Equal(want) {
			t.Errorf("attempt 1's deadline = %v, want t0 + %v = %v: the timeout read a clock of its own", deadlines[0], attempt, want)
		}
		// The second attempt starts after a backoff: its start is read again.
		if want := starts[1].Add(attempt); !deadlines[1].Equal(want) {
			t.Errorf("attempt 2's deadline = %v, want its own start + %v = %v", deadlines[1], attempt, want)
		}
		if got := inner.list(); len(got) != 2 || !got[0].Equal(t0) || !got[1].Equal(starts[1]) {
			t.Errorf("the policy inside the timeout was entered with %v, want [t0 = %v, %v]", got, t0, starts[1])
		}
		var durations []time.Duration
		for _, ev := range obs.Events() {
			if ev.Type == resilience.EventCall {
				durations = append(durations, ev.Duration)
			}
		}
		if want := []time.Duration{time.Second + 100*time.Millisecond, 100 * time.Millisecond}; len(durations) != 2 ||
			durations[0] != want[0] || durations[1] != want[1] {
			t.Errorf("the breaker measured the attempts as %v, want %v (attempt 1 from t0)", durations, want)
		}
	})
}

func TestABulkheadPassesTheTimeOnlyToACallItAdmittedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh, err := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			c.MaxConcurrentCalls = 1
			c.MaxWaitDuration = time.Second
		})))
		if err != nil {
			t.Fatal(err)
		}
		in := new(entries)
		t0 := time.Now()
		chain := resilience.NewChain(stamp(t0), bh, in)
		release := make(chan struct{})
		go func() {
			_ = chain.Execute(t.Context(), func(context.Context) error { <-release; return nil })
		}()
		synctest.Wait() // the first call holds the one permit
		go func() {
			time.Sleep(100 * time.Millisecond)
			close(release)
		}()
		if err := chain.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatalf("the waiting call = %v, want admitted after 100ms", err)
		}
		if got := in.list(); len(got) != 2 || !got[0].Equal(t0) || !got[1].IsZero() {
			t.Errorf("entered with %v, want [t0 = %v, none]: a call that waited starts later than t0", got, t0)
		}
	})
}

func TestARateLimiterPassesTheTimeOnlyWhenItNeverMakesACallWait(t *testing.T) {
	for _, tt := range []struct {
		name     string
		wait     time.Duration
		wantTime bool
	}{
		{"without timeoutDuration", 0, true},
		{"with timeoutDuration", time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ratelimiter.DefaultConfig()
			cfg.TimeoutDuration = tt.wait
			l, err := ratelimiter.New(ratelimiter.WithConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			in := new(entries)
			t0 := time.Now()
			if err := resilience.NewChain(stamp(t0), l, in).Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			got := in.list()
			if len(got) != 1 || got[0].Equal(t0) != tt.wantTime || got[0].IsZero() == tt.wantTime {
				t.Errorf("entered with %v, want the time passed on: %v", got, tt.wantTime)
			}
		})
	}
}

// A breaker on a clock of its own (a fake clock, the coarse clock) neither
// takes the system clock's reading nor passes one on.
func TestABreakerOnAnotherClockKeepsToIt(t *testing.T) {
	clk := resiliencetest.NewClock(time.Unix(1e9, 0))
	obs := new(resiliencetest.Observer)
	cb, err := circuitbreaker.New(circuitbreaker.WithClock(clk), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	in := new(entries)
	chain := resilience.NewChain(stamp(time.Now().Add(-time.Hour)), cb, in)
	_ = chain.Execute(t.Context(), func(context.Context) error { clk.Advance(time.Second); return nil })
	if got := in.list(); len(got) != 1 || !got[0].IsZero() {
		t.Errorf("inside a breaker on a fake clock, entered with %v, want none", got)
	}
	for _, ev := range obs.Events() {
		if ev.Type == resilience.EventCall && ev.Duration != time.Second {
			t.Errorf("the breaker measured %v, want the fake clock's 1s", ev.Duration)
		}
	}
}
