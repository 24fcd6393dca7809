package httpmw_test

import (
	"net/http"
	"testing"
)

// TestHTTPKeysTheOtherTestsLeaveAlone sweeps keys of docs/configuration.md
// that no other httpmw test writes: each row runs a short script against a
// loopback backend with the key written (at the host or at the route) and
// without it, and checks the difference the reference promises in how many
// requests reached the backend and what the caller got. No row waits on a
// timer: every wait is 1 ms of backoff at most.
func TestHTTPKeysTheOtherTestsLeaveAlone(t *testing.T) {
	const noRetry = "    retry: { enabled: false }\n"
	// A breaker that decides on the last two calls, at 100 %.
	const tight = "    circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, failureRateThreshold: 100 }\n"
	for _, tc := range []struct {
		name           string
		with, base     string // the document with the key, and without it
		statuses       []int  // the backend's answers, in turn
		requests       int
		reached        int // requests that reached the backend, with the key
		baseReached    int // and without it
		last, baseLast int // the last request's status (0: an error)
	}{{
		// 429 ignored: the window holds the two 500s and opens, and the
		// fourth request is refused; counted as a success it holds
		// [429, 500], 50 %.
		name: "circuitBreaker.ignoredStatusCodes at the route",
		with: "hosts:\n  {{host}}:\n" + noRetry + tight +
			"    routes:\n      \"GET /x\": { circuitBreaker: { ignoredStatusCodes: [429] } }\n",
		base:     "hosts:\n  {{host}}:\n" + noRetry + tight + "    routes:\n      \"GET /x\": {}\n",
		statuses: []int{500, 429, 500, 200}, requests: 4,
		reached: 3, baseReached: 4, last: 0, baseLast: 200,
	}, {
		name: "circuitBreaker.ignoredStatusCodes at the host",
		with: "hosts:\n  {{host}}:\n" + noRetry +
			"    circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, failureRateThreshold: 100, ignoredStatusCodes: [429] }\n",
		base:     "hosts:\n  {{host}}:\n" + noRetry + tight,
		statuses: []int{500, 429, 500, 200}, requests: 4,
		reached: 3, baseReached: 4, last: 0, baseLast: 200,
	}, {
		// 429 non-fatal: the second copy goes at once, not after the hour's
		// hedgingDelay, and its 200 wins; fatal, the 429 ends the call.
		name: "hedging.nonFatalStatusCodes at the route",
		with: "hosts:\n  {{host}}:\n" + noRetry +
			"    routes:\n      \"GET /x\": { hedging: { maxAttempts: 2, hedgingDelay: 1h, nonFatalStatusCodes: [429] } }\n",
		base: "hosts:\n  {{host}}:\n" + noRetry +
			"    routes:\n      \"GET /x\": { hedging: { maxAttempts: 2, hedgingDelay: 1h } }\n",
		statuses: []int{429, 200}, requests: 1,
		reached: 2, baseReached: 1, last: 200, baseLast: 429,
	}, {
		name: "hedging.nonFatalStatusCodes at the host",
		with: "hosts:\n  {{host}}:\n" + noRetry +
			"    hedging: { maxAttempts: 2, hedgingDelay: 1h, nonFatalStatusCodes: [429] }\n",
		base: "hosts:\n  {{host}}:\n" + noRetry +
			"    hedging: { maxAttempts: 2, hedgingDelay: 1h }\n",
		statuses: []int{429, 200}, requests: 1,
		reached: 2, baseReached: 1, last: 200, baseLast: 429,
	}, {
		// DISABLED: nothing recorded, every request passes; NORMAL opens
		// on the first 500.
		name: "circuitBreaker.mode: DISABLED",
		with: "hosts:\n  {{host}}:\n" + noRetry +
			"    circuitBreaker: { slidingWindowSize: 1, minimumNumberOfCalls: 1, mode: DISABLED }\n",
		base: "hosts:\n  {{host}}:\n" + noRetry +
			"    circuitBreaker: { slidingWindowSize: 1, minimumNumberOfCalls: 1 }\n",
		statuses: []int{500}, requests: 2,
		reached: 2, baseReached: 1, last: 500, baseLast: 0,
	}, {
		// A bucket of 2: the first 502 takes a token, leaving half, and
		// the retries stop.
		name: "retryThrottling.maxTokens",
		with: "retryThrottling: { maxTokens: 2 }\nhosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		base: "hosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		statuses: []int{502}, requests: 1,
		reached: 1, baseReached: 3, last: 502, baseLast: 502,
	}, {
		name: "retryThrottling.enabled",
		with: "retryThrottling: { enabled: false, maxTokens: 2 }\nhosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		base: "retryThrottling: { maxTokens: 2 }\nhosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		statuses: []int{502}, requests: 1,
		reached: 3, baseReached: 1, last: 502, baseLast: 502,
	}, {
		name: "retryThrottling.tokenRatio",
		// A bucket of 3: the first call's two 502s leave 1; two successes
		// give back 2 × 1, and the fourth call's 502 leaves 2, more than
		// half: it is retried. At 0.1 the bucket holds 1.2, and the 502
		// leaves 0.2: not retried.
		with: "retryThrottling: { maxTokens: 3, tokenRatio: 1 }\nhosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		base: "retryThrottling: { maxTokens: 3 }\nhosts:\n  {{host}}:\n" +
			"    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }\n",
		statuses: []int{502, 502, 200, 200, 502, 200}, requests: 4,
		reached: 6, baseReached: 5, last: 200, baseLast: 502,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(doc string) (reached, last int) {
				h, _ := script(tc.statuses...)
				b := newBackend(t, h)
				chain := newChain(t, doc, b.host)
				tr, _ := newTransport(t)
				client := chain.Client(tr)
				for range tc.requests {
					status, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+"/x", nil))
					last = status
					if err != nil {
						last = 0
					}
				}
				return int(b.requests.Load()), last
			}
			if got, last := run(tc.base); got != tc.baseReached || last != tc.baseLast {
				t.Errorf("without the key: %d requests reached the backend, the last answered %d; want %d, %d", got, last, tc.baseReached, tc.baseLast)
			}
			if got, last := run(tc.with); got != tc.reached || last != tc.last {
				t.Errorf("with the key: %d requests reached the backend, the last answered %d; want %d, %d", got, last, tc.reached, tc.last)
			}
		})
	}
}
