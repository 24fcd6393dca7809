package throttler_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

// A backend that refuses everything: after the first minimumRequests, the
// throttler rejects 90 % of the requests locally.
func Example() {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	draws := 0.0
	th, err := throttler.New(
		throttler.WithName("payments"),
		throttler.WithClock(clock),
		throttler.WithRandom(func() float64 { draws += 0.1; return draws - float64(int(draws)) }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	sent, rejected := 0, 0
	for range 1000 {
		clock.Advance(time.Millisecond)
		err := th.Execute(context.Background(), func(context.Context) error {
			sent++
			return errors.New("unavailable")
		})
		if errors.Is(err, throttler.ErrThrottled) {
			rejected++
		}
	}
	fmt.Printf("sent %d, rejected %d, rejection rate now %.1f\n", sent, rejected, th.RejectionRate())
	// Output: sent 117, rejected 883, rejection rate now 0.9
}
