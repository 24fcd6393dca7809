package httpmw_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// fixChain builds a chain from yaml (no host substitution).
func fixChain(t *testing.T, yaml string, opts ...httpmw.Option) *httpmw.Chain {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c, err := httpmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A hedged GET answered 503 with Retry-After: 3600, past the call's
// overall deadline (2s), must end at once with that 503, as a retried GET
// does (docs/http.md, Retry-After). Before, it waited the hour, then sent
// the remaining copies past the deadline and failed with a timeout.
func TestAHedgedRetryAfterPastTheDeadlineReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"3600"}},
				Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { perAttempt: 1s, overall: 2s }
hosts:
  api.example:
    hedging: { maxAttempts: 3, hedgingDelay: 500ms }
`)
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/x", nil)
		start := time.Now()
		resp, err := chain.RoundTripper(rt).RoundTrip(req)
		took := time.Since(start)
		if err == nil {
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != 503 || took > 2*time.Second {
			t.Fatalf("got %v, %v after %v and %d requests; want the 503 at once", resp, err, took, n.Load())
		}
	})
}

// A hedged GET whose first copy hangs past the overall deadline (1s;
// hedgingDelay 5s) sends no other copy: the overall timeout is fatal.
// Before, it was taken for a non-fatal failure, every remaining copy was
// sent after the deadline, and one request that timed out was five
// failures for the breaker.
func TestHedgingSendsNoCopyPastTheOverallDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			<-r.Context().Done()
			return nil, r.Context().Err()
		})
		obs := &resiliencetest.Observer{}
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { perAttempt: 10s, overall: 1s }
hosts:
  api.example:
    hedging: { maxAttempts: 5, hedgingDelay: 5s }
`, httpmw.WithObserver(obs))
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/x", nil)
		if resp, err := chain.RoundTripper(rt).RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Fatal("no error")
		}
		if n.Load() != 1 || len(outcomes(obs)) != 1 {
			t.Fatalf("%d copies sent, breaker outcomes %v; want 1 copy (the next was due at 5s, past the 1s deadline), one failure",
				n.Load(), outcomes(obs))
		}
	})
}

// A transport (a test double; http.Client accepts it and sets
// http.NoBody) that answers a retryable status without a Body: no panic
// (before, a nil pointer in buffer).
func TestAResponseWithoutABodyDoesNotPanic(t *testing.T) {
	chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
hosts:
  api.example:
    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms }
`)
	client := chain.Client(rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Request: r}, nil
	}))
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic: %v", p)
		}
	}()
	resp, err := client.Get("http://api.example/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

type brokenBody struct{ n int }

var errBroken = errors.New("the request body's source broke")

func (e *brokenBody) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, errBroken
	}
	k := min(len(p), e.n)
	clear(p[:k])
	e.n -= k
	return k, nil
}
func (e *brokenBody) Close() error { return nil }

// A request body that fails mid-read failed on the caller's side: not a
// failure of the server (before, it was retried and counted three times
// against a server that answered nothing wrong).
func TestARequestBodyErrorIsNotABackendFailure(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }) //nolint:errcheck
	obs := &resiliencetest.Observer{}
	chain := newChain(t, retry3, b.host, httpmw.WithObserver(obs))
	tr, _ := newTransport(t)
	req := newRequest(t, http.MethodPut, b.URL+"/u", nil)
	req.Body = &brokenBody{n: 100000}
	req.GetBody = func() (io.ReadCloser, error) { return &brokenBody{n: 100000}, nil }
	req.ContentLength = 200000
	_, _, err := do(t, chain.Client(tr), req)
	if !errors.Is(err, errBroken) {
		t.Fatalf("err %v", err)
	}
	for _, o := range outcomes(obs) {
		if o == resilience.Failure {
			t.Fatalf("breaker outcomes %v: the caller's body counted against the backend", outcomes(obs))
		}
	}
}

// A request without a URL is the caller's mistake: refused at once, no
// attempt made, nothing counted (before, three attempts, three failures).
func TestARequestWithoutAURLIsNotCounted(t *testing.T) {
	obs := &resiliencetest.Observer{}
	chain := fixChain(t, "defaults:\n  adaptiveThrottling: { enabled: false }\n", httpmw.WithObserver(obs))
	var sent int
	rt := chain.RoundTripper(rtFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return http.DefaultTransport.RoundTrip(r)
	}))
	req := (&http.Request{Method: http.MethodGet, Host: "api.example", Header: http.Header{}}).WithContext(t.Context())
	if resp, err := rt.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("a request without a URL went through")
	}
	if sent != 0 || len(outcomes(obs)) != 0 {
		t.Fatalf("%d attempts sent, breaker outcomes %v; want none", sent, outcomes(obs))
	}
}
