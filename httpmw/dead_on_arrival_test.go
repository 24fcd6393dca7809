package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request whose context has ended before it starts never reaches the
// backend and counts neither for nor against it (it counted as a failure:
// a dozen opened the breaker of a healthy backend). Retried, hedged and
// one-attempt (a POST without GetBody) requests, with an expired deadline
// and with a cancel: each gets the context's error, and a live request
// after them is answered.
func TestARequestWhoseContextEndedBeforeItStartsCountsForNothing(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"retrying", `
hosts:
  "{{host}}":
    circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
    retry: { maxAttempts: 3 }
    timeout: { perAttempt: 1s, overall: 3s }
`},
		{"hedged", `
hosts:
  "{{host}}":
    circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
    retry: { enabled: false }
    hedging: { maxAttempts: 2, hedgingDelay: 50ms }
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := script(200)
			b := newBackend(t, h)
			chain := newChain(t, tc.yaml, b.host)
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			for i := range 12 {
				for _, want := range []error{context.DeadlineExceeded, context.Canceled} {
					ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
					if want == context.Canceled {
						ctx, cancel = context.WithCancel(t.Context())
						cancel()
					}
					for _, method := range []string{http.MethodGet, http.MethodPost} {
						req, err := http.NewRequestWithContext(ctx, method, b.URL+"/x", nil)
						if err != nil {
							t.Fatal(err)
						}
						if method == http.MethodPost {
							req.Body = io.NopCloser(strings.NewReader("once")) // no GetBody: one attempt
						}
						if _, _, err := do(t, client, req); !errors.Is(err, want) {
							t.Fatalf("%s %d: %v, want %v", method, i, err, want)
						}
					}
					cancel()
				}
			}
			if n := b.requests.Load(); n != 0 {
				t.Errorf("the backend saw %d requests, want none", n)
			}
			if status, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+"/x", nil)); err != nil || status != 200 {
				t.Errorf("a live request after them: %d, %v; want it answered", status, err)
			}
		})
	}
}
