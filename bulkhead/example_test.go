package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// A bulkhead of two refuses a third call while two are in flight, without
// running it.
func Example() {
	bh, err := bulkhead.New(bulkhead.WithName("payments"), bulkhead.WithMaxConcurrentCalls(2))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, _ := bh.Acquire(ctx)
	second, _ := bh.Acquire(ctx)
	fmt.Println("active", bh.Active(), "of", bh.Limit())

	err = bh.Execute(ctx, func(context.Context) error { panic("not called") })
	fmt.Println(err)
	fmt.Println(errors.Is(err, bulkhead.ErrFull), resilience.IsRejection(err))

	first.Release()
	err = bh.Execute(ctx, func(context.Context) error { return nil })
	fmt.Println("after a release:", err)
	second.Release()
	// Output:
	// active 2 of 2
	// bulkhead "payments" is full (limit 2)
	// true true
	// after a release: <nil>
}

// Interceptors and streams use the two-step form: the permit is a value,
// ended once when the call is over.
func ExampleBulkhead_Acquire() {
	bh, _ := bulkhead.New()
	p, err := bh.Acquire(context.Background())
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	fmt.Println("in flight:", bh.Active())
	// ... run the call, keep p with it, and when it ends:
	p.Done(nil)
	fmt.Println("in flight:", bh.Active())
	// Output:
	// in flight: 1
	// in flight: 0
}

// A caller that gives up while waiting for a permit gets a rejection that
// also carries its context's error.
func ExampleFullError() {
	bh, _ := bulkhead.New(
		bulkhead.WithName("search"),
		bulkhead.WithMaxConcurrentCalls(1),
		bulkhead.WithMaxWaitDuration(time.Second),
	)
	held, _ := bh.Acquire(context.Background())
	defer held.Release()

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller is gone
	_, err := bh.Acquire(ctx)
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
func ExampleWithAdaptive() {
	bh, _ := bulkhead.New(bulkhead.WithAdaptive(bulkhead.Adaptive{MinLimit: 5, MaxLimit: 50, InitialLimit: 10}))
	fmt.Println(bh.Limit())
	// Output: 10
}

// Invalid options are errors that name their configuration key.
func ExampleNew_invalid() {
	_, err := bulkhead.New(
		bulkhead.WithMaxConcurrentCalls(0),
		bulkhead.WithAdaptive(bulkhead.Adaptive{MinLimit: 50, MaxLimit: 10}),
	)
	fmt.Println(err)
	// Output:
	// bulkhead: maxConcurrentCalls: must be at least 1, got 0
	// adaptive.minLimit: must not exceed adaptive.maxLimit (10), got 50
}
