package httpmw_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// noDeadlineYAML retries a 503 with no deadline at all: no overall
// timeout, and the callers' contexts carry none.
const noDeadlineYAML = `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { perAttempt: 1s, overall: 0s }
hosts:
  api.example:
    retry: { maxAttempts: 2, initialBackoff: 100ms, jitter: 0 }
`

// A 503 whose Retry-After asks for more than 300s (docs/retry.md,
// Pushback), in seconds or as an HTTP-date, on a call without a deadline:
// the caller gets that 503 at once. It waited what the header said (115
// days for 9999999), holding the caller's goroutine. A Retry-After of 300
// is still waited, and the retry then made.
func TestARetryAfterLongerThanTheBoundIsNotWaited(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter func() string // read in the bubble, whose clock it may need
		want       int
		took       time.Duration
	}{
		{"seconds", func() string { return "9999999" }, 503, 0},
		{"an HTTP-date", func() string { return time.Now().Add(24 * time.Hour).UTC().Format(http.TimeFormat) }, 503, 0},
		{"the bound", func() string { return "300" }, 200, 300 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int64
				retryAfter := tc.retryAfter()
				rt := rtFunc(func(r *http.Request) (*http.Response, error) {
					if n.Add(1) == 1 {
						return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {retryAfter}},
							Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
					}
					return ok(r)
				})
				chain := fixChain(t, noDeadlineYAML)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
				type result struct {
					resp *http.Response
					err  error
					took time.Duration
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					resp, err := chain.RoundTripper(rt).RoundTrip(req)
					done <- result{resp, err, time.Since(start)}
				}()
				time.Sleep(tc.took) // fake time: the bubble's clock moves once every goroutine waits
				synctest.Wait()
				var r result
				select {
				case r = <-done:
				default:
					cancel() // the retry waits the header's delay: end it, and fail
					if r = <-done; r.err == nil {
						r.resp.Body.Close()
					}
					t.Fatalf("Retry-After %s without a deadline: no answer after %v", retryAfter, tc.took)
				}
				if r.err != nil {
					t.Fatal(r.err)
				}
				r.resp.Body.Close()
				if r.resp.StatusCode != tc.want || r.took != tc.took {
					t.Fatalf("Retry-After %s: %d after %v and %d requests; want %d after %v",
						retryAfter, r.resp.StatusCode, r.took, n.Load(), tc.want, tc.took)
				}
			})
		})
	}
}

// A hedged GET without a deadline answered 503 with Retry-After: 9999999
// ends at once with that 503 and sends no other copy, as it does when the
// wait would pass the deadline (TestAHedgedRetryAfterPastTheDeadlineReturnsAtOnce).
// It waited the 115 days before the next copy.
func TestAHedgedRetryAfterLongerThanTheBoundIsNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"9999999"}},
				Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { perAttempt: 1s, overall: 0s }
hosts:
  api.example:
    hedging: { maxAttempts: 3, hedgingDelay: 500ms }
`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
		type result struct {
			resp *http.Response
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := chain.RoundTripper(rt).RoundTrip(req)
			done <- result{resp, err}
		}()
		synctest.Wait()
		var r result
		select {
		case r = <-done:
		default:
			cancel() // the hedge waits the header's delay: end it, and fail
			if r = <-done; r.err == nil {
				r.resp.Body.Close()
			}
			t.Fatalf("Retry-After 9999999 without a deadline: no answer at once (%d requests)", n.Load())
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.resp.Body.Close()
		if r.resp.StatusCode != 503 || n.Load() != 1 {
			t.Fatalf("%d after %d requests; want the 503 after 1", r.resp.StatusCode, n.Load())
		}
	})
}
