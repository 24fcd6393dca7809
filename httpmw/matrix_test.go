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

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
)

// fakeNext is the transport below the chain: it answers each request with
// answer's response (nil: the request context's error, as net/http
// returns it), without a network, so that a row runs in a synctest
// bubble; it counts the requests that reached it.
type fakeNext struct {
	n      atomic.Int64
	answer func(r *http.Request) *http.Response
}

func (f *fakeNext) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	resp := f.answer(r)
	if resp == nil {
		return nil, r.Context().Err()
	}
	resp.Request = r
	return resp, nil
}

// answering answers every request with status and the header pairs.
func answering(status int, header ...string) func(*http.Request) *http.Response {
	return func(*http.Request) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1}
	}
}

type httpMatrixEnv struct {
	path    string // the requests' path: /v1/x unless set
	next    *fakeNext
	chain   *httpmw.Chain
	client  *http.Client
	metrics func() map[string]int64
}

// send makes n requests and counts their answers by status, or by
// "REASON" for a rejection and "error" for another error.
func (e *httpMatrixEnv) send(t *testing.T, ctx context.Context, n int, method string, header ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		path := e.path
		if path == "" {
			path = "/v1/x"
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://api.test"+path, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := e.client.Do(req)
		switch {
		case err != nil && httpmw.RejectionReason(err) != "":
			out[httpmw.RejectionReason(err)]++
		case err != nil:
			out["error"]++
		default:
			_ = resp.Body.Close()
			out[http.StatusText(resp.StatusCode)]++
		}
	}
	return out
}

func (e *httpMatrixEnv) breaker(t *testing.T) *circuitbreaker.Breaker {
	t.Helper()
	cb, ok := e.chain.Breaker("api.test")
	if !ok {
		t.Fatal("no breaker for api.test")
	}
	return cb
}

// The HTTP rows of the sweep: each default on (retries on 502–504, the
// retry throttle, the throttler, Retry-After, the timeouts) against a
// setting that should change or silence it, as docs/http.md says.
func TestEveryDefaultMeetsEverySettingHTTP(t *testing.T) {
	const fast = "  retry: { initialBackoff: 1ms, maxBackoff: 1ms }\n"
	tests := []struct {
		name   string
		yaml   string // hosts: { api.test: {} } is added when it names no host
		answer func(*http.Request) *http.Response
		run    func(t *testing.T, e *httpMatrixEnv)
	}{
		{
			name:   "POST × retries on 503, retry throttle",
			yaml:   "defaults:\n" + fast,
			answer: answering(503),
			run: func(t *testing.T, e *httpMatrixEnv) {
				got := e.send(t, context.Background(), 1, http.MethodPost)
				if got["Service Unavailable"] != 1 || e.next.n.Load() != 1 {
					t.Errorf("POST = %v after %d attempts, want its one 503", got, e.next.n.Load())
				}
				// It still moves the retry throttle, as a gRPC method without
				// retries does; a 404 moves nothing, a 200 gives tokenRatio back.
				if tk := e.chain.Throttle().Tokens(); tk != 9 {
					t.Errorf("tokens = %v after a POST's 503, want 9", tk)
				}
				e.next.answer = answering(404)
				e.send(t, context.Background(), 1, http.MethodGet)
				if tk := e.chain.Throttle().Tokens(); tk != 9 {
					t.Errorf("tokens = %v after a 404, want 9", tk)
				}
				e.next.answer = answering(200)
				e.send(t, context.Background(), 1, http.MethodGet)
				if tk := e.chain.Throttle().Tokens(); tk != 9.1 {
					t.Errorf("tokens = %v after a 200, want 9.1", tk)
				}
			},
		},
		{
			name:   "POST with Idempotency-Key × retries on 503",
			yaml:   "defaults:\n" + fast,
			answer: answering(503),
			run: func(t *testing.T, e *httpMatrixEnv) {
				got := e.send(t, context.Background(), 1, http.MethodPost, "Idempotency-Key", "k1")
				if got["Service Unavailable"] != 1 || e.next.n.Load() != 3 {
					t.Errorf("POST = %v after %d attempts, want the last 503 of 3", got, e.next.n.Load())
				}
			},
		},
		{
			name:   "POST × hedging on a route that does not name POST",
			yaml:   "hosts:\n  api.test:\n    routes:\n      \"/v1/\":\n        retry: { enabled: false }\n        hedging: { hedgingDelay: 10ms }\n",
			answer: answering(503),
			run: func(t *testing.T, e *httpMatrixEnv) {
				got := e.send(t, context.Background(), 1, http.MethodPost, "Idempotency-Key", "k1")
				if got["Service Unavailable"] != 1 || e.next.n.Load() != 1 {
					t.Errorf("POST = %v after %d copies, want one copy", got, e.next.n.Load())
				}
			},
		},
		{
			name:   "METRICS_ONLY breaker × adaptive throttler",
			yaml:   "defaults:\n  circuitBreaker: { mode: METRICS_ONLY }\n  retry: { enabled: false }\n",
			answer: answering(503),
			run: func(t *testing.T, e *httpMatrixEnv) {
				got := e.send(t, context.Background(), 200, http.MethodGet)
				if got["CIRCUIT_OPEN"] != 0 || e.breaker(t).State() != circuitbreaker.StateMetricsOnly {
					t.Errorf("a METRICS_ONLY breaker refused: %v", got)
				}
				if got["THROTTLED"] == 0 {
					t.Errorf("the throttler never engaged beside a METRICS_ONLY breaker: %v", got)
				}
			},
		},
		{
			// overload.md: the throttler's verdict is the breaker's
			// classification, but 429 and 503 are always refusals; a 502 out
			// of failureStatusCodes is an accept.
			name:   "failureStatusCodes without 502, 503 × adaptive throttler",
			yaml:   "hosts:\n  api.test:\n    circuitBreaker: { failureStatusCodes: [500] }\n    retry: { enabled: false }\n",
			answer: answering(502),
			run: func(t *testing.T, e *httpMatrixEnv) {
				if got := e.send(t, context.Background(), 200, http.MethodGet); got["Bad Gateway"] != 200 {
					t.Errorf("GET = %v, want 200 502s, none throttled", got)
				}
				time.Sleep(11 * time.Second) // the bubble's clock: the window (10s) forgets those accepts
				e.next.answer = answering(503)
				if got := e.send(t, context.Background(), 200, http.MethodGet); got["THROTTLED"] == 0 {
					t.Errorf("GET = %v: a 503 must be a refusal whatever the lists", got)
				}
			},
		},
		{
			// configuration.md: keyBy: method keys the breaker, and the
			// throttler with it, by route: one route's 503s throttle it alone.
			name: "keyBy: method × adaptive throttler",
			yaml: "hosts:\n  api.test:\n    circuitBreaker: { keyBy: method, minimumNumberOfCalls: 100 }\n    retry: { enabled: false }\n    routes:\n      \"/a/\": {}\n      \"/b/\": {}\n",
			answer: func(r *http.Request) *http.Response {
				if strings.HasPrefix(r.URL.Path, "/a/") {
					return answering(503)(r)
				}
				return answering(200)(r)
			},
			run: func(t *testing.T, e *httpMatrixEnv) {
				e.path = "/a/x"
				if got := e.send(t, context.Background(), 100, http.MethodGet); got["THROTTLED"] == 0 {
					t.Fatalf("/a/ = %v: its throttler never engaged", got)
				}
				e.path = "/b/x"
				if got := e.send(t, context.Background(), 50, http.MethodGet); got["OK"] != 50 {
					t.Errorf("/b/ = %v: another route's throttler held it back under keyBy: method", got)
				}
			},
		},
		{
			// http.md: Retry-After on a retryable 503 replaces the backoff.
			name:   "Retry-After × retry",
			yaml:   "defaults:\n" + fast + "  timeout: { perAttempt: 1s, overall: 10s }\n",
			answer: answering(503, "Retry-After", "2"),
			run: func(t *testing.T, e *httpMatrixEnv) {
				start := time.Now()
				got := e.send(t, context.Background(), 1, http.MethodGet)
				if took := time.Since(start); got["Service Unavailable"] != 1 || e.next.n.Load() != 3 || took != 4*time.Second {
					t.Errorf("GET = %v after %d attempts in %v, want 3 attempts 2s apart", got, e.next.n.Load(), took)
				}
			},
		},
		{
			// A Retry-After past the overall deadline ends the retries at once.
			name:   "Retry-After × overall timeout",
			yaml:   "defaults:\n" + fast,
			answer: answering(503, "Retry-After", "5"),
			run: func(t *testing.T, e *httpMatrixEnv) {
				start := time.Now()
				got := e.send(t, context.Background(), 1, http.MethodGet)
				if took := time.Since(start); got["Service Unavailable"] != 1 || e.next.n.Load() != 1 || took != 0 {
					t.Errorf("GET = %v after %d attempts in %v, want the 503 at once", got, e.next.n.Load(), took)
				}
			},
		},
		{
			// configuration.md: observe mode never delays or retries.
			name:   "observe × Retry-After and retry",
			yaml:   "defaults:\n  mode: observe\n" + fast,
			answer: answering(503, "Retry-After", "2"),
			run: func(t *testing.T, e *httpMatrixEnv) {
				start := time.Now()
				got := e.send(t, context.Background(), 1, http.MethodGet)
				if took := time.Since(start); got["Service Unavailable"] != 1 || e.next.n.Load() != 1 || took != 0 {
					t.Errorf("GET = %v after %d attempts in %v, want the 503 at once", got, e.next.n.Load(), took)
				}
				if m := e.metrics(); m["meshless.observe.decisions retry retry"] != 1 {
					t.Errorf("the would-be retry was not counted: %v", m)
				}
			},
		},
		{
			// A POST is not retried under enforce, so observe mode counts no
			// would-be retry for it either; a GET's is counted.
			name:   "observe × POST",
			yaml:   "defaults:\n  mode: observe\n" + fast,
			answer: answering(503),
			run: func(t *testing.T, e *httpMatrixEnv) {
				e.send(t, context.Background(), 1, http.MethodPost)
				if m := e.metrics(); m["meshless.observe.decisions retry retry"] != 0 {
					t.Errorf("observe mode counted a would-be retry of a POST: %v", m)
				}
				e.send(t, context.Background(), 1, http.MethodGet)
				if m := e.metrics(); m["meshless.observe.decisions retry retry"] != 1 || e.next.n.Load() != 2 {
					t.Errorf("after a GET: %d requests, %v", e.next.n.Load(), m)
				}
			},
		},
		{
			// http.md: a relayed BULKHEAD_FULL is never retried, its
			// Retry-After not waited, the breaker ignores it; it moves no
			// retry token; a 503 is a refusal for the throttler.
			name:   "server shedding in front × retry, breaker, throttler",
			yaml:   "defaults:\n" + fast,
			answer: answering(503, "Retry-After", "1", "Meshless-Rejection", "BULKHEAD_FULL"),
			run: func(t *testing.T, e *httpMatrixEnv) {
				start := time.Now()
				got := e.send(t, context.Background(), 200, http.MethodGet)
				if took := time.Since(start); took != 0 {
					t.Errorf("200 calls took %v: a relayed rejection's Retry-After was waited", took)
				}
				if int(e.next.n.Load()) != 200-got["THROTTLED"] || got["THROTTLED"] == 0 {
					t.Errorf("%d attempts for %v: want one per call the throttler let through, and some throttled", e.next.n.Load(), got)
				}
				if cb := e.breaker(t); cb.State() != circuitbreaker.StateClosed || cb.Metrics().FailedCalls != 0 {
					t.Errorf("breaker %v with %d failures: it counted the server's shedding", cb.State(), cb.Metrics().FailedCalls)
				}
				if tk := e.chain.Throttle().Tokens(); tk != 10 {
					t.Errorf("retry tokens = %v, want 10", tk)
				}
			},
		},
		{
			// http.md: the caller's deadline is a failure, whatever the lists,
			// and not a meshless timeout; a done context is not retried.
			name: "caller deadline shorter than perAttempt × retry",
			yaml: "defaults:\n" + fast,
			answer: func(r *http.Request) *http.Response {
				<-r.Context().Done()
				return nil // net/http's error: the request's context's
			},
			run: func(t *testing.T, e *httpMatrixEnv) {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				got := e.send(t, ctx, 1, http.MethodGet)
				if e.next.n.Load() != 1 {
					t.Errorf("%d attempts, want 1: the caller's context was done", e.next.n.Load())
				}
				if m := e.breaker(t).Metrics(); m.FailedCalls != 1 {
					t.Errorf("the breaker counted %d failures, want 1 (a timeout is a failure)", m.FailedCalls)
				}
				if got["error"] != 1 {
					t.Errorf("GET = %v, want the context's error", got)
				}
				if m := e.metrics(); m["meshless.timeout.calls attempt timed_out"]+m["meshless.timeout.calls overall timed_out"] != 0 {
					t.Errorf("the caller's own deadline counted as a meshless timeout: %v", m)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				obs, err := otelmw.New(mp)
				if err != nil {
					t.Fatal(err)
				}
				yaml := tt.yaml
				if !strings.Contains(yaml, "hosts:") {
					yaml += "hosts: { api.test: {} }\n"
				}
				cfg, err := httpmw.ParseConfig([]byte(yaml))
				if err != nil {
					t.Fatal(err)
				}
				chain, err := httpmw.New(cfg, httpmw.WithObserver(obs))
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					chain.Close()
					_ = obs.Close()
					_ = mp.Shutdown(context.Background())
				}()
				next := &fakeNext{answer: tt.answer}
				e := &httpMatrixEnv{next: next, chain: chain, client: chain.Client(next), metrics: func() map[string]int64 {
					var rm metricdata.ResourceMetrics
					if err := reader.Collect(context.Background(), &rm); err != nil {
						t.Fatal(err)
					}
					out := map[string]int64{}
					for _, sm := range rm.ScopeMetrics {
						for _, m := range sm.Metrics {
							sum, ok := m.Data.(metricdata.Sum[int64])
							if !ok {
								continue
							}
							for _, dp := range sum.DataPoints {
								key := m.Name
								for _, k := range []string{"meshless.policy.kind", "meshless.observe.action", "meshless.timeout.kind", "meshless.timeout.outcome"} {
									if v, ok := dp.Attributes.Value(attribute.Key(k)); ok {
										key += " " + v.Emit()
									}
								}
								out[key] += dp.Value
							}
						}
					}
					return out
				}}
				tt.run(t, e)
			})
		})
	}
}
