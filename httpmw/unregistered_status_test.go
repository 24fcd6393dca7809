package httpmw_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
)

// A status no one registered is read as its class's x00 (RFC 9110 §15: a
// client treats an unrecognized status as the x00 of its class, and one
// outside 100–599 as a 5xx): a 520–527 from a CDN in front of a backend
// that is down, a 599, or a 999 is a 500 to the breaker and the retry on
// the defaults — a failure, not retried — unless a list names the status
// itself. A registered status keeps its own row (507: a success on the
// defaults). The caller gets the response as it came.
func TestAnUnregisteredStatusIsReadAsItsClass(t *testing.T) {
	for _, tc := range []struct {
		status   int
		cb, rt   string // more keys of the host's circuitBreaker and retry
		open     bool   // the breaker opens after 4 such calls
		attempts int64  // per call
	}{
		{status: 521, open: true, attempts: 1},
		{status: 599, open: true, attempts: 1},
		{status: 999, open: true, attempts: 1},
		{status: 507, open: false, attempts: 1},
		{status: 499, open: false, attempts: 1},
		// A status a list names is taken as written.
		{status: 521, rt: ", retryableStatusCodes: [521]", open: true, attempts: 2},
		{status: 521, cb: ", ignoredStatusCodes: [521]", open: false, attempts: 1},
		// A list that names 500 takes the unregistered 5xx with it.
		{status: 521, rt: ", retryableStatusCodes: [500]", open: true, attempts: 2},
	} {
		t.Run(strconv.Itoa(tc.status)+tc.cb+tc.rt, func(t *testing.T) {
			h, _ := script(tc.status)
			b := newBackend(t, h)
			// The window holds every attempt of the 4 calls: it is full
			// when the last one ends.
			window := strconv.Itoa(4 * int(tc.attempts))
			chain := newChain(t, `
retryThrottling: { enabled: false }
hosts:
  {{host}}:
    circuitBreaker: { slidingWindowSize: `+window+`, minimumNumberOfCalls: `+window+tc.cb+` }
    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms`+tc.rt+` }
`, b.host)
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			for i := range 4 {
				status, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL, nil))
				if err != nil || status != tc.status {
					t.Fatalf("call %d: %d, %v; want the backend's %d as it came", i, status, err, tc.status)
				}
			}
			if got := b.requests.Load(); got != 4*tc.attempts {
				t.Fatalf("the backend saw %d requests for 4 calls, want %d", got, 4*tc.attempts)
			}
			cb, _ := chain.Breaker(b.host)
			if open := cb.State() == circuitbreaker.StateOpen; open != tc.open {
				t.Fatalf("breaker %v after 4 calls answered %d, want open %v", cb.State(), tc.status, tc.open)
			}
		})
	}
}
