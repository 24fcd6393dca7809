package bench

// The conformance table of docs/http.md, behaviour by behaviour: httpmw,
// failsafe-go's failsafehttp and hashicorp/go-retryablehttp, each on a
// retrying setup (three attempts), against the same kind of local server.
// Each test asserts what each library does, so that a row of the table
// that stops being true fails here.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/meshless/meshless/internal/memnet"
)

// peer is one library's client around a transport.
type peer struct {
	name string
	wrap func(tb testing.TB, host string, next http.RoundTripper) http.RoundTripper
}

var peers = []peer{
	{"meshless", func(tb testing.TB, host string, next http.RoundTripper) http.RoundTripper {
		return newHTTPChain(tb, `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { minimumNumberOfCalls: 100 }
  retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 10ms }
  timeout: { perAttempt: 10s, overall: 30s }
`).RoundTripper(next)
	}},
	{"failsafehttp", func(tb testing.TB, _ string, next http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(next, failsafehttp.NewRetryPolicyBuilder().Build())
	}},
	{"retryablehttp", func(tb testing.TB, _ string, next http.RoundTripper) http.RoundTripper {
		c := retryablehttp.NewClient()
		c.Logger = nil
		c.RetryMax = 2
		c.RetryWaitMin, c.RetryWaitMax = 10*time.Millisecond, 10*time.Millisecond
		c.HTTPClient = &http.Client{Transport: next}
		return &retryablehttp.RoundTripper{Client: c}
	}},
}

// conformanceServer serves handler on loopback TCP, counting the requests
// and the connections it accepted.
type conformanceServer struct {
	*httptest.Server
	requests, conns atomic.Int64
}

func newConformanceServer(tb testing.TB, handler func(n int64, w http.ResponseWriter, r *http.Request)) *conformanceServer {
	s := &conformanceServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(s.requests.Add(1), w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

// client returns p's client for s, with a transport of its own. Make each
// request with the test's context: a response body a client leaks (never
// closed) keeps its connection and the transport's goroutines busy until
// the request's context ends.
func (s *conformanceServer) client(tb testing.TB, p peer) *http.Client {
	return &http.Client{Transport: p.wrap(tb, strings.TrimPrefix(s.URL, "http://"), newTransport(tb))}
}

// failThen answers 503 to the first n requests, then 200.
func failThen(n int64) func(int64, http.ResponseWriter, *http.Request) {
	return func(i int64, w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		if i <= n {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok") //nolint:errcheck
	}
}

// send does req and returns the status (0 on error) and the error.
func send(client *http.Client, req *http.Request) (int, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Idempotency: a POST that got a 503 is retried by the peers, never by
// httpmw (RFC 9110: POST is not idempotent) unless it carries an
// Idempotency-Key.
func TestConformanceIdempotency(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  bool
		want map[string]int64
	}{
		{"POST", false, map[string]int64{"meshless": 1, "failsafehttp": 2, "retryablehttp": 2}},
		{"POST with an Idempotency-Key", true, map[string]int64{"meshless": 2, "failsafehttp": 2, "retryablehttp": 2}},
	} {
		for _, p := range peers {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				s := newConformanceServer(t, failThen(1))
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/orders", strings.NewReader(`{"item":1}`))
				if tc.key {
					req.Header.Set("Idempotency-Key", "order-1")
				}
				send(s.client(t, p), req) //nolint:errcheck // the requests tell
				if got := s.requests.Load(); got != tc.want[p.name] {
					t.Errorf("%d requests, want %d", got, tc.want[p.name])
				}
			})
		}
	}
}

// Body replay: a streamed body (no GetBody) is sent once by httpmw and the
// call not retried; the peers read the whole body into memory before the
// first attempt, and send it again.
func TestConformanceStreamedBody(t *testing.T) {
	want := map[string]int64{"meshless": 1, "failsafehttp": 2, "retryablehttp": 2}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			s := newConformanceServer(t, func(i int64, w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				failThen(1)(i, w, r)
			})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, s.URL+"/upload", nil)
			req.Body = io.NopCloser(strings.NewReader("a stream")) // no GetBody
			send(s.client(t, p), req)                              //nolint:errcheck
			if got := s.requests.Load(); got != want[p.name] {
				t.Errorf("%d requests, want %d", got, want[p.name])
			}
			for i, b := range bodies {
				if b != "a stream" {
					t.Errorf("request %d carried %q, want the whole body", i+1, b)
				}
			}
		})
	}
}

// Retry-After: seconds are honoured by all three on a 503; an HTTP-date by
// httpmw and go-retryablehttp, not by failsafehttp (it reads only
// seconds, and retries at once). In a synctest bubble, over memnet: the
// waits are the bubble's time, exact whatever the machine's load.
func TestConformanceRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   func() string
		waits   map[string]bool // the retry waited at least minWait
		minWait time.Duration
	}{
		{"seconds", func() string { return "1" }, map[string]bool{"meshless": true, "failsafehttp": true, "retryablehttp": true}, 900 * time.Millisecond},
		{"an HTTP-date", func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) },
			map[string]bool{"meshless": true, "failsafehttp": false, "retryablehttp": true}, 1500 * time.Millisecond},
	} {
		for _, p := range peers {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var first, second time.Time
					client := bubbleServer(t, p, func(i int64, w http.ResponseWriter, r *http.Request) {
						if i == 1 {
							first = time.Now()
							w.Header().Set("Retry-After", tc.value())
							w.WriteHeader(http.StatusServiceUnavailable)
							return
						}
						second = time.Now() // one request at a time
					})
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://mem/forecast", nil)
					if status, err := send(client, req); err != nil || status != 200 {
						t.Fatalf("%d, %v", status, err)
					}
					// A wait the server asked for takes at least that long; one
					// ignored is the client's own 10ms (or none).
					if waited := second.Sub(first) >= tc.minWait; waited != tc.waits[p.name] {
						t.Errorf("waited %v between attempts; honoured the header: %v, want %v", second.Sub(first), waited, tc.waits[p.name])
					}
				})
			})
		}
	}
}

// bubbleServer serves handler (given the request's number, from 1) over
// memnet, for a test inside a synctest bubble (loopback TCP's waits are not
// durable there), and returns p's client for it: request http://mem/....
// Its cleanup, in the bubble, closes the transport's idle connections and
// the server, and waits for Serve to return.
func bubbleServer(tb testing.TB, p peer, handler func(n int64, w http.ResponseWriter, r *http.Request)) *http.Client {
	var requests atomic.Int64
	lis := memnet.Listen() // not bufconn: see package memnet
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(requests.Add(1), w, r)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
	tb.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return &http.Client{Transport: p.wrap(tb, "mem", tr)}
}

// 501 Not Implemented is not retried by any of the three.
func TestConformance501(t *testing.T) {
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := newConformanceServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNotImplemented)
			})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/x", nil)
			if status, err := send(s.client(t, p), req); err != nil || status != 501 || s.requests.Load() != 1 {
				t.Errorf("%d, %v after %d requests; want the 501 after one", status, err, s.requests.Load())
			}
		})
	}
}

// Retries spent: httpmw returns the last 503 response; the peers return an
// error and no response (failsafehttp's error holds the last response,
// whose body is never closed).
func TestConformanceRetriesSpent(t *testing.T) {
	want := map[string]int{"meshless": 503, "failsafehttp": 0, "retryablehttp": 0}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := newConformanceServer(t, failThen(100))
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/x", nil)
			status, err := send(s.client(t, p), req)
			if status != want[p.name] || (status == 0) != (err != nil) || s.requests.Load() != 3 {
				t.Errorf("%d, %v after %d requests; want %d after 3", status, err, s.requests.Load(), want[p.name])
			}
		})
	}
}

// Connection reuse: ten GETs, each retried once after a small 503. httpmw
// and go-retryablehttp read the failed attempt's body and reuse its
// connection (one connection in all); failsafehttp never closes it, so
// each retry opens a new connection and the old one stays open.
func TestConformanceConnectionReuse(t *testing.T) {
	want := map[string]int64{"meshless": 1, "failsafehttp": 11, "retryablehttp": 1}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			var n atomic.Int64
			s := newConformanceServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				if n.Add(1)%2 == 1 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok") //nolint:errcheck
			})
			client := s.client(t, p)
			for range 10 {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/forecast", nil)
				if status, err := send(client, req); err != nil || status != 200 {
					t.Fatalf("%d, %v", status, err)
				}
			}
			if got := s.conns.Load(); got != want[p.name] {
				t.Errorf("%d connections for 10 calls retried once each, want %d", got, want[p.name])
			}
		})
	}
}

// 429 Too Many Requests: the peers retry it by default; httpmw does not
// (the server asks its clients to slow down) unless a route lists 429 in
// retryableStatusCodes, and then waits its Retry-After.
func TestConformance429(t *testing.T) {
	want := map[string]int64{"meshless": 1, "failsafehttp": 2, "retryablehttp": 2}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			s := newConformanceServer(t, func(i int64, w http.ResponseWriter, _ *http.Request) {
				if i == 1 {
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/x", nil)
			send(s.client(t, p), req) //nolint:errcheck // the requests tell
			if got := s.requests.Load(); got != want[p.name] {
				t.Errorf("%d requests, want %d", got, want[p.name])
			}
		})
	}
}
