package retry_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/retry"
)

// A MaxBackoff near the top of time.Duration passes validation, but
// backoff() converts float64(MaxBackoff) (2^63, one past MaxInt64) back to a
// Duration: on amd64 that is math.MinInt64, min() keeps the negative value,
// the deadline check (time.Until(dl) <= wait) passes, and the retry is made
// at once instead of after a wait of maxBackoff.
func TestAHugeMaxBackoffIsNoNegativeWait(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  retry.Config
		rnd  float64
		// advance is how long the test lets fake time run before counting;
		// want is how many attempts can have been made by then.
		advance time.Duration
		want    int
	}{
		{"initial=max=MaxInt64, no jitter", retry.Config{MaxAttempts: 5, InitialBackoff: math.MaxInt64, MaxBackoff: math.MaxInt64, BackoffMultiplier: 1, Jitter: 0}, 0.5, 0, 1},
		{"no-cap maxBackoff reached by the multiplier", retry.Config{MaxAttempts: 5, InitialBackoff: time.Hour, MaxBackoff: math.MaxInt64, BackoffMultiplier: 1e9, Jitter: 0}, 0.5, time.Hour + time.Second, 2},
		{"jitter pushes a large base past MaxInt64", retry.Config{MaxAttempts: 5, InitialBackoff: 200 * 365 * 24 * time.Hour, MaxBackoff: 200 * 365 * 24 * time.Hour, BackoffMultiplier: 2, Jitter: 0.9}, 0.999, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatalf("config is invalid: %v", err)
			}
			synctest.Test(t, func(t *testing.T) {
				r := newRetry(t, retry.WithConfig(tt.cfg), retry.WithRandom(func() float64 { return tt.rnd }))
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				calls := 0
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = r.Execute(ctx, func(context.Context) error { calls++; return errUnavailable })
				}()
				synctest.Wait() // the retry sleeps its backoff (or has already spun through every attempt)
				time.Sleep(tt.advance)
				synctest.Wait()
				got := calls
				cancel()
				<-done
				// Every backoff here is an hour or (much) longer.
				if got != tt.want {
					t.Fatalf("%d attempts after %v, want %d: a huge backoff became a negative wait and the retries ran back to back", got, tt.advance, tt.want)
				}
			})
		})
	}
}
