package retry_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// A hedge on a clock a test drives by hand (resiliencetest.Clock, whose
// AfterFunc runs its function in the goroutine that advances the clock):
// copies 1 and 2 hang until cancelled, copy 3 answers at once. Advancing
// the clock by hedgingDelay twice must send copy 2, then copy 3, which wins.
func TestHedgeOnAManualClock(t *testing.T) {
	clk := resiliencetest.NewClock(time.Unix(1_000_000, 0))
	h := newHedge(t, retry.WithHedgeClock(clk), retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
		c.MaxAttempts = 3
		c.HedgingDelay = 10 * time.Millisecond
	})))
	type result struct {
		w   int
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // lets a hung call go when the test fails
	done := make(chan result, 1)
	go func() {
		w, err := h.Run(ctx, func(ctx context.Context, n int) error {
			if n == 3 {
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		})
		done <- result{w, err}
	}()
	for step := 1; step <= 2; step++ {
		clk.WaitPending(1) // the next copy's timer is armed
		advanced := make(chan struct{})
		go func() {
			clk.Advance(10 * time.Millisecond)
			close(advanced)
		}()
		select {
		case <-advanced:
		case <-time.After(5 * time.Second):
			cancel()
			<-advanced
			<-done
			t.Fatalf("Advance %d (hedgingDelay) had not returned after 5s: the hedge coordinates its copies on the clock's goroutine", step)
		}
	}
	select {
	case r := <-done:
		if r.w != 3 || r.err != nil {
			t.Fatalf("Run = %d, %v; want copy 3, nil", r.w, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run has not returned")
	}
}

// The usual way to make a copy slow on a manual clock: the copy advances
// the clock itself. Copy 1 takes 2×hedgingDelay (so the hedge goes while it
// runs) and succeeds; copy 2 fails at once, non-fatally. Run must return
// copy 1's success.
func TestHedgeFirstCopyAdvancesAManualClock(t *testing.T) {
	clk := resiliencetest.NewClock(time.Unix(1_000_000, 0))
	h := newHedge(t, retry.WithHedgeClock(clk), retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
		c.MaxAttempts = 2
		c.HedgingDelay = 10 * time.Millisecond
	})))
	type result struct {
		w   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := h.Run(context.Background(), func(ctx context.Context, n int) error {
			if n == 1 {
				clk.Advance(20 * time.Millisecond) // the copy's latency
				return nil
			}
			return errNonFatal
		})
		done <- result{w, err}
	}()
	select {
	case r := <-done:
		if r.w != 1 || r.err != nil {
			t.Fatalf("Run = %d, %v; want copy 1, nil", r.w, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run has not returned after 5s: copy 1's Advance runs the hedge's coordinator, which waits for copy 1")
	}
}

// A pushback of zero sends the next copy at once, as a non-fatal failure
// without one does, whatever the clock: a timer of zero on a manual clock
// fires only when the test advances it, which a copy that waits for no
// time gives it no reason to do.
func TestHedgeZeroPushbackOnAManualClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := resiliencetest.NewClock(time.Unix(1_000_000, 0))
		h := newHedge(t, retry.WithHedgeClock(clk), retry.WithHedgePushback(pushbackOf),
			retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
				c.MaxAttempts = 2
				c.HedgingDelay = time.Hour
			})))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type result struct {
			w   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			w, err := h.Run(ctx, func(_ context.Context, n int) error {
				if n == 1 {
					return &pushbackErr{d: 0}
				}
				return nil
			})
			done <- result{w, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			if r.w != 2 || r.err != nil {
				t.Fatalf("Run = %d, %v; want copy 2, nil", r.w, r.err)
			}
		default:
			cancel()
			r := <-done
			t.Fatalf("Run waited for the clock to move after a pushback of 0 (then: %d, %v)", r.w, r.err)
		}
	})
}
