package circuitbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A breaker opens when half of the last ten calls failed, rejects calls
// without running them while open, and lets probes through after its wait.
func Example() {
	clk := resiliencetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cb, err := circuitbreaker.New(
		circuitbreaker.WithName("payments"),
		circuitbreaker.WithSlidingWindowSize(10),
		circuitbreaker.WithMinimumNumberOfCalls(10),
		circuitbreaker.WithWaitDurationInOpenState(30*time.Second),
		circuitbreaker.WithClock(clk),
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	unavailable := errors.New("unavailable")
	for i := range 10 {
		_ = cb.Execute(ctx, func(context.Context) error {
			if i%2 == 0 {
				return unavailable
			}
			return nil
		})
	}
	fmt.Println(cb.State(), cb.Metrics().FailureRate)

	err = cb.Execute(ctx, func(context.Context) error { panic("not called") })
	fmt.Println(err, errors.Is(err, circuitbreaker.ErrOpen))

	clk.Advance(30 * time.Second)
	fmt.Println(cb.State())
	for range 2 {
		_ = cb.Execute(ctx, func(context.Context) error { return nil })
	}
	fmt.Println(cb.State())
	// Output:
	// OPEN 50
	// circuit breaker "payments" is OPEN true
	// HALF_OPEN
	// CLOSED
}

// Interceptors and streams use the two-step form: the permit is a value,
// reported once when the call is over.
func ExampleBreaker_Acquire() {
	cb, _ := circuitbreaker.New()
	p, err := cb.Acquire(context.Background())
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	// ... start the call, keep p with it, and when it ends:
	p.Done(nil)
	fmt.Println(cb.Metrics().Calls)
	// Output: 1
}

// A slow dependency opens the breaker even when every call succeeds.
func ExampleWithSlowCallRateThreshold() {
	clk := resiliencetest.NewClock(time.Unix(0, 0))
	cb, _ := circuitbreaker.New(
		circuitbreaker.WithClock(clk),
		circuitbreaker.WithSlidingWindowSize(4),
		circuitbreaker.WithMinimumNumberOfCalls(4),
		circuitbreaker.WithSlowCallDurationThreshold(time.Second),
		circuitbreaker.WithSlowCallRateThreshold(50),
	)
	for _, d := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 200 * time.Millisecond, 5 * time.Second} {
		p, _ := cb.Acquire(context.Background())
		clk.Advance(d)
		p.Done(nil)
	}
	m := cb.Metrics()
	fmt.Println(m.State, m.SlowCallRate, m.FailureRate)
	// Output: OPEN 50 0
}

// An observer sees every transition with its reason.
func ExampleWithObserver() {
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type == resilience.EventTransition {
				fmt.Printf("%s: %v -> %v (%v)\n", src.Name, e.From, e.To, e.Reason)
			}
		})
	})
	cb, _ := circuitbreaker.New(circuitbreaker.WithName("inventory"), circuitbreaker.WithObserver(obs))
	cb.ForceOpen()
	cb.Reset()
	// Output:
	// inventory: CLOSED -> FORCED_OPEN (manual)
	// inventory: FORCED_OPEN -> CLOSED (manual)
}
