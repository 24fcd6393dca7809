package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// A request whose caller cancels while a retry waits out its backoff ends
// with the context's error, and its retry policy's "retry done" event
// (reason context_done) says so too: it carried the last attempt's 429, a
// success for the breaker, so meshless.retry.calls counted a cancelled
// request a success.
func TestARetryCancelledInItsBackoffRecordsTheCallersCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 429, Header: http.Header{}, Body: &closeCounter{Reader: strings.NewReader("busy")}, Request: r}, nil
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
hosts:
  api.example:
    retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0, retryableStatusCodes: [429] }
`, httpmw.WithObserver(obs))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(500*time.Millisecond, cancel) // in the first backoff
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
		resp, err := chain.RoundTripper(rt).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%v, want context.Canceled", err)
		}
		var done, calls []resilience.Event
		for _, rec := range obs.Recorded() {
			switch {
			case rec.Event.Type == resilience.EventRetryDone:
				done = append(done, rec.Event)
			case rec.Event.Type == resilience.EventCall && rec.Source.Kind == resilience.KindCall:
				calls = append(calls, rec.Event)
			}
		}
		if len(done) != 1 || len(calls) != 1 {
			t.Fatalf("%d retry-done and %d call events, want one each", len(done), len(calls))
		}
		d, c := done[0], calls[0]
		if d.Reason != retry.ReasonContextDone || !errors.Is(d.Err, context.Canceled) {
			t.Errorf("retry done: %v, %v; want context_done, the caller's cancel", d.Reason, d.Err)
		}
		if d.Outcome != c.Outcome || d.Outcome == resilience.Success {
			t.Errorf("retry done: outcome %v; the call's %v (%v): want the same, not a success", d.Outcome, c.Outcome, c.Err)
		}
	})
}
