package failsafepolicy_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/failsafepolicy"
	"github.com/meshless/meshless/resilience"
)

// Any failsafe-go policy can join a chain. Here a failsafe-go fallback
// serves a default when the bulkhead inside it is full, and a failsafe-go
// rate limiter's refusal comes back as a rejection.
func ExampleNew() {
	bh, _ := bulkhead.New(bulkhead.WithMaxConcurrentCalls(1))
	chain := resilience.NewChain(
		failsafepolicy.New(fallback.NewWithResult[any](nil)),
		bh,
	)
	held, _ := bh.Acquire(context.Background())
	err := chain.Execute(context.Background(), func(context.Context) error { return nil })
	fmt.Println("full, with a fallback:", err)
	held.Release()

	limited := resilience.NewChain(failsafepolicy.New(ratelimiter.NewBursty[any](1, time.Hour)))
	call := func(context.Context) error { return nil }
	fmt.Println(limited.Execute(context.Background(), call))
	err = limited.Execute(context.Background(), call)
	fmt.Println(err, errors.Is(err, ratelimiter.ErrExceeded), resilience.IsRejection(err))
	// Output:
	// full, with a fallback: <nil>
	// <nil>
	// rate limit exceeded true true
}
