package e2e

// The adaptive throttler's keys (docs/configuration.md, adaptiveThrottling;
// docs/overload.md), played through grpcmw and httpmw on a synctest
// bubble's clock, in defaults and on the method (route) over a decoy. The
// backend refuses every call (RESOURCE_EXHAUSTED, 429), which the throttler
// counts as a refusal and the breaker as a success, so the breaker stays
// closed and the throttler acts alone. Its rejections are random draws:
// where a test expects some, their chance of not coming is below 1e-9.

import (
	"testing"
	"time"
)

const tThrottleBase = `
circuitBreaker: { enabled: false }
retry: { maxAttempts: 1 }
timeout: { enabled: false }`

// tCount makes n calls answered what and counts what their callers got.
func tCount(t *testing.T, r tRig, n int, what string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		got[r.do(what, 0)]++
	}
	for k := range got {
		if k != what && k != "rejected:THROTTLED" {
			t.Fatalf("a call got %s", k)
		}
	}
	return got
}

// TestThrottlerKeysActAsDocumented: below minimumRequests nothing is
// rejected; maxRejectionRate caps the share rejected (0: none); multiplier
// K lets K requests per accepted one through; the window forgets a burst
// exactly window after it (10 slices, counted from the throttler's start).
func TestThrottlerKeysActAsDocumented(t *testing.T) {
	for _, c := range []struct {
		name, keys, decoy string
		play              func(t *testing.T, r tRig)
	}{
		{"minimumRequests", "minimumRequests: 30, maxRejectionRate: 90", "minimumRequests: 5, maxRejectionRate: 0",
			func(t *testing.T, r tRig) {
				if got := tCount(t, r, 30, tPushback); got["rejected:THROTTLED"] != 0 {
					t.Errorf("%d of the first 30 calls rejected under minimumRequests: 30", got["rejected:THROTTLED"])
				}
				if got := tCount(t, r, 30, tPushback); got["rejected:THROTTLED"] == 0 {
					t.Errorf("none of 30 calls past minimumRequests rejected: %v", got)
				}
			}},
		{"maxRejectionRate 0", "minimumRequests: 1, maxRejectionRate: 0", "minimumRequests: 1, maxRejectionRate: 90",
			func(t *testing.T, r tRig) {
				if got := tCount(t, r, 200, tPushback); got["rejected:THROTTLED"] != 0 {
					t.Errorf("maxRejectionRate 0 rejected %d of 200", got["rejected:THROTTLED"])
				}
			}},
		{"maxRejectionRate 50", "minimumRequests: 1, maxRejectionRate: 50", "minimumRequests: 1, maxRejectionRate: 0",
			func(t *testing.T, r tRig) {
				// Past the first calls the draw is at 50 %: 400 calls reject
				// 200 ± 10 (one standard deviation).
				if n := tCount(t, r, 400, tPushback)["rejected:THROTTLED"]; n < 130 || n > 260 {
					t.Errorf("maxRejectionRate 50 rejected %d of 400, want about 200", n)
				}
			}},
		{"multiplier", "minimumRequests: 1, multiplier: 1000", "minimumRequests: 1, multiplier: 1",
			func(t *testing.T, r tRig) {
				// 10 accepted, then 300 refused: K = 1000 allows 10,000
				// requests, K = 1 rejects most of them.
				tCount(t, r, 10, tOK)
				if got := tCount(t, r, 300, tPushback); got["rejected:THROTTLED"] != 0 {
					t.Errorf("multiplier 1000 rejected %d of 300 after 10 accepted", got["rejected:THROTTLED"])
				}
			}},
		{"window: gone at its end", "window: 2s, minimumRequests: 10", "window: 1h, minimumRequests: 10",
			func(t *testing.T, r tRig) {
				start := time.Now()
				tCount(t, r, 100, tPushback)
				sleepTo(start, 2*time.Second) // below minimumRequests again
				if got := tCount(t, r, 9, tPushback); got["rejected:THROTTLED"] != 0 {
					t.Errorf("a window after a burst, %d of 9 calls rejected", got["rejected:THROTTLED"])
				}
			}},
		{"window: held until its end", "window: 2s, minimumRequests: 10", "window: 1s, minimumRequests: 10",
			func(t *testing.T, r tRig) {
				start := time.Now()
				tCount(t, r, 100, tPushback)
				sleepTo(start, 2*time.Second-time.Millisecond)
				if got := tCount(t, r, 9, tPushback); got["rejected:THROTTLED"] == 0 {
					t.Errorf("1ms before the window's end, none of 9 calls rejected: %v", got)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				inTiming(t, tr, lv, tYAML(tr, lv, tThrottleBase, "adaptiveThrottling", c.keys, c.decoy), func(t *testing.T, r tRig) {
					c.play(t, r)
				})
			})
		})
	}
}

// TestTheThrottlerStandsAsideAndStartsAfreshWithItsBreaker: while the
// breaker is open or half-open the throttler rejects nothing (the probes
// reach the backend), and when the breaker closes it starts afresh: its
// window forgets the outage, however long (docs/overload.md).
func TestTheThrottlerStandsAsideAndStartsAfreshWithItsBreaker(t *testing.T) {
	base := `
circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10, failureRateThreshold: 100, waitDurationInOpenState: 1s, maxWaitDurationInOpenState: 0s, permittedNumberOfCallsInHalfOpenState: 6 }
retry: { maxAttempts: 1 }
timeout: { enabled: false }`
	forTiming(t, func(t *testing.T, tr string, lv tLevel) {
		yml := tYAML(tr, lv, base, "adaptiveThrottling", "window: 1h, minimumRequests: 5", "enabled: false")
		inTiming(t, tr, lv, yml, func(t *testing.T, r tRig) {
			// Refusals the breaker counts as successes fill the
			// throttler's hour-long window; then 10 failures open the
			// breaker (throttled calls are not in its window).
			tCount(t, r, 50, tPushback)
			for n := 0; r.state() != "OPEN"; n++ {
				if n > 1000 {
					t.Fatal("the breaker never opened")
				}
				r.do(tFail, 0)
			}
			sleepTo(time.Now(), time.Second)
			if s := r.state(); s != "HALF_OPEN" {
				t.Fatalf("after the open wait: %s", s)
			}
			// Six probes reach the backend: a throttler that remembered
			// would reject each with a chance of 90 %.
			for i := range 6 {
				if got := r.do(tOK, 0); got != tOK {
					t.Fatalf("probe %d got %s, want the backend's answer", i, got)
				}
			}
			if s := r.state(); s != "CLOSED" {
				t.Fatalf("after 6 good probes: %s", s)
			}
			if got := tCount(t, r, 4, tPushback); got["rejected:THROTTLED"] != 0 {
				t.Errorf("after the close, %d of the first 4 calls (below minimumRequests) throttled: the outage was remembered", got["rejected:THROTTLED"])
			}
		})
	})
}
