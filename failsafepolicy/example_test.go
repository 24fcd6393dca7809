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
	cfg := bulkhead.DefaultConfig()
	cfg.MaxConcurrentCalls = 1
	bh, _ := bulkhead.New(bulkhead.WithConfig(cfg))
	chain := resilience.NewChain(
		failsafepolicy.New(fallback.NewWithResult[any](nil)),
		bh,
	)
	// One call in flight fills the bulkhead.
	inside, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = bh.Execute(context.Background(), func(context.Context) error { close(inside); <-release; return nil })
	}()
	<-inside
	err := chain.Execute(context.Background(), func(context.Context) error { return nil })
	fmt.Println("full, with a fallback:", err)
	close(release)
	<-done

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
