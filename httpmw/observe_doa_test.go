package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Observe mode changes nothing about a request: one whose context had ended
// before it began still goes to the RoundTripper below the chain (a logging
// or metrics one), as it would without meshless, and its caller gets that
// RoundTripper's answer. It went nowhere: httpmw answered it with the
// context's error itself, so the inner RoundTripper missed it. As under
// enforce, it counts neither for nor against the backend.
func TestObserveModePassesARequestWhoseContextEndedBeforeItBegan(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"retrying", `
defaults:
  mode: observe
hosts:
  api.example:
    circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
    retry: { maxAttempts: 3 }
    timeout: { perAttempt: 1s, overall: 3s }
`},
		{"hedged", `
defaults:
  mode: observe
hosts:
  api.example:
    circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
    retry: { enabled: false }
    hedging: { maxAttempts: 2, hedgingDelay: 50ms }
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen atomic.Int32
			rt := rtFunc(func(r *http.Request) (*http.Response, error) {
				seen.Add(1)
				if err := r.Context().Err(); err != nil {
					return nil, err // as http.Transport answers it
				}
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			chain := fixChain(t, tc.yaml)
			client := chain.RoundTripper(rt)
			const rounds = 6
			for i := range rounds {
				for _, want := range []error{context.DeadlineExceeded, context.Canceled} {
					ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
					if want == context.Canceled {
						ctx, cancel = context.WithCancel(t.Context())
						cancel()
					}
					for _, method := range []string{http.MethodGet, http.MethodPost} {
						req, err := http.NewRequestWithContext(ctx, method, "http://api.example/x", nil)
						if err != nil {
							t.Fatal(err)
						}
						if method == http.MethodPost {
							req.Body = io.NopCloser(strings.NewReader("once")) // no GetBody: one attempt
						}
						resp, err := client.RoundTrip(req)
						if err == nil {
							resp.Body.Close()
						}
						if !errors.Is(err, want) {
							t.Fatalf("%s %d: %v, want %v", method, i, err, want)
						}
					}
					cancel()
				}
			}
			if got, want := seen.Load(), int32(4*rounds); got != want {
				t.Errorf("the inner RoundTripper saw %d requests, want %d (every one, as without meshless)", got, want)
			}
			cb, _ := chain.Breaker("api.example")
			if m := cb.Metrics(); m.Calls != 0 {
				t.Errorf("breaker counted %d calls, want none", m.Calls)
			}
		})
	}
}
