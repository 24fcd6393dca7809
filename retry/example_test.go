package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// A call that fails twice with a retryable error, then succeeds. The fake
// clock's timers stand for the backoffs. Settings go in a Config, started
// from DefaultConfig; Execute is the way to run a call through the policy.
func Example() {
	clk := resiliencetest.NewClock(time.Now())
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			switch e.Type {
			case resilience.EventRetry:
				fmt.Printf("attempt %d in %v after %q\n", e.Attempt, e.Backoff, e.Err)
			case resilience.EventRetryDone:
				fmt.Printf("done after %d attempts: %v\n", e.Attempt, e.Outcome)
			}
		})
	})
	cfg := retry.DefaultConfig()
	cfg.Jitter = 0
	r, _ := retry.New(retry.WithConfig(cfg), retry.WithClock(clk), retry.WithObserver(obs))

	done := make(chan error)
	calls := 0
	go func() {
		done <- r.Execute(context.Background(), func(context.Context) error {
			if calls++; calls < 3 {
				return errors.New("unavailable")
			}
			return nil
		})
	}()
	// Advance by each backoff exactly: a longer step could also fire the
	// next backoff's timer, set while the clock was still advancing.
	for _, backoff := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		clk.WaitPending(1) // the policy is waiting out a backoff
		clk.Advance(backoff)
	}
	fmt.Println(<-done)
	// Output:
	// attempt 2 in 100ms after "unavailable"
	// attempt 3 in 200ms after "unavailable"
	// done after 3 attempts: success
	// <nil>
}

// A throttle shared by a client's retry policies stops retries when most
// attempts fail.
func ExampleNewThrottle() {
	th, _ := retry.NewThrottle(4, 0.5)
	cfg := retry.DefaultConfig()
	cfg.MaxAttempts = 5
	cfg.InitialBackoff, cfg.MaxBackoff = time.Nanosecond, time.Nanosecond
	r, _ := retry.New(retry.WithConfig(cfg), retry.WithThrottle(th))
	for i := range 3 {
		attempts := 0
		_ = r.Execute(context.Background(), func(context.Context) error { attempts++; return errors.New("unavailable") })
		fmt.Printf("call %d: %d attempts, %v tokens left\n", i+1, attempts, th.Tokens())
	}
	// Output:
	// call 1: 2 attempts, 2 tokens left
	// call 2: 1 attempts, 1 tokens left
	// call 3: 1 attempts, 0 tokens left
}

// Calls that no retry policy runs still move the client's throttle, as gRFC
// A6 counts every RPC: here a method without retries fails twice, and the
// retrying method is held back.
func ExampleThrottle_RecordFailure() {
	th, _ := retry.NewThrottle(4, 0.5466) // tokenRatio keeps three decimals: 0.546
	th.RecordFailure()                    // a call of a method without retries failed
	th.RecordFailure()
	cfg := retry.DefaultConfig()
	cfg.MaxAttempts = 3
	cfg.InitialBackoff, cfg.MaxBackoff = time.Nanosecond, time.Nanosecond
	r, _ := retry.New(retry.WithConfig(cfg), retry.WithThrottle(th))
	attempts := 0
	_ = r.Execute(context.Background(), func(context.Context) error { attempts++; return errors.New("unavailable") })
	fmt.Printf("%d attempt, %v tokens left\n", attempts, th.Tokens())
	th.RecordSuccess() // a call of a method without retries succeeded
	fmt.Println(th.Tokens(), th.TokenRatio())
	// Output:
	// 1 attempt, 1 tokens left
	// 1.546 0.546
}
