package httpmw_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// noRetry never opens its breaker (the window never decides) and never
// retries: each request is one attempt, one breaker outcome.
const noRetry = `
defaults:
  circuitBreaker: { minimumNumberOfCalls: 100 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
`

// Each response is an outcome for the breaker as HTTP says: 500, 502, 503
// and 504 fail; 501 and every 4xx are a healthy server saying no; a 2xx or
// 3xx succeeds. The caller gets every one as a response, body intact.
func TestStatusesAreOutcomesAndResponses(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   resilience.Outcome
	}{
		{200, resilience.Success}, {204, resilience.Success}, {304, resilience.Success},
		{400, resilience.Success}, {404, resilience.Success}, {429, resilience.Success},
		{499, resilience.Ignored}, {500, resilience.Failure}, {501, resilience.Success},
		{502, resilience.Failure}, {503, resilience.Failure}, {504, resilience.Failure},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			h, _ := script(tc.status)
			b := newBackend(t, h)
			obs := &resiliencetest.Observer{}
			chain := newChain(t, noRetry, b.host, httpmw.WithObserver(obs))
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			status, body, err := do(t, client, newRequest(t, http.MethodGet, b.URL+"/x", nil))
			if err != nil || status != tc.status {
				t.Fatalf("got %d, %v; want the %d response", status, err, tc.status)
			}
			if tc.status != 204 && tc.status != 304 && body != "answer 1" {
				t.Errorf("body %q, want the server's", body)
			}
			if got := outcomes(obs); !slices.Equal(got, []resilience.Outcome{tc.want}) {
				t.Errorf("breaker outcomes %v, want [%v]", got, tc.want)
			}
		})
	}
}

// A transport error (nothing listens) is a failure; a caller that gave up
// is ignored; both reach the caller as errors, with no response.
func TestTransportErrorsAndCancellation(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		b := newBackend(t, func(http.ResponseWriter, *http.Request) {})
		url := b.URL
		b.Close() // nothing listens there now
		obs := &resiliencetest.Observer{}
		chain := newChain(t, noRetry, b.host, httpmw.WithObserver(obs))
		tr, _ := newTransport(t)
		if _, _, err := do(t, chain.Client(tr), newRequest(t, http.MethodGet, url, nil)); err == nil {
			t.Fatal("no error")
		}
		if got := outcomes(obs); !slices.Equal(got, []resilience.Outcome{resilience.Failure}) {
			t.Errorf("breaker outcomes %v, want [failure]", got)
		}
	})
	t.Run("the caller gives up", func(t *testing.T) {
		arrived := make(chan struct{})
		b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
		})
		obs := &resiliencetest.Observer{}
		chain := newChain(t, noRetry, b.host, httpmw.WithObserver(obs))
		tr, _ := newTransport(t)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
		if _, _, err := do(t, chain.Client(tr), req); !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if got := outcomes(obs); !slices.Equal(got, []resilience.Outcome{resilience.Ignored}) {
			t.Errorf("breaker outcomes %v, want [ignored]", got)
		}
	})
}

// retry3 retries up to three attempts, at once.
const retry3 = `
defaults:
  circuitBreaker: { minimumNumberOfCalls: 100 }
  adaptiveThrottling: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms }
`

// Only an idempotent method, or a request with an Idempotency-Key, is
// retried; every retry sends the whole body again (from GetBody); the
// caller gets the last attempt's response.
func TestRetriesOnlyIdempotentRequests(t *testing.T) {
	for _, tc := range []struct {
		method   string
		key      bool
		requests int64
		status   int
	}{
		{http.MethodGet, false, 3, 200}, {http.MethodHead, false, 3, 200}, {http.MethodOptions, false, 3, 200},
		{http.MethodTrace, false, 3, 200}, {http.MethodPut, false, 3, 200}, {http.MethodDelete, false, 3, 200},
		{http.MethodPost, false, 1, 503}, {http.MethodPatch, false, 1, 503},
		{http.MethodPost, true, 3, 200}, {http.MethodPatch, true, 3, 200},
	} {
		name := tc.method
		if tc.key {
			name += " with an Idempotency-Key"
		}
		t.Run(name, func(t *testing.T) {
			h, _ := script(503, 503, 200)
			var bodies []string
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				bodies = append(bodies, string(body)) // one request at a time
				h(w, r)
			})
			chain := newChain(t, retry3, b.host)
			tr, cs := newTransport(t)
			var body io.Reader
			if tc.method != http.MethodGet && tc.method != http.MethodHead && tc.method != http.MethodTrace && tc.method != http.MethodOptions {
				body = strings.NewReader("the same body")
			}
			req := newRequest(t, tc.method, b.URL+"/r", body)
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}
			status, _, err := do(t, chain.Client(tr), req)
			if err != nil || status != tc.status || b.requests.Load() != tc.requests {
				t.Fatalf("got %d, %v after %d requests; want %d after %d", status, err, b.requests.Load(), tc.status, tc.requests)
			}
			for i, got := range bodies {
				if body != nil && got != "the same body" {
					t.Errorf("request %d carried %q, want the whole body", i+1, got)
				}
			}
			if cs.dialled.Load() != 1 || b.conns.Load() != 1 {
				t.Errorf("%d connections dialled, %d accepted by the server for one call, want 1: every failed attempt's response is read, and its connection reused",
					cs.dialled.Load(), b.conns.Load())
			}
		})
	}
}

// A request whose body cannot be replayed (no GetBody) is sent once, even
// to a retrying route, and never twice half-read: when its one attempt
// fails, the error says why it was not retried.
func TestABodyThatCannotBeReplayedIsSentOnce(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		// Read part of the body, then drop the connection.
		buf := make([]byte, 4)
		io.ReadFull(r.Body, buf) //nolint:errcheck
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	chain := newChain(t, retry3, b.host)
	tr, _ := newTransport(t)
	body := &closeCounter{Reader: io.MultiReader(strings.NewReader("part one, "), bytes.NewReader(make([]byte, 1<<20)))}
	req := newRequest(t, http.MethodPut, b.URL+"/upload", nil)
	req.Body = body // a stream: no GetBody
	_, _, err := do(t, chain.Client(tr), req)
	if !errors.Is(err, httpmw.ErrNotReplayable) || !strings.Contains(err.Error(), "not retried: the request's body cannot be replayed") {
		t.Fatalf("error %v, want ErrNotReplayable naming the body", err)
	}
	if b.requests.Load() != 1 {
		t.Errorf("%d requests reached the server, want 1", b.requests.Load())
	}
	if body.closed.Load() != 1 {
		t.Errorf("the body was closed %d times, want once", body.closed.Load())
	}
}

// A POST that fails with a transport error on a retrying route says why it
// was not retried.
func TestANonIdempotentRequestSaysWhyItWasNotRetried(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	chain := newChain(t, retry3, b.host)
	tr, _ := newTransport(t)
	_, _, err := do(t, chain.Client(tr), newRequest(t, http.MethodPost, b.URL+"/orders", strings.NewReader("{}")))
	if !errors.Is(err, httpmw.ErrNotReplayable) || !strings.Contains(err.Error(), "POST is not idempotent") || b.requests.Load() != 1 {
		t.Fatalf("error %v after %d requests; want one request and ErrNotReplayable naming POST", err, b.requests.Load())
	}
}
