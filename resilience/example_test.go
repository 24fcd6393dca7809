package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/resilience"
)

// A chain runs its policies outermost first. Here two toy policies log
// around the call.
func ExampleChain() {
	logging := func(name string) resilience.Policy {
		return resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
			fmt.Println("enter", name)
			err := next.Run(ctx)
			fmt.Println("leave", name, err)
			return err
		})
	}
	chain := resilience.NewChain(logging("retry"), logging("breaker"))
	_ = chain.Execute(context.Background(), func(context.Context) error {
		fmt.Println("call")
		return errors.New("unavailable")
	})
	// Output:
	// enter retry
	// enter breaker
	// call
	// leave breaker unavailable
	// leave retry unavailable
}

type queueFull struct{}

func (queueFull) Error() string               { return "queue full" }
func (queueFull) RejectedBy() resilience.Kind { return resilience.KindBulkhead }

// A rejection stays recognisable through wrapping, so nothing retries it.
func ExampleIsRejection() {
	err := fmt.Errorf("charging card: %w", queueFull{})
	fmt.Println(resilience.IsRejection(err), resilience.DefaultClassifier(err))
	fmt.Println(resilience.IsRejection(errors.New("unavailable")))
	// Output:
	// true ignored
	// false
}

// A registry creates one instance per key on first use and refuses keys past
// its bound.

// A policy that reads the clock passes the reading on with RunAt, and the
// policy inside takes it with Entered instead of reading the clock again:
// here a timer policy measures the call from the time its caller read.
func ExampleNext_RunAt() {
	var start time.Time
	readsTheClock := resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
		start = time.Now()
		return next.RunAt(ctx, start)
	})
	timer := resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
		at, ok := next.Entered()
		if !ok {
			at = time.Now() // nobody outside read the clock
		}
		fmt.Println("took the reading from outside:", ok && at.Equal(start))
		err := next.Run(ctx)
		_ = time.Since(at) // the call's duration
		return err
	})
	chain := resilience.NewChain(readsTheClock, timer)
	_ = chain.Execute(context.Background(), func(context.Context) error { return nil })
	_ = resilience.NewChain(timer).Execute(context.Background(), func(context.Context) error { return nil })
	// Output:
	// took the reading from outside: true
	// took the reading from outside: false
}
