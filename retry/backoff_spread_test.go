package retry_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/retry"
)

// docs/retry.md: "At the cap the base is clamped before the jitter, so the
// waits stay spread over [maxBackoff × (1 − jitter), maxBackoff] and clients
// that failed together do not retry in step". backoff() multiplies the capped
// base by (1 + jitter·(2r−1)) and then clamps again to maxBackoff, so every
// draw with r ≥ 0.5 — half of all clients — waits exactly maxBackoff: at the
// cap, half the clients that failed together retry in the same instant.
func TestWaitsAtTheCapAreSpreadNotPiledOnMaxBackoff(t *testing.T) {
	const clients = 100
	atCap := 0
	for i := range clients {
		r := float64(i) / clients // uniform draws over [0, 1)
		synctest.Test(t, func(t *testing.T) {
			p := newRetry(t, retry.WithConfig(retryConf(func(c *retry.Config) {
				c.MaxAttempts = 2
				c.InitialBackoff = 2 * time.Second // the first wait is already at the cap
				c.MaxBackoff = 2 * time.Second
				c.Jitter = 0.2
			})), retry.WithRandom(func() float64 { return r }))
			dep := newDependency(errUnavailable)
			_ = p.Execute(t.Context(), dep.call)
			if w := dep.waits(); len(w) == 1 && w[0] == 2*time.Second {
				atCap++
			}
		})
	}
	if atCap > clients/10 {
		t.Fatalf("%d of %d clients wait exactly maxBackoff (2s): they retry in step", atCap, clients)
	}
}
