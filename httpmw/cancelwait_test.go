package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A caller that cancels its request while a retry waits for its backoff
// gets the context's error, as net/http gives a cancelled request and as
// httpmw gives a request cancelled before it began; it got the last
// attempt's 503, a response for a request it had given up on. That 503 is
// closed. The breaker counts the failed attempt, once: the cancellation is
// no attempt.
func TestCancelDuringABackoffIsTheCallersCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		body := &closeCounter{Reader: strings.NewReader("busy")}
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: body, Request: r}, nil
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 1s, overall: 10s }
hosts:
  api.example:
    retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }
`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(500*time.Millisecond, cancel) // in the first backoff (1s)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
		start := time.Now()
		resp, err := chain.RoundTripper(rt).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, context.Canceled) || resp != nil || time.Since(start) != 500*time.Millisecond {
			t.Errorf("%v, %v after %v; want context.Canceled at 500ms, when the caller cancelled", resp, err, time.Since(start))
		}
		if n.Load() != 1 || body.closed.Load() != 1 {
			t.Errorf("%d attempts, %d bodies closed; want 1 and 1", n.Load(), body.closed.Load())
		}
		cb, _ := chain.Breaker("api.example")
		if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 1 {
			t.Errorf("breaker counted %d calls, %d failed; want the one failed attempt", m.Calls, m.FailedCalls)
		}
	})
}
