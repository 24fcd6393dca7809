package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/retry"
)

// A hedged call whose first copy hangs: the second copy, sent after
// hedgingDelay, answers, and the first is cancelled.
func ExampleHedge() {
	errUnavailable := errors.New("unavailable")
	cfg := retry.DefaultHedgeConfig()
	cfg.MaxAttempts = 2 // two copies at most: the second one wins, however late it runs
	cfg.HedgingDelay = time.Millisecond
	h, err := retry.NewHedge(
		retry.WithHedgeConfig(cfg),
		retry.WithNonFatal(func(err error) bool { return errors.Is(err, errUnavailable) }),
	)
	if err != nil {
		panic(err)
	}
	cancelled := make(chan bool, 1)
	winner, err := h.Run(context.Background(), func(ctx context.Context, copy int) error {
		if copy == 1 {
			<-ctx.Done() // a slow backend
			cancelled <- true
			return ctx.Err()
		}
		return nil
	})
	fmt.Println("winner:", winner, "error:", err, "first copy cancelled:", <-cancelled)
	// Output: winner: 2 error: <nil> first copy cancelled: true
}
