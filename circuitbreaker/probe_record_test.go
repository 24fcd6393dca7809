package circuitbreaker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

// A half-open probe whose deadline passes is settled by its context's end,
// in a goroutine of its own; the call, returning at that instant, must not
// return before that record is made: a caller that sees its call end finds
// the breaker already moved on (here: reopened), as it does for every other
// call, whose result is recorded before the call returns. It could return
// first, and a call made next saw the breaker still half-open.
func TestAProbeSettledByItsDeadlineIsRecordedBeforeTheCallReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// On failure, a record still under way finishes before the bubble
		// ends (on the bubble's clock).
		defer time.Sleep(time.Second)
		var (
			mu    sync.Mutex
			order []string
		)
		note := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, s)
		}
		obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
			return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventCall && e.Outcome == resilience.Failure {
					time.Sleep(time.Millisecond) // a recorder that takes its time
					note("recorded")
				}
			})
		})
		cb, err := circuitbreaker.New(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) {
			c.PermittedNumberOfCallsInHalfOpenState = 1
			c.MinimumNumberOfCalls = 1
			c.SlidingWindowSize = 1
		})), circuitbreaker.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		down := errors.New("down")
		_ = cb.Execute(context.Background(), func(context.Context) error { return down })
		if got := cb.State(); got != circuitbreaker.StateOpen {
			t.Fatalf("state %v after a failure, want OPEN", got)
		}
		time.Sleep(smallConf().WaitDurationInOpenState)
		synctest.Wait()
		if got := cb.State(); got != circuitbreaker.StateHalfOpen {
			t.Fatalf("state %v after the open wait, want HALF_OPEN", got)
		}
		mu.Lock()
		order = nil
		mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		err = cb.Execute(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			// The deadline's record has begun (its goroutine settled the
			// probe and sleeps in the recorder); the call returns a moment
			// later.
			time.Sleep(time.Microsecond)
			return ctx.Err()
		})
		note("returned")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Execute = %v, want the deadline", err)
		}
		mu.Lock()
		got := append([]string(nil), order...)
		mu.Unlock()
		if len(got) != 2 || got[0] != "recorded" || got[1] != "returned" {
			t.Fatalf("order %q, want the probe's failure recorded before the call returned", got)
		}
		if s := cb.State(); s != circuitbreaker.StateOpen {
			t.Fatalf("state %v when the probe's call returned, want OPEN", s)
		}
	})
}
