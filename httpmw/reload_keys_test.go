package httpmw_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
)

// holdingNext is the transport below the chain in TestEachKeyAfterAReloadHTTP:
// a request with the header Hold waits for a status on release (or its
// context's end); any other gets status. It counts what reaches it.
type holdingNext struct {
	n       atomic.Int64
	status  atomic.Int64
	release chan int
}

func (h *holdingNext) RoundTrip(r *http.Request) (*http.Response, error) {
	h.n.Add(1)
	status := int(h.status.Load())
	if r.Header.Get("Hold") != "" {
		select {
		case status = <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1, Request: r}, nil
}

type httpReloadEnv struct {
	t      *testing.T
	next   *holdingNext
	chain  *httpmw.Chain
	client *http.Client
}

// send makes a GET to http://api.test/v1/x and names its answer: its
// status, the rejection's reason, or "error".
func (e *httpReloadEnv) send(hold bool) string {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/v1/x", nil)
	if err != nil {
		panic(err)
	}
	if hold {
		req.Header.Set("Hold", "1")
	}
	resp, err := e.client.Do(req)
	switch {
	case err != nil && httpmw.RejectionReason(err) != "":
		return httpmw.RejectionReason(err)
	case err != nil:
		return "error"
	}
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// start sends a request on a goroutine and waits until it is blocked.
func (e *httpReloadEnv) start(hold bool) <-chan string {
	done := make(chan string, 1)
	go func() { done <- e.send(hold) }()
	synctest.Wait()
	return done
}

func (e *httpReloadEnv) want(what, got, want string) {
	e.t.Helper()
	if got != want {
		e.t.Errorf("%s: %s, want %s", what, got, want)
	}
}

func (e *httpReloadEnv) breaker(key string) *circuitbreaker.Breaker {
	e.t.Helper()
	cb, ok := e.chain.Breaker(key)
	if !ok {
		e.t.Fatalf("no breaker for %s", key)
	}
	return cb
}

// Each key, changed by a reload while a request is in flight, takes effect
// on an HTTP chain as on a gRPC one (TestEachKeyAfterAReload, reload.md):
// requests that start after Reload returns resolve the new settings, a
// request in flight finishes with the policies it started with, but for a
// kept breaker, whose new thresholds and mode reach it. (A host or route
// removed: TestAReloadClosesTheBreakersOfARemovedHostOrRoute.)
func TestEachKeyAfterAReloadHTTP(t *testing.T) {
	const base = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n"
	const host = "hosts:\n  api.test: {}\n"
	tests := []struct {
		name   string
		yaml   string // base is prepended, host appended when it names none
		status int
		run    func(e *httpReloadEnv, reload func(yaml string))
	}{
		{
			name: "circuitBreaker.mode: FORCED_OPEN at Reload, the request admitted before ends as it would",
			yaml: "  circuitBreaker: {}\n", status: 200,
			run: func(e *httpReloadEnv, reload func(string)) {
				held := e.start(true)
				reload("  circuitBreaker: { mode: FORCED_OPEN }\n")
				e.want("the breaker at Reload", e.breaker("api.test").State().String(), "FORCED_OPEN")
				e.want("a new request", e.send(false), "CIRCUIT_OPEN")
				e.next.release <- 200
				e.want("the request in flight", <-held, "200")
			},
		},
		{
			name: "circuitBreaker.minimumNumberOfCalls: a kept breaker's new threshold counts the request in flight",
			yaml: "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }\n", status: 503,
			run: func(e *httpReloadEnv, reload func(string)) {
				e.want("first request", e.send(false), "503")
				held := e.start(true)
				reload("  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }\n")
				e.next.release <- 503
				e.want("the request in flight", <-held, "503")
				e.want("a new request", e.send(false), "CIRCUIT_OPEN")
			},
		},
		{
			name: "circuitBreaker.failureStatusCodes: the request in flight is classified as it started",
			yaml: "hosts:\n  api.test: { circuitBreaker: {} }\n", status: 500,
			run: func(e *httpReloadEnv, reload func(string)) {
				held := e.start(true)
				reload("hosts:\n  api.test: { circuitBreaker: { failureStatusCodes: [502, 503] } }\n")
				e.next.release <- 500
				e.want("the request in flight", <-held, "500")
				e.want("a new request", e.send(false), "500")
				if m := e.breaker("api.test").Metrics(); m.FailedCalls != 1 || m.SuccessfulCalls != 1 {
					e.t.Errorf("the breaker counts %d failures and %d successes: want the request in flight's 500 a failure, the new one's a success", m.FailedCalls, m.SuccessfulCalls)
				}
			},
		},
		{
			name: "circuitBreaker.keyBy: service to method: the host's breaker goes at Reload, the route's comes with its first request",
			yaml: "  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n", status: 503,
			run: func(e *httpReloadEnv, reload func(string)) {
				e.send(false)
				e.send(false)
				e.want("the host's breaker", e.breaker("api.test").State().String(), "OPEN")
				reload("  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, keyBy: method }\n")
				if _, ok := e.chain.Breaker("api.test"); ok {
					e.t.Error("the host's breaker is still the chain's under keyBy: method")
				}
				e.want("a new request", e.send(false), "503")
				e.want("its route's breaker", e.breaker("api.test/_OTHER").State().String(), "CLOSED")
			},
		},
		{
			name: "bulkhead.maxConcurrentCalls shrinks: the new bulkhead starts empty, the old one gets its permits back",
			yaml: "  bulkhead: { maxConcurrentCalls: 1 }\n", status: 200,
			run: func(e *httpReloadEnv, reload func(string)) {
				first := e.start(true)
				old, _ := e.chain.Bulkhead("api.test")
				reload("  bulkhead: { maxConcurrentCalls: 2 }\n")
				second, third := e.start(true), e.start(true)
				e.want("a request past the new limit", e.send(false), "BULKHEAD_FULL")
				for _, h := range []<-chan string{first, second, third} {
					e.next.release <- 200
					e.want("a request in flight", <-h, "200")
				}
				b, _ := e.chain.Bulkhead("api.test")
				if b == old || b.Limit() != 2 || b.Active() != 0 || old.Active() != 0 {
					e.t.Errorf("bulkheads: replaced %v, limit %d, active %d (old %d)", b != old, b.Limit(), b.Active(), old.Active())
				}
			},
		},
		{
			name: "timeout.perAttempt: the request in flight keeps its deadline, new requests take the new one",
			yaml: "  timeout: { perAttempt: 10s, overall: 20s }\n", status: 200,
			run: func(e *httpReloadEnv, reload func(string)) {
				held := e.start(true)
				reload("  timeout: { perAttempt: 1s, overall: 2s }\n")
				time.Sleep(5 * time.Second)
				e.next.release <- 200
				e.want("the request in flight, answered after 5s", <-held, "200")
				late := e.start(true)
				time.Sleep(1500 * time.Millisecond)
				e.want("a new request held 1.5s", <-late, "error")
			},
		},
		{
			name: "rateLimiter: kept while unchanged, a fresh period when limitForPeriod changes",
			yaml: "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n", status: 200,
			run: func(e *httpReloadEnv, reload func(string)) {
				e.want("first request", e.send(false), "200")
				e.want("second request", e.send(false), "RATE_LIMITED")
				reload("  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n  timeout: { perAttempt: 2s }\n")
				e.want("after a reload that kept it", e.send(false), "RATE_LIMITED")
				reload("  rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h }\n")
				e.want("after limitForPeriod: 2", e.send(false), "200")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				withHost := func(yaml string) string {
					if strings.Contains(yaml, "hosts:") {
						return base + yaml
					}
					return base + yaml + host
				}
				chain := newChain(t, withHost(tt.yaml), "")
				next := &holdingNext{release: make(chan int)}
				next.status.Store(int64(tt.status))
				e := &httpReloadEnv{t: t, next: next, chain: chain, client: chain.Client(next)}
				tt.run(e, func(yaml string) {
					t.Helper()
					reloadHTTP(t, chain, withHost(yaml))
				})
			})
		})
	}
}
