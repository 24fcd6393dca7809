package httpmw_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
)

// A status outside 100–599 is a 500 to the breaker and the retry (RFC 9110
// §15: an invalid status is a 5xx; docs/http.md), whatever its number: not
// only the 600–999 an HTTP/1 status line can carry, but a 0xx one can, and
// any integer HTTP/2's :status or the wrapped RoundTripper gives. Before,
// only 600–999 were; the others counted as successes, so a backend answering
// with them never opened its breaker. The caller gets the response as it
// came.
func TestAStatusOutsideHTTPsRangeIsA500(t *testing.T) {
	for _, s := range []int{0, 42, 99, 600, 1000, 123456789, -7} {
		t.Run(strconv.Itoa(s), func(t *testing.T) {
			chain := newChain(t, `
retryThrottling: { enabled: false }
hosts:
  api.example:
    circuitBreaker: { slidingWindowSize: 8, minimumNumberOfCalls: 8 }
    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [500] }
`, "api.example")
			var sent atomic.Int64
			client := chain.Client(rtFunc(func(r *http.Request) (*http.Response, error) {
				sent.Add(1)
				return &http.Response{StatusCode: s, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
			}))
			for i := range 4 {
				req, _ := http.NewRequest(http.MethodGet, "http://api.example/x", nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				resp.Body.Close()
				if resp.StatusCode != s {
					t.Fatalf("call %d: got %d, want the server's %d as it came", i, resp.StatusCode, s)
				}
			}
			if n := sent.Load(); n != 8 {
				t.Errorf("%d requests for 4 calls, want 8: status %d is a 500, which the retry lists", n, s)
			}
			if cb, _ := chain.Breaker("api.example"); cb.State() != circuitbreaker.StateOpen {
				t.Errorf("the breaker is %v after 8 answers of status %d, want OPEN: a 500 is a failure", cb.State(), s)
			}
		})
	}
}
