package e2e

// The adaptive bulkhead's keys (docs/configuration.md, bulkhead;
// docs/bulkhead.md, Fixed and adaptive limits), through grpcmw and httpmw
// on a synctest bubble's clock, in defaults and on the method (route) over
// a fixed bulkhead of 3 in defaults.

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const tBulkheadBase = `
adaptiveThrottling: { enabled: false }
circuitBreaker: { enabled: false }
retry: { maxAttempts: 1 }
timeout: { enabled: false }`

// tConcurrent starts calls that hang until they are released, and returns
// how many were admitted before the first BULKHEAD_FULL (at most max).
func tConcurrent(t *testing.T, r tRig, max int) int {
	t.Helper()
	r.b.set(tOK, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	var calls sync.WaitGroup
	defer func() { cancel(); calls.Wait() }()
	for n := range max {
		var got string
		calls.Go(func() { got = r.call(ctx) })
		synctest.Wait()
		if got == "rejected:BULKHEAD_FULL" {
			return n
		}
		if got != "" {
			t.Fatalf("call %d got %s", n, got)
		}
	}
	return max
}

// TestAdaptiveBulkheadLimitsAsDocumented: the limit starts at initialLimit
// (20 by default, kept within [minLimit, maxLimit]), and a lightly used
// bulkhead drifts down a step a window to 5 calls, never below minLimit.
func TestAdaptiveBulkheadLimitsAsDocumented(t *testing.T) {
	for _, c := range []struct {
		name, keys string
		light      time.Duration // one call at a time for so long first
		want       int
	}{
		{"defaults", "adaptive: {}", 0, 20},
		{"maxLimit under the default initial", "adaptive: { maxLimit: 5 }", 0, 5},
		{"minLimit over the default initial", "adaptive: { minLimit: 30 }", 0, 30},
		{"initialLimit", "adaptive: { initialLimit: 7 }", 0, 7},
		{"drifts down to 5", "adaptive: { initialLimit: 9 }", 10 * time.Second, 5},
		{"never below minLimit", "adaptive: { initialLimit: 10, minLimit: 8 }", 10 * time.Second, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				inTiming(t, tr, lv, tYAML(tr, lv, tBulkheadBase, "bulkhead", c.keys, "maxConcurrentCalls: 3"), func(t *testing.T, r tRig) {
					for end := time.Now().Add(c.light); time.Now().Before(end); {
						if got := r.do(tOK, 15*time.Millisecond); got != tOK {
							t.Fatalf("a lone call got %s", got)
						}
					}
					if n := tConcurrent(t, r, 40); n != c.want {
						t.Errorf("%d calls admitted at once, want %d", n, c.want)
					}
				})
			})
		})
	}
}

// TestABulkheadWaitsMaxWaitDuration: with its places taken, a call waits
// maxWaitDuration for one, fixed or adaptive, and is refused at that
// moment, not before; a place given back within it admits the call.
func TestABulkheadWaitsMaxWaitDuration(t *testing.T) {
	for _, keys := range []string{"maxConcurrentCalls: 2, maxWaitDuration: 300ms", "adaptive: { maxLimit: 2 }, maxWaitDuration: 300ms"} {
		t.Run(keys, func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				inTiming(t, tr, lv, tYAML(tr, lv, tBulkheadBase, "bulkhead", keys, "maxConcurrentCalls: 3, maxWaitDuration: 1s"), func(t *testing.T, r tRig) {
					start := time.Now()
					r.b.set(tOK, 500*time.Millisecond) // the two first calls end at 500ms
					var calls sync.WaitGroup
					defer calls.Wait()
					got := make([]string, 4)
					at := make([]time.Duration, 4)
					for i, when := range []time.Duration{0, 0, 100 * time.Millisecond, 250 * time.Millisecond} {
						sleepTo(start, when)
						calls.Go(func() {
							got[i] = r.call(context.Background())
							at[i] = time.Since(start)
						})
						synctest.Wait()
					}
					calls.Wait()
					// The third waits from 100ms, refused at 400ms; the
					// fourth from 250ms gets the place freed at 500ms, and
					// answers at 1s.
					want := []string{"ok 500ms", "ok 500ms", "rejected:BULKHEAD_FULL 400ms", "ok 1s"}
					for i := range got {
						if s := got[i] + " " + at[i].String(); s != want[i] {
							t.Errorf("call %d: %s, want %s", i, s, want[i])
						}
					}
				})
			})
		})
	}
}
