package e2e

// The rate limiter's timing keys (docs/configuration.md, rateLimiter;
// docs/ratelimiter.md), through grpcmw and httpmw on a synctest bubble's
// clock, in defaults and on the method (route) over a decoy.

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestRateLimiterPeriodsAndWaitsAsDocumented: limitForPeriod calls pass
// at once, the next is refused at once unless a permit comes within
// timeoutDuration, when it waits for it; the quota is whole again
// limitRefreshPeriod after the first, and not 1 ms before.
func TestRateLimiterPeriodsAndWaitsAsDocumented(t *testing.T) {
	const keys = "limitForPeriod: 2, limitRefreshPeriod: 1s, timeoutDuration: 300ms"
	const decoy = "limitForPeriod: 5, limitRefreshPeriod: 1m, timeoutDuration: 0s"
	base := "adaptiveThrottling: { enabled: false }\ncircuitBreaker: { enabled: false }\nretry: { maxAttempts: 1 }\ntimeout: { enabled: false }"
	forTiming(t, func(t *testing.T, tr string, lv tLevel) {
		inTiming(t, tr, lv, tYAML(tr, lv, base, "rateLimiter", keys, decoy), func(t *testing.T, r tRig) {
			start := time.Now()
			var calls sync.WaitGroup
			got := make([]string, 7)
			at := make([]time.Duration, 7)
			// when each call is made
			for i, when := range []time.Duration{0, 0, 0, 699 * time.Millisecond, 700 * time.Millisecond, 1000 * time.Millisecond, 1000 * time.Millisecond} {
				sleepTo(start, when)
				calls.Go(func() {
					got[i] = r.call(context.Background())
					at[i] = time.Since(start)
				})
				synctest.Wait()
			}
			calls.Wait()
			// Two pass at 0; the third is refused at once (the next permit
			// comes at 1s, past 300ms); at 699ms it is still too far, at
			// 700ms the call waits for it; at 1s one permit is left.
			want := []string{"ok 0s", "ok 0s", "rejected:RATE_LIMITED 0s", "rejected:RATE_LIMITED 699ms",
				"ok 1s", "ok 1s", "rejected:RATE_LIMITED 1s"}
			for i := range got {
				if s := got[i] + " " + at[i].String(); s != want[i] {
					t.Errorf("call %d: %s, want %s", i, s, want[i])
				}
			}
		})
	})
}
