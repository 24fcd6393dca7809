package timeout_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/timeout"
)

// A per-attempt timeout cuts a call to a dependency that hangs; the error
// says so and still matches context.DeadlineExceeded.
func Example() {
	perAttempt, _ := timeout.New(20 * time.Millisecond)
	err := perAttempt.Execute(context.Background(), func(ctx context.Context) error {
		<-ctx.Done() // a hung dependency
		return ctx.Err()
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, timeout.ErrTimeout))
	// Output:
	// attempt timeout of 20ms exceeded
	// true true
}
