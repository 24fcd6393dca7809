package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// A limiter of two calls per hour refuses a third call without running it.
// Settings go in a Config, started from DefaultConfig; Execute is the way to
// run a call through the limiter.
func Example() {
	cfg := ratelimiter.DefaultConfig()
	cfg.LimitForPeriod = 2
	cfg.LimitRefreshPeriod = time.Hour
	rl, err := ratelimiter.New(ratelimiter.WithConfig(cfg), ratelimiter.WithName("payments"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	call := func(context.Context) error { return nil }
	fmt.Println(rl.Execute(ctx, call))
	fmt.Println(rl.Execute(ctx, call))

	err = rl.Execute(ctx, func(context.Context) error { panic("not called") })
	fmt.Println(err)
	fmt.Println(errors.Is(err, ratelimiter.ErrLimited), resilience.IsRejection(err))
	fmt.Println(resilience.DefaultClassifier(err)) // never retried, ignored by breakers
	// Output:
	// <nil>
	// <nil>
	// rate limiter "payments": limit reached (2 calls per 1h0m0s)
	// true true
	// ignored
}

// A bursty limiter (the default) admits a whole period's calls at once; a
// smooth one spaces them, one every limitRefreshPeriod / limitForPeriod.
func ExampleMode() {
	for _, mode := range []ratelimiter.Mode{ratelimiter.Bursty, ratelimiter.Smooth} {
		cfg := ratelimiter.DefaultConfig()
		cfg.Mode = mode
		cfg.LimitForPeriod = 10
		cfg.LimitRefreshPeriod = time.Hour
		rl, _ := ratelimiter.New(ratelimiter.WithConfig(cfg))
		admitted := 0
		for range 20 {
			if rl.Execute(context.Background(), func(context.Context) error { return nil }) == nil {
				admitted++
			}
		}
		fmt.Println(mode, admitted)
	}
	// Output:
	// bursty 10
	// smooth 1
}

// A caller whose context has ended gets a rejection that also carries its
// context's error, when it would have had to wait.
func ExampleLimitedError() {
	cfg := ratelimiter.DefaultConfig()
	cfg.LimitForPeriod = 1
	cfg.LimitRefreshPeriod = time.Hour
	cfg.TimeoutDuration = time.Hour
	rl, _ := ratelimiter.New(ratelimiter.WithConfig(cfg), ratelimiter.WithName("search"))
	call := func(context.Context) error { return nil }
	_ = rl.Execute(context.Background(), call)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller is gone
	err := rl.Execute(ctx, call)
	var limited *ratelimiter.LimitedError
	fmt.Println(errors.As(err, &limited), limited.Cause)
	fmt.Println(errors.Is(err, ratelimiter.ErrLimited), errors.Is(err, context.Canceled))
	// Output:
	// true context canceled
	// true true
}

// Invalid options are errors that name their configuration key.
func ExampleNew_invalid() {
	cfg := ratelimiter.DefaultConfig()
	cfg.LimitForPeriod = 0
	cfg.TimeoutDuration = -time.Second
	_, err := ratelimiter.New(ratelimiter.WithConfig(cfg))
	fmt.Println(err)
	// Output:
	// ratelimiter: limitForPeriod: must be at least 1, got 0
	// timeoutDuration: must not be negative (0 rejects at once when the limit is reached), got -1s
}
