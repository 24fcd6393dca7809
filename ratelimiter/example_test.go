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
func Example() {
	rl, err := ratelimiter.New(
		ratelimiter.WithName("payments"),
		ratelimiter.WithLimitForPeriod(2),
		ratelimiter.WithLimitRefreshPeriod(time.Hour),
	)
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

// Interceptors and streams use the two-step form, as with a bulkhead: the
// permit is a value, ended once when the call is over. A rate limit's
// permit gives nothing back; it is spent.
func ExampleLimiter_Acquire() {
	rl, _ := ratelimiter.New(ratelimiter.WithLimitForPeriod(1), ratelimiter.WithLimitRefreshPeriod(time.Hour))
	p, err := rl.Acquire(context.Background())
	fmt.Println("admitted:", err == nil)
	// ... run the call, keep p with it, and when it ends:
	p.Done(nil)
	_, err = rl.Acquire(context.Background())
	fmt.Println("admitted:", err == nil)
	// Output:
	// admitted: true
	// admitted: false
}

// A bursty limiter (the default) admits a whole period's calls at once; a
// smooth one spaces them, one every limitRefreshPeriod / limitForPeriod.
func ExampleWithMode() {
	for _, mode := range []ratelimiter.Mode{ratelimiter.Bursty, ratelimiter.Smooth} {
		rl, _ := ratelimiter.New(ratelimiter.WithMode(mode),
			ratelimiter.WithLimitForPeriod(10), ratelimiter.WithLimitRefreshPeriod(time.Hour))
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
	rl, _ := ratelimiter.New(
		ratelimiter.WithName("search"),
		ratelimiter.WithLimitForPeriod(1),
		ratelimiter.WithLimitRefreshPeriod(time.Hour),
		ratelimiter.WithTimeoutDuration(time.Hour),
	)
	_, _ = rl.Acquire(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller is gone
	_, err := rl.Acquire(ctx)
	var limited *ratelimiter.LimitedError
	fmt.Println(errors.As(err, &limited), limited.Cause)
	fmt.Println(errors.Is(err, ratelimiter.ErrLimited), errors.Is(err, context.Canceled))
	// Output:
	// true context canceled
	// true true
}

// Invalid options are errors that name their configuration key.
func ExampleNew_invalid() {
	_, err := ratelimiter.New(
		ratelimiter.WithLimitForPeriod(0),
		ratelimiter.WithTimeoutDuration(-time.Second),
	)
	fmt.Println(err)
	// Output:
	// ratelimiter: limitForPeriod: must be at least 1, got 0
	// timeoutDuration: must not be negative (0 rejects at once when the limit is reached), got -1s
}
