package httpmw_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A request a local policy refuses fails with the policy's error — errors.Is
// with its sentinel, RejectionReason naming it — and no response; it never
// reaches the server, and its body is closed.
func TestClientRejectionsAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     string
		sentinel error
		reason   string
	}{
		{"breaker open", `
defaults:
  circuitBreaker: { mode: FORCED_OPEN }
`, circuitbreaker.ErrOpen, resilience.ReasonCircuitOpen},
		{"bulkhead full", `
defaults:
  bulkhead: { maxConcurrentCalls: 1 }
`, bulkhead.ErrFull, resilience.ReasonBulkheadFull},
		{"rate limited", `
defaults:
  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }
`, ratelimiter.ErrLimited, resilience.ReasonRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			var first bool
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				if !first {
					first = true
					close(arrived)
					<-release
				}
			})
			chain := newChain(t, tc.yaml, b.host)
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			if tc.sentinel != circuitbreaker.ErrOpen {
				// A first request takes the bulkhead's one permit (and the
				// rate limiter's one permit of the period).
				done := make(chan error, 1)
				go func() {
					_, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL, nil))
					done <- err
				}()
				<-arrived
				defer func() {
					close(release)
					if err := <-done; err != nil {
						t.Error(err)
					}
				}()
			}
			before := b.requests.Load()
			body := &closeCounter{Reader: http.NoBody}
			req := newRequest(t, http.MethodPost, b.URL, nil)
			req.Body = body
			resp, err := client.Do(req)
			if resp != nil || !errors.Is(err, tc.sentinel) || httpmw.RejectionReason(err) != tc.reason {
				t.Fatalf("got %v, %v (reason %q); want no response and %v", resp, err, httpmw.RejectionReason(err), tc.reason)
			}
			if b.requests.Load() != before {
				t.Error("the rejected request reached the server")
			}
			if body.closed.Load() != 1 {
				t.Errorf("its body was closed %d times, want once", body.closed.Load())
			}
		})
	}
	if httpmw.RejectionReason(errors.New("other")) != "" || httpmw.RejectionReason(nil) != "" {
		t.Error("a reason for an error that is no rejection")
	}
}

// problemDetails is the body of a rejection (RFC 9457).
type problemDetails struct {
	Type, Title, Detail, Reason string
	Status                      int
}

// The server middleware answers a request it sheds at once, without its
// handler: 503 for a full bulkhead, 429 for a rate limit, with
// Retry-After, the reason header and a problem+json body naming it.
func TestServerShedding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		yaml   string
		status int
		reason string
	}{
		{"bulkhead full", `
hosts:
  "{{host}}":
    bulkhead: { maxConcurrentCalls: 1 }
`, 503, resilience.ReasonBulkheadFull},
		{"rate limited", `
hosts:
  "{{host}}":
    rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }
`, 429, resilience.ReasonRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			var handled int
			b := newBackend(t, nil)
			srv := newServer(t, replaceHost(tc.yaml, b.host), httpmw.WithRetryAfter(2500*time.Millisecond))
			handler := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled++
				if handled == 1 {
					close(arrived)
					<-release
				}
			}))
			b.set(handler.ServeHTTP)
			tr, _ := newTransport(t)
			client := &http.Client{Transport: tr} // a plain client: what any client sees
			done := make(chan error, 1)
			go func() {
				_, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+"/a", nil))
				done <- err
			}()
			<-arrived
			resp, err := client.Do(newRequest(t, http.MethodGet, b.URL+"/a", nil))
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p problemDetails
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			h := resp.Header
			if resp.StatusCode != tc.status || h.Get("Retry-After") != "3" || h.Get(httpmw.ReasonHeader) != tc.reason ||
				h.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %v, want %d with Retry-After 3, the reason %s and problem+json", resp.StatusCode, h, tc.status, tc.reason)
			}
			if p.Reason != tc.reason || p.Status != tc.status || p.Type != httpmw.ProblemType || p.Title != http.StatusText(tc.status) || p.Detail == "" {
				t.Errorf("problem %+v", p)
			}
			if handled != 1 {
				t.Errorf("the handler ran %d times, want once", handled)
			}
		})
	}
}

func replaceHost(yaml, host string) string { return strings.ReplaceAll(yaml, "{{host}}", host) }

// relay is service B of a three-hop test: a meshless server whose handler
// calls service C through its own meshless client, and passes C's response
// (status, headers, body) on, or answers its client's rejection as a
// meshless server does.
func relay(client *http.Client, cURL string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Do(newRequestFrom(r, cURL))
		if err != nil {
			if !httpmw.WriteRejection(w, err) {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body) //nolint:errcheck
	}
}

func newRequestFrom(r *http.Request, url string) *http.Request {
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, url, nil)
	return req
}

// hopYAML retries three times and opens its breaker on nothing it sees in
// this test (its window never decides).
const hopYAML = `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms }
`

// Three hops, A → B → C, each a meshless client or server. A rejection
// crosses the hops as the core says: never retried at any hop; a full
// bulkhead at C is ignored by B's breaker and A's; an open breaker at B
// (refusing B's calls to C) reaches A as B's rejection, a failure of B for
// A's breaker.
func TestRejectionsAcrossThreeHops(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bYAML       string // B's client, calling C
		reason      string
		status      int
		cRequests   int64
		aOutcome    resilience.Outcome
		bOutcomes   []resilience.Outcome
		bulkheadAtC bool
	}{
		{name: "C's bulkhead is full", bYAML: hopYAML, reason: resilience.ReasonBulkheadFull, status: 503,
			cRequests: 1, aOutcome: resilience.Ignored, bOutcomes: []resilience.Outcome{resilience.Ignored}, bulkheadAtC: true},
		{name: "B's breaker is open", bYAML: strings.Replace(hopYAML, "minimumNumberOfCalls: 100", "mode: FORCED_OPEN", 1), reason: resilience.ReasonCircuitOpen, status: 503,
			cRequests: 0, aOutcome: resilience.Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// C: a meshless server with one permit, which a request from
			// elsewhere holds.
			arrived, release := make(chan struct{}), make(chan struct{})
			c := newBackend(t, nil)
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(free) // before C closes, whatever the test's end
			var cHandled int
			ccfg, err := httpmw.ParseConfig([]byte("defaults:\n  bulkhead: { maxConcurrentCalls: 1 }\n"))
			if err != nil {
				t.Fatal(err)
			}
			cSrv, err := httpmw.NewServer(ccfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cSrv.Close()
			c.set(cSrv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				cHandled++
				if r.URL.Path == "/hold" {
					close(arrived)
					<-release
				}
			})).ServeHTTP)
			plain, _ := newTransport(t)
			held := make(chan error, 1)
			if tc.bulkheadAtC {
				go func() {
					_, _, err := do(t, &http.Client{Transport: plain}, newRequest(t, http.MethodGet, c.URL+"/hold", nil))
					held <- err
				}()
				<-arrived
			}
			cBefore := c.requests.Load()

			// B: a meshless server whose handler calls C through B's client.
			bObs := &resiliencetest.Observer{}
			bTr, _ := newTransport(t)
			bChain := newChain(t, tc.bYAML, c.host, httpmw.WithObserver(bObs))
			b := newBackend(t, nil)
			bSrv, err := httpmw.NewServer(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bSrv.Close()
			b.set(bSrv.Handler(relay(bChain.Client(bTr), c.URL+"/work")).ServeHTTP)

			// A: a meshless client.
			aObs := &resiliencetest.Observer{}
			aTr, _ := newTransport(t)
			aChain := newChain(t, hopYAML, b.host, httpmw.WithObserver(aObs))
			resp, err := aChain.Client(aTr).Do(newRequest(t, http.MethodGet, b.URL+"/work", nil))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tc.bulkheadAtC {
				free()
				if err := <-held; err != nil {
					t.Fatal(err)
				}
			}
			if resp.StatusCode != tc.status || resp.Header.Get(httpmw.ReasonHeader) != tc.reason {
				t.Errorf("A got %d %q, want %d %s", resp.StatusCode, resp.Header.Get(httpmw.ReasonHeader), tc.status, tc.reason)
			}
			if b.requests.Load() != 1 || c.requests.Load()-cBefore != tc.cRequests {
				t.Errorf("B got %d requests, C %d; want 1 and %d: a rejection is never retried", b.requests.Load(), c.requests.Load()-cBefore, tc.cRequests)
			}
			if got := outcomes(aObs); !slices.Equal(got, []resilience.Outcome{tc.aOutcome}) {
				t.Errorf("A's breaker: %v, want [%v]", got, tc.aOutcome)
			}
			if got := outcomes(bObs); !slices.Equal(got, tc.bOutcomes) {
				t.Errorf("B's breaker: %v, want %v", got, tc.bOutcomes)
			}
			if tc.bulkheadAtC && cHandled != 1 {
				t.Errorf("C's handler ran %d times, want once (the request that held it)", cHandled)
			}
		})
	}
}
