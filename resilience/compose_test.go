package resilience_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// defaultOrder builds the chain of docs/order.md:
// overall timeout → retry → breaker → bulkhead → per-attempt timeout.
func defaultOrder(t *testing.T, obs resilience.Observer) (resilience.Chain, *circuitbreaker.Breaker, *bulkhead.Bulkhead) {
	t.Helper()
	overall, err1 := timeout.New(10*time.Second, timeout.WithScope(timeout.Overall), timeout.WithObserver(obs))
	rt, err2 := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) {
		c.MaxAttempts = 3
		c.Jitter = 0
	})), retry.WithClock(resilience.SystemClock()), retry.WithObserver(obs))
	cb, err3 := circuitbreaker.New(
		circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowSize = 4
			c.MinimumNumberOfCalls = 4
			c.WaitDurationInOpenState = 30 * time.Second
			c.PermittedNumberOfCallsInHalfOpenState = 1
		})), circuitbreaker.WithName("dep"),
		circuitbreaker.WithClock(resilience.SystemClock()),
		circuitbreaker.WithObserver(obs),
	)
	bh, err4 := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 10 })), bulkhead.WithName("dep"), bulkhead.WithClock(resilience.SystemClock()), bulkhead.WithObserver(obs))
	perAttempt, err5 := timeout.New(time.Second, timeout.WithObserver(obs))
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		t.Fatal(err)
	}
	return resilience.NewChain(overall, rt, cb, bh, perAttempt), cb, bh
}

// hungDependency hangs until its caller's context ends, or answers at once
// once it is healthy again.
type hungDependency struct {
	healthy atomic.Bool
	calls   atomic.Int32
}

func (d *hungDependency) call(ctx context.Context) error {
	d.calls.Add(1)
	if d.healthy.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestDefaultOrderReproducesTheHungDependencyScenario is the scenario of
// docs/order.md: a dependency that hangs is cut by the per-attempt timeout,
// the breaker opens, later calls fail fast without touching the dependency,
// and after the open wait a probe closes the breaker again.
func TestDefaultOrderReproducesTheHungDependencyScenario(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		chain, cb, bh := defaultOrder(t, obs)
		dep := new(hungDependency)
		ctx := t.Context()

		// Call 1: three attempts, each cut at 1s, with 100ms and 200ms
		// backoffs between them.
		start := time.Now()
		err := chain.Execute(ctx, dep.call)
		if !errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call 1 = %v, want the attempt timeout", err)
		}
		if d := time.Since(start); d != 3300*time.Millisecond || dep.calls.Load() != 3 {
			t.Fatalf("call 1 took %v and %d attempts, want 3.3s and 3", d, dep.calls.Load())
		}
		if cb.State() != circuitbreaker.StateClosed || bh.Active() != 0 {
			t.Fatalf("after call 1: breaker %v, %d permits held; want CLOSED, 0", cb.State(), bh.Active())
		}

		// Call 2: its first attempt is the fourth failure and opens the
		// breaker; the retry's next attempt is rejected, which ends it.
		start = time.Now()
		err = chain.Execute(ctx, dep.call)
		if !errors.Is(err, circuitbreaker.ErrOpen) || cb.State() != circuitbreaker.StateOpen {
			t.Fatalf("call 2 = %v in state %v, want the breaker's rejection", err, cb.State())
		}
		if d := time.Since(start); d != 1100*time.Millisecond || dep.calls.Load() != 4 {
			t.Fatalf("call 2 took %v and reached the dependency %d times in all, want 1.1s and 4", d, dep.calls.Load())
		}

		// Calls 3..102 fail fast: no time passes, the dependency sees none.
		start = time.Now()
		for range 100 {
			if err := chain.Execute(ctx, dep.call); !errors.Is(err, circuitbreaker.ErrOpen) {
				t.Fatalf("a call while open = %v, want a rejection", err)
			}
		}
		if d := time.Since(start); d != 0 || dep.calls.Load() != 4 || bh.Active() != 0 {
			t.Fatalf("100 calls while open took %v, reached the dependency %d times; want no time and no call", d, dep.calls.Load()-4)
		}

		// The dependency recovers; after the open wait one probe closes the
		// breaker.
		dep.healthy.Store(true)
		time.Sleep(30 * time.Second)
		if cb.State() != circuitbreaker.StateHalfOpen {
			t.Fatalf("after the open wait: %v, want HALF_OPEN", cb.State())
		}
		if err := chain.Execute(ctx, dep.call); err != nil {
			t.Fatalf("the probe = %v, want success", err)
		}
		if cb.State() != circuitbreaker.StateClosed || dep.calls.Load() != 5 {
			t.Fatalf("after the probe: %v with %d calls, want CLOSED and 5", cb.State(), dep.calls.Load())
		}

		var trans []string
		for _, e := range obs.Events(resilience.EventTransition) {
			trans = append(trans, e.From.String()+"->"+e.To.String())
		}
		if want := []string{"CLOSED->OPEN", "OPEN->HALF_OPEN", "HALF_OPEN->CLOSED"}; !slices.Equal(trans, want) {
			t.Fatalf("transitions = %v, want %v", trans, want)
		}
	})
}

// TestDefaultOrderEventSequence records the order in which the policies see
// one call that fails once and then succeeds.
func TestDefaultOrderEventSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		chain, _, _ := defaultOrder(t, obs)
		calls := 0
		_ = chain.Execute(t.Context(), func(context.Context) error {
			if calls++; calls == 1 {
				return errors.New("unavailable")
			}
			return nil
		})
		got := obs.Trace()
		want := []string{
			"bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry",
			"bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry_done",
			"timeout/overall:call",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("events:\n%v\nwant:\n%v", got, want)
		}
	})
}

// TestBulkheadRejectionDoesNotCountInTheBreakerAndIsNotRetried: a full
// bulkhead is a local event.
func TestBulkheadRejectionDoesNotCountInTheBreakerAndIsNotRetried(t *testing.T) {
	cb, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 2
		c.MinimumNumberOfCalls = 1
	})))
	bh, _ := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
	rt, _ := retry.New(retry.WithRetryable(func(error) bool { return true }))
	chain := resilience.NewChain(rt, cb, bh)
	hold := make(chan struct{})
	inside := make(chan struct{})
	held := make(chan struct{})
	go func() {
		defer close(held)
		_ = chain.Execute(context.Background(), func(context.Context) error { close(inside); <-hold; return nil })
	}()
	<-inside
	calls := 0
	for range 10 {
		err := chain.Execute(context.Background(), func(context.Context) error { calls++; return nil })
		if !errors.Is(err, bulkhead.ErrFull) {
			t.Fatalf("call past the bulkhead = %v, want ErrFull", err)
		}
	}
	close(hold)
	<-held
	// Only the admitted call is in the window.
	if m := cb.Metrics(); calls != 0 || m.Calls != 1 || m.FailedCalls != 0 || cb.State() != circuitbreaker.StateClosed {
		t.Fatalf("calls %d, breaker %+v: rejections reached the call or the window", calls, m)
	}
}

// TestChainAllocatesOnlyTheTimeoutsContext: retry, breaker and bulkhead
// allocate nothing on a successful call; the only allocations of the full
// chain are those of the per-attempt timeout's context.WithDeadline, and
// none at all when the caller's deadline comes first.
func TestChainAllocatesOnlyTheTimeoutsContext(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	rt, _ := retry.New()
	cb, _ := circuitbreaker.New()
	bh, _ := bulkhead.New()
	to, _ := timeout.New(time.Minute)

	deadline := testing.AllocsPerRun(1000, func() {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		_ = c
		cancel()
	})
	chain := resilience.NewChain(rt, cb, bh, to)
	full := testing.AllocsPerRun(1000, func() { _ = chain.Execute(ctx, ok) })
	if full > deadline {
		t.Fatalf("the 4-policy chain allocates %v times, more than context.WithDeadline's %v", full, deadline)
	}
	t.Logf("4-policy chain: %v allocations, all context.WithDeadline's (%v)", full, deadline)

	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if n := testing.AllocsPerRun(1000, func() { _ = chain.Execute(short, ok) }); n != 0 {
		t.Fatalf("under an earlier caller deadline the chain allocates %v times, want 0", n)
	}
	three := resilience.NewChain(rt, cb, bh)
	if n := testing.AllocsPerRun(1000, func() { _ = three.Execute(ctx, ok) }); n != 0 {
		t.Fatalf("retry + breaker + bulkhead allocate %v times, want 0", n)
	}
}

// A call that a chain of meshless's policies runs sits one frame per policy
// (its Apply) and one per hop (Next.RunAt) below Chain.Execute: no policy
// calls it from a helper's frame. Every frame between a caller and its call
// costs a mispredicted return once the call has been deep in the runtime or
// the kernel, as a real call has (docs/benchmarks/b4-parts.md, the depth
// run). The breaker, bulkhead and timeout each called it from a helper
// before: 13 frames where 9 are now. Each policy's Execute, likewise, calls
// fn from its own frame.
func TestAChainCallsItsCallOneFramePerPolicyAndHopBelowExecute(t *testing.T) {
	rt, _ := retry.New()
	cb, _ := circuitbreaker.New()
	bh, _ := bulkhead.New()
	to, _ := timeout.New(time.Minute)
	chain := resilience.NewChain(rt, cb, bh, to)
	var frames []string
	err := chain.Execute(context.Background(), func(context.Context) error {
		pcs := make([]uintptr, 64)
		fs := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)]) // from fn's caller
		for {
			f, more := fs.Next()
			frames = append(frames, f.Function)
			if !more || strings.HasSuffix(f.Function, "resilience.Chain.Execute") {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	const (
		hop  = "github.com/meshless/meshless/resilience.(*Next).RunAt"
		exec = "github.com/meshless/meshless/resilience.Chain.Execute"
	)
	want := []string{
		hop, "github.com/meshless/meshless/timeout.(*Timeout).Apply",
		hop, "github.com/meshless/meshless/bulkhead.(*Bulkhead).Apply",
		hop, "github.com/meshless/meshless/circuitbreaker.(*Breaker).Apply",
		hop, "github.com/meshless/meshless/retry.(*Retry).Apply",
		exec,
	}
	if !slices.Equal(frames, want) {
		t.Errorf("the frames from the call up to Chain.Execute are\n\t%s\nwant\n\t%s",
			strings.Join(frames, "\n\t"), strings.Join(want, "\n\t"))
	}

	// Each policy's Execute calls fn from its own frame too.
	for _, v := range []struct {
		name    string
		execute func(context.Context, func(context.Context) error) error
	}{
		{"github.com/meshless/meshless/circuitbreaker.(*Breaker).Execute", cb.Execute},
		{"github.com/meshless/meshless/bulkhead.(*Bulkhead).Execute", bh.Execute},
		{"github.com/meshless/meshless/timeout.(*Timeout).Execute", to.Execute},
	} {
		var caller string
		_ = v.execute(context.Background(), func(context.Context) error {
			pcs := make([]uintptr, 1)
			f, _ := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)]).Next()
			caller = f.Function
			return nil
		})
		if caller != v.name {
			t.Errorf("fn's caller is %s, want %s", caller, v.name)
		}
	}
}
