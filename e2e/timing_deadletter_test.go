package e2e

// The dead-letter queue's timing keys (docs/configuration.md, deadLetter;
// docs/deadletter.md), through grpcmw (HTTP requests are not deferred) on
// a synctest bubble's clock, in defaults and on the method over a decoy.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDeadLetterTimingKeysActAsDocumented: calls deferred while the
// breaker is open are replayed from its close, replayRate a second; one
// whose turn comes at maxAge is expired instead; each replay ends at
// replayTimeout, a failed one counted against maxReplays.
func TestDeadLetterTimingKeysActAsDocumented(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		name, keys, decoy string
		delay             time.Duration   // each replay's answer comes after this
		want              []time.Duration // replays' arrivals, since the breaker closed
	}{
		{"replayRate", "replayRate: 4", "replayRate: 50", 0,
			[]time.Duration{0, 250 * ms, 500 * ms, 750 * ms, 1000 * ms}},
		// Deferred 1s before the close: the third replay's turn comes at
		// 1.5s, maxAge, and it and those behind it are expired.
		{"maxAge", "replayRate: 4, maxAge: 1500ms", "replayRate: 4, maxAge: 1h", 0,
			[]time.Duration{0, 250 * ms}},
		// Each replay hangs until replayTimeout and fails; the entry is
		// tried again after the backoff (1s) and parked at maxReplays, and
		// the next one comes a backoff later.
		{"replayTimeout and maxReplays", "replayTimeout: 300ms, maxReplays: 2", "replayTimeout: 1h, maxReplays: 5", time.Hour,
			[]time.Duration{0, 1300 * ms, 2600 * ms, 3900 * ms}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, lv := range []tLevel{lvDefaults, lvMethod} {
				t.Run(string(lv), func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "dl.db")
					const win = "slidingWindowSize: 4, minimumNumberOfCalls: 4, failureRateThreshold: 50, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1"
					base := tBreakerBase + "\ncircuitBreaker: { " + win + " }"
					dl := func(keys string) string { return "path: " + path + ", " + keys }
					yml := tYAML("grpc", lv, base, "deadLetter", dl(c.keys), dl(c.decoy))
					inTiming(t, "grpc", lv, yml, func(t *testing.T, r tRig) {
						tOpen(t, r)
						for i := range 5 {
							if got := r.do(tOK, 0); !strings.Contains(got, "DEFERRED") {
								t.Fatalf("deferred call %d got %s", i, got)
							}
						}
						sleepTo(time.Now(), time.Second)
						r.b.set(tOK, 0)
						// The probe is answered at once, the replays after
						// it with c.delay: the first replay, which the close
						// sets off, may reach the backend before the probe's
						// caller is back (it did, under load, with the delay
						// set after the probe: a replay answered at once).
						r.b.setNext(tOK, c.delay)
						seen := len(r.b.since(time.Time{}, 0))
						if got := r.call(context.Background()); got != tOK {
							t.Fatalf("the probe got %s", got)
						}
						closed := time.Now()
						sleepTo(closed, 5*time.Second)
						got := r.b.since(closed, seen+1)
						if !slices.Equal(got, c.want) {
							t.Errorf("replays reached the backend at %v after the close, want %v", got, c.want)
						}
						r.b.set(tOK, 0)
					})
				})
			}
		})
	}
}
