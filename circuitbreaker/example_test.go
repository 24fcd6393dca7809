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
// Settings go in a Config, started from DefaultConfig; Execute is the way to
// run a call through the breaker.
func Example() {
	clk := resiliencetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize = 10
	cfg.MinimumNumberOfCalls = 10
	cfg.WaitDurationInOpenState = 30 * time.Second
	cb, err := circuitbreaker.New(
		circuitbreaker.WithConfig(cfg),
		circuitbreaker.WithName("payments"),
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

// A slow dependency opens the breaker even when every call succeeds.
func ExampleConfig_slowCalls() {
	clk := resiliencetest.NewClock(time.Unix(0, 0))
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize = 4
	cfg.MinimumNumberOfCalls = 4
	cfg.SlowCallDurationThreshold = time.Second
	cfg.SlowCallRateThreshold = 50
	cb, _ := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(clk))
	for _, d := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 200 * time.Millisecond, 5 * time.Second} {
		_ = cb.Execute(context.Background(), func(context.Context) error {
			clk.Advance(d) // the call takes d
			return nil
		})
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
