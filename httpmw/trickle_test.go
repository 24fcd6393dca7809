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

// trickle answers 503 at once, header flushed, then its body one byte a
// second, 60 bytes in all, or (forever) until the request's context ends.
// It reports on ended when it returns.
func trickle(w http.ResponseWriter, r *http.Request, forever bool, ended chan<- struct{}) {
	defer func() { ended <- struct{}{} }()
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusServiceUnavailable)
	if rc.Flush() != nil {
		return
	}
	for i := 0; forever || i < 60; i++ {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Second):
		}
		if _, err := io.WriteString(w, "x"); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// A retryable 503 whose body trickles (a byte a second, or never ends) is
// retried at its backoff: the attempt waits for its body a short, bounded
// time, not until the body ends nor until the attempt's or the caller's
// deadline, and the failed attempt's connection is closed when the retry
// goes on. The attempt buffered the body within the attempt, unbounded in
// time: with no timeouts the call waited the whole body (60 s, or until the
// caller's deadline), and with a per-attempt timeout the 503 became a
// timeout once that timeout ended.
func TestATricklingRetryableBodyDoesNotHoldTheRetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout string
		forever bool
	}{
		{"no timeouts, the body ends after 60s", "timeout: { enabled: false }", false},
		{"no timeouts, the body never ends", "timeout: { enabled: false }", true},
		{"a per-attempt timeout", "timeout: { perAttempt: 1s, overall: 10s }", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int64
				ended := make(chan struct{}, 1)
				p := newPipeNet(t, func(w http.ResponseWriter, r *http.Request) {
					if n.Add(1) == 1 {
						trickle(w, r, tc.forever, ended)
						return
					}
					io.WriteString(w, "ok") //nolint:errcheck
				})
				chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  `+tc.timeout+`
hosts:
  api.example:
    retry: { maxAttempts: 2, initialBackoff: 100ms, maxBackoff: 100ms, jitter: 0 }
`)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				resp, err := chain.Client(p.tr).Do(newRequest(t, http.MethodGet, "http://api.example/x", nil).WithContext(ctx))
				took := time.Since(start)
				if err != nil {
					t.Fatalf("%v after %v; want the retry's 200 within a second (the backoff is 100ms)", err, took)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != "ok" || took >= time.Second {
					t.Fatalf("%d %q (%v) after %v; want the retry's 200 within a second (the backoff is 100ms)", resp.StatusCode, body, err, took)
				}
				synctest.Wait()
				select {
				case <-ended:
				default:
					t.Errorf("the trickling attempt's handler still runs after the call: its connection was not closed")
				}
			})
		})
	}
}

// When the trickling 503 is the call's answer (the retries are spent), the
// caller gets it at once, and its body whole, read at the body's own pace.
func TestATricklingAnswerIsReturnedWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan struct{}, 2)
		p := newPipeNet(t, func(w http.ResponseWriter, r *http.Request) { trickle(w, r, false, ended) })
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  timeout: { enabled: false }
hosts:
  api.example:
    retry: { maxAttempts: 2, initialBackoff: 100ms, maxBackoff: 100ms, jitter: 0 }
`)
		start := time.Now()
		resp, err := chain.Client(p.tr).Do(newRequest(t, http.MethodGet, "http://api.example/x", nil))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != 503 || took >= time.Second {
			t.Fatalf("%d after %v; want the second attempt's 503 within a second", resp.StatusCode, took)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != strings.Repeat("x", 60) {
			t.Fatalf("body %q, %v; want the 60 bytes", b, err)
		}
	})
}
