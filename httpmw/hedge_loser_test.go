package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// HTTP's side of grpcmw's TestAHedgeLoserCancelledJustBeforeTheDeadlineIsNoTimeout:
// a hedged GET whose winner answers 1ms before the overall deadline; the
// loser, cancelled by the winner before the deadline, returns 2ms later
// (its goroutine ran late), past the deadline. It is no timeout: the
// breaker ignores it, as it ignores any loser the winner cancelled.
func TestAHedgedRequestsLoserCancelledJustBeforeTheDeadlineIsNoTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loser int32 // the losing copy
		wait  time.Duration
	}{{"the first copy loses", 1, 199 * time.Millisecond}, {"the hedge loses", 2, 299 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				rt := rtFunc(func(r *http.Request) (*http.Response, error) {
					if n.Add(1) == tc.loser {
						<-r.Context().Done()
						time.Sleep(2 * time.Millisecond)
						return nil, r.Context().Err()
					}
					time.Sleep(tc.wait)
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("winner")), Request: r}, nil
				})
				chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 300ms }
hosts:
  api.example:
    hedging: { maxAttempts: 2, hedgingDelay: 100ms }
`)
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example/x", nil)
				resp, err := chain.RoundTripper(rt).RoundTrip(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%v, %v; want the winner's 200", resp, err)
				}
				resp.Body.Close()
				cb, _ := chain.Breaker("api.example")
				if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 0 {
					t.Errorf("breaker %+v, want 1 call, a success: the loser the winner cancelled is ignored", m)
				}
			})
		})
	}
}

// HTTP's side of grpcmw's TestHedgedCopiesThatHangUntilTheOverallDeadlineEachCountOneFailure:
// a hedged GET whose two copies both hang until the overall deadline
// counts two breaker failures, one per copy sent (docs/hedging.md),
// whichever copy's end the hedge sees first. The copy seen last ends as
// net/http ends a request whose context the hedge's cancel reached before
// its own deadline timer: context.Canceled, just after the deadline.
func TestHedgedRequestsThatHangUntilTheOverallDeadlineEachCountOneFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		last int32 // the copy seen last
	}{{"the first copy seen last", 1}, {"the hedge seen last", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				rt := rtFunc(func(r *http.Request) (*http.Response, error) {
					k := n.Add(1)
					<-r.Context().Done()
					if k == tc.last {
						time.Sleep(time.Millisecond) // the other copy's end decides the call
						return nil, context.Canceled
					}
					return nil, r.Context().Err()
				})
				chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 300ms }
hosts:
  api.example:
    hedging: { maxAttempts: 2, hedgingDelay: 100ms }
`)
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example/x", nil)
				resp, err := chain.RoundTripper(rt).RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the call = %v, want the overall timeout", err)
				}
				cb, _ := chain.Breaker("api.example")
				if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 2 {
					t.Errorf("breaker %+v, want 2 calls, both failed: one per copy sent", m)
				}
			})
		})
	}
}
