package httpmw_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
)

// The timeouts bound the wait for the response's header; the body of the
// response the call returns is read after the attempt (and the call) ended,
// under the request's own context: the engine's end of the attempt does
// not cut it.
func TestTheBodyIsReadAfterTheTimeoutsEnd(t *testing.T) {
	release := make(chan struct{})
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		http.NewResponseController(w).Flush() //nolint:errcheck
		<-release
		io.WriteString(w, "the body, sent after RoundTrip returned") //nolint:errcheck
	})
	chain := newChain(t, `
defaults:
  timeout: { perAttempt: 1s, overall: 3s }
`, b.host)
	tr, _ := newTransport(t)
	resp, err := chain.Client(tr).Do(newRequest(t, http.MethodGet, b.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(release)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "the body, sent after RoundTrip returned" {
		t.Fatalf("body %q, %v", body, err)
	}
}

// A server that never answers: each attempt ends at its timeout, a failure
// for the breaker, retried (an attempt's timeout carries no status: it is
// retried for a request that may be sent again); the caller's error is a
// timeout on every reading: errors.Is with context.DeadlineExceeded and
// timeout.ErrTimeout, and a net.Error whose Timeout is true.
func TestAHangingServerTimesOut(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	obs := &resiliencetest.Observer{}
	chain := newChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms }
  timeout: { perAttempt: 50ms, overall: 5s }
`, b.host, httpmw.WithObserver(obs))
	tr, cs := newTransport(t)
	_, _, err := do(t, chain.Client(tr), newRequest(t, http.MethodGet, b.URL, nil))
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, timeout.ErrTimeout) || !errors.As(err, &ne) || !ne.Timeout() || !os.IsTimeout(err) {
		t.Fatalf("error %v (%T), want a timeout on every reading", err, err)
	}
	if b.requests.Load() != 2 {
		t.Errorf("%d requests, want 2", b.requests.Load())
	}
	if got := outcomes(obs); !slices.Equal(got, []resilience.Outcome{resilience.Failure, resilience.Failure}) {
		t.Errorf("breaker outcomes %v, want two failures", got)
	}
	tr.CloseIdleConnections()
	if cs.open.Load() != 0 {
		t.Errorf("%d connections still open", cs.open.Load())
	}
}
