package resilience_test

import (
	"context"
	"errors"
	"fmt"

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
