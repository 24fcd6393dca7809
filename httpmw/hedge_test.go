package httpmw_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// hedgeYAML hedges the host's requests (a GET or HEAD, or the method a
// route's own hedging section names in its pattern).
const hedgeYAML = `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { perAttempt: 30s, overall: 60s }
hosts:
  "{{host}}":
    hedging: { maxAttempts: 2, hedgingDelay: 50ms }
    routes:
      "POST /search":
        hedging: { maxAttempts: 2, hedgingDelay: 50ms }
`

// A hedged GET: the first copy hangs, the second goes after hedgingDelay
// and wins; the caller gets the winner's response, the loser is cancelled
// at the server, and no connection stays open. A POST is hedged only where
// its route names it.
func TestHedging(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		hedged       bool
	}{
		{http.MethodGet, "/forecast", true},
		{http.MethodHead, "/forecast", true},
		{http.MethodPost, "/search", true},
		{http.MethodPost, "/orders", false},
		{http.MethodPut, "/orders/1", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var n atomic.Int64
			arrived, cancelled := make(chan struct{}), make(chan struct{})
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if string(body) != "" && string(body) != "query" {
					w.WriteHeader(400) // a copy without the whole body
					return
				}
				if n.Add(1) == 1 && tc.hedged {
					close(arrived)
					<-r.Context().Done() // copy 1 hangs until it is cancelled
					close(cancelled)
					return
				}
				w.Header().Set("X-Copy", r.Method)
				io.WriteString(w, "the winner") //nolint:errcheck
			})
			clock := resiliencetest.NewClock(now)
			obs := &resiliencetest.Observer{}
			chain := newChain(t, hedgeYAML, b.host, httpmw.WithClock(clock), httpmw.WithObserver(obs))
			tr, cs := newTransport(t)
			var body io.Reader
			if tc.method == http.MethodPost || tc.method == http.MethodPut {
				body = strings.NewReader("query")
			}
			req := newRequest(t, tc.method, b.URL+tc.path, body)
			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := chain.Client(tr).Do(req)
				done <- result{resp, err}
			}()
			if tc.hedged {
				<-arrived
				clock.WaitPending(1)
				clock.Advance(50 * time.Millisecond)
			}
			r := <-done
			if r.err != nil || r.resp.StatusCode != 200 {
				t.Fatalf("%v, %v", r.resp, r.err)
			}
			got, err := io.ReadAll(r.resp.Body)
			r.resp.Body.Close()
			if tc.method != http.MethodHead && (err != nil || string(got) != "the winner") {
				t.Fatalf("body %q, %v; want the winner's", got, err)
			}
			want := int64(1)
			if tc.hedged {
				<-cancelled
				want = 2
			}
			if n.Load() != want {
				t.Errorf("%d requests, want %d", n.Load(), want)
			}
			if hedges := len(obs.Events(resilience.EventHedge)); (hedges == 1) != tc.hedged {
				t.Errorf("%d hedges sent, hedged: %v", hedges, tc.hedged)
			}
			tr.CloseIdleConnections()
			if cs.open.Load() != 0 {
				t.Errorf("%d connections still open", cs.open.Load())
			}
		})
	}
}

// A copy that fails with a non-fatal status sends the next at once; its
// response is read and its connection reused; the caller gets the copy
// that succeeded.
func TestHedgingAfterANonFatalAnswer(t *testing.T) {
	h, _ := script(503, 200)
	b := newBackend(t, h)
	chain := newChain(t, hedgeYAML, b.host, httpmw.WithClock(resiliencetest.NewClock(now)))
	tr, cs := newTransport(t)
	status, body, err := do(t, chain.Client(tr), newRequest(t, http.MethodGet, b.URL+"/forecast", nil))
	if err != nil || status != 200 || body != "answer 2" {
		t.Fatalf("got %d %q, %v; want the second copy's 200", status, body, err)
	}
	if cs.dialled.Load() != 1 {
		t.Errorf("%d connections, want 1", cs.dialled.Load())
	}
}
