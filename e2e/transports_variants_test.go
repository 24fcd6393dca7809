package e2e

// Variants of the differential test (transports_test.go): the same kind of
// scripts through other configurations, each the same YAML for both
// transports.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// diffObserveYAML is diffYAML under mode: observe (docs/configuration.md,
// Observe mode): every policy decides and reports as usual, none acts.
var diffObserveYAML = strings.Replace(diffYAML, "defaults:\n", "defaults:\n  mode: observe\n", 1)

// diffHedgeYAML hedges instead of retrying (docs/hedging.md); retry is written
// nowhere, since a retry written and enabled beside hedging is an error.
// The non-fatal lists name the same answers in each transport's codes.
const diffHedgeYAML = `
retryThrottling: { maxTokens: 10, tokenRatio: 1 }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker:
    slidingWindowSize: 8
    minimumNumberOfCalls: 4
    failureRateThreshold: 50
    waitDurationInOpenState: 5s
    maxWaitDurationInOpenState: 20s
    slowCallDurationThreshold: 500ms
    slowCallRateThreshold: 75
  timeout: { perAttempt: 1s, overall: 4s }
  rateLimiter: { limitForPeriod: 8, limitRefreshPeriod: 1s }
services:
  grpc.testing.TestService:
    hedging: { maxAttempts: 3, hedgingDelay: 300ms, nonFatalStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
hosts:
  backend.test:
    hedging: { maxAttempts: 3, hedgingDelay: 300ms, nonFatalStatusCodes: [502, 503, 429] }
`

// diffKeyByMethodYAML is diffYAML with a breaker, a bulkhead and a rate limiter
// per method (gRPC) and per route (HTTP).
var diffKeyByMethodYAML = strings.Replace(strings.Replace(diffYAML,
	"  circuitBreaker:\n", "  circuitBreaker:\n    keyBy: method\n", 1),
	"    retry: { retryableStatusCodes: [502, 503, 504, 429] }\n",
	"    retry: { retryableStatusCodes: [502, 503, 504, 429] }\n    routes:\n      \"GET /item/{id}\": {}\n", 1)

func TestTransportsAgreeOnVariants(t *testing.T) {
	for _, v := range []struct {
		name, yml string
		// bounded: give every call a deadline (observe mode cuts
		// nothing: a hung attempt lasts as long as its caller waits).
		bounded bool
		// oracle: hold each run to checkRun (written for retries).
		oracle bool
	}{
		{"observe mode", diffObserveYAML, true, true},
		{"hedging", diffHedgeYAML, false, false},
		{"keyBy method", diffKeyByMethodYAML, false, true},
	} {
		if !strings.Contains(v.yml, "observe") && v.name == "observe mode" ||
			!strings.Contains(v.yml, "keyBy: method") && v.name == "keyBy method" ||
			!strings.Contains(v.yml, "routes:") && v.name == "keyBy method" {
			t.Fatalf("%s: the YAML edit did not apply:\n%s", v.name, v.yml)
		}
		for _, seed := range seeds(t, 11, 12, 13, 14, 15, 16, 17) {
			t.Run(fmt.Sprintf("%s/seed %d", v.name, seed), func(t *testing.T) {
				steps := generate(seed, 200)
				if strings.Contains(v.yml, "hedging:") {
					oneConnectionPerCopy(steps)
				}
				if v.bounded {
					for i := range steps {
						if steps[i].deadline == 0 && steps[i].cancel == 0 {
							steps[i].deadline = 4*time.Second + 5*time.Microsecond
						}
					}
				}
				compareWith(t, v.yml, steps, v.oracle)
			})
		}
	}
}

// oneConnectionPerCopy replaces the answers that break a connection with
// UNAVAILABLE, for hedged calls: gRPC's copies share one HTTP/2
// connection, and a broken one ends every copy in flight, where HTTP/1.1
// gives each copy a connection of its own and a broken one ends that copy
// only. The harness cannot break one gRPC stream alone (a handler cannot
// reset its stream), so the two would differ by the transports, not by
// meshless.
func oneConnectionPerCopy(steps []step) {
	for i := range steps {
		as := slices.Clone(steps[i].answers)
		for j, a := range as {
			if a == aAbort || a == aCut {
				as[j] = aUnavailable
			}
		}
		steps[i].answers = as
	}
}

// diffShedYAML is the server's own load shedding in front of the backend:
// a rate limiter, so that sequential calls are shed (docs/grpc-server.md;
// docs/http.md, Rejections on the wire). Its rejections reach the client
// as each transport writes them: RESOURCE_EXHAUSTED with RATE_LIMITED and
// a pushback trailer, 429 with Meshless-Rejection and Retry-After.
const diffShedYAML = `
defaults:
  rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 1s }
`

// diffBulkheadOfOneYAML is a server that serves one call at a time.
const diffBulkheadOfOneYAML = `
defaults:
  bulkhead: { maxConcurrentCalls: 1 }
`

func TestTransportsAgreeBehindASheddingServer(t *testing.T) {
	t.Run("table", func(t *testing.T) {
		compareSetup(t, setup{yml: diffYAML, serverYML: diffShedYAML}, script(
			calls(3, aOK), calls(1, aOK), calls(1, aUnavailable, aOK), // the 4th and 5th are shed
			after(time.Second+time.Microsecond, calls(1, aUnavailable, aUnavailable, aOK)), calls(1, aOK),
			calls(1, aOK)), false)
	})
	// A server bulkhead of one: a permit that a handler's abort (a panic
	// over HTTP) kept would turn every later call into BULKHEAD_FULL.
	for _, seed := range seeds(t, 31, 32, 33) {
		t.Run(fmt.Sprint("bulkhead of one/seed ", seed), func(t *testing.T) {
			compareSetup(t, setup{yml: diffYAML, serverYML: diffBulkheadOfOneYAML}, generate(seed, 200), false)
		})
	}
	// Seed 21 holds a half-open probe whose 19 ms deadline passes on a slow
	// answer: the breaker's record of it must be in by the time the call
	// returns, in both transports.
	for _, seed := range seeds(t, 21, 22, 23, 24) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			compareSetup(t, setup{yml: diffYAML, serverYML: diffShedYAML}, generate(seed, 200), false)
		})
	}
}
