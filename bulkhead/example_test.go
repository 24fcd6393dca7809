package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// inFlight starts a call through bh that stays in flight until end is
// called (the examples' way to fill a bulkhead).
func inFlight(bh *bulkhead.Bulkhead) (end func()) {
	inside, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = bh.Execute(context.Background(), func(context.Context) error { close(inside); <-release; return nil })
	}()
	<-inside
	return func() { close(release); <-done }
}

// A bulkhead of two refuses a third call while two are in flight, without
// running it. Settings go in a Config, started from DefaultConfig; Execute is
// the way to run a call through the bulkhead.
func Example() {
	cfg := bulkhead.DefaultConfig()
	cfg.MaxConcurrentCalls = 2
	bh, err := bulkhead.New(bulkhead.WithConfig(cfg), bulkhead.WithName("payments"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	endFirst, endSecond := inFlight(bh), inFlight(bh)
	fmt.Println("active", bh.Active(), "of", bh.Limit())

	err = bh.Execute(ctx, func(context.Context) error { panic("not called") })
	fmt.Println(err)
	fmt.Println(errors.Is(err, bulkhead.ErrFull), resilience.IsRejection(err))

	endFirst()
	err = bh.Execute(ctx, func(context.Context) error { return nil })
	fmt.Println("after a call ended:", err)
	endSecond()
	// Output:
	// active 2 of 2
	// bulkhead "payments" is full (limit 2)
	// true true
	// after a call ended: <nil>
}

// A caller that gives up while waiting for a permit gets a rejection that
// also carries its context's error.
func ExampleFullError() {
	cfg := bulkhead.DefaultConfig()
	cfg.MaxConcurrentCalls = 1
	cfg.MaxWaitDuration = time.Second
	bh, _ := bulkhead.New(bulkhead.WithConfig(cfg), bulkhead.WithName("search"))
	defer inFlight(bh)()

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller is gone
	err := bh.Execute(ctx, func(context.Context) error { panic("not called") })
	var full *bulkhead.FullError
	fmt.Println(errors.As(err, &full), full.Cause)
	fmt.Println(errors.Is(err, bulkhead.ErrFull), errors.Is(err, context.Canceled))
	fmt.Println(resilience.DefaultClassifier(err)) // a rejection: never retried, ignored by breakers
	// Output:
	// true context canceled
	// true true
	// ignored
}

// An adaptive bulkhead starts at its initial limit and moves it between its
// bounds with the calls' latency.
func ExampleAdaptive() {
	cfg := bulkhead.DefaultConfig()
	cfg.Adaptive = true
	cfg.AdaptiveLimits = bulkhead.Adaptive{MinLimit: 5, MaxLimit: 50, InitialLimit: 10}
	bh, _ := bulkhead.New(bulkhead.WithConfig(cfg))
	fmt.Println(bh.Limit())
	// Output: 10
}

// Invalid settings are errors that name their configuration key.
func ExampleNew_invalid() {
	cfg := bulkhead.DefaultConfig()
	cfg.MaxConcurrentCalls = 0
	cfg.Adaptive = true
	cfg.AdaptiveLimits = bulkhead.Adaptive{MinLimit: 50, MaxLimit: 10}
	_, err := bulkhead.New(bulkhead.WithConfig(cfg))
	fmt.Println(err)
	// Output:
	// bulkhead: maxConcurrentCalls: must be at least 1, got 0
	// adaptive.minLimit: must not exceed adaptive.maxLimit (10), got 50
}
