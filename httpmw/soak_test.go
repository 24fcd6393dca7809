package httpmw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// The soak's client configurations: the reloads alternate between them. In
// both, "GET /nf/{id}" has no per-attempt timeout shorter than its overall
// one, so that nothing but a bug sends one of its requests twice.
var soakHTTPClientConfigs = [2]string{`
defaults:
  circuitBreaker: { slidingWindowSize: 20, minimumNumberOfCalls: 10, waitDurationInOpenState: 50ms }
hosts:
  "{{host}}":
    bulkhead: { maxConcurrentCalls: 4, maxWaitDuration: 20ms }
    rateLimiter: { limitForPeriod: 20, limitRefreshPeriod: 20ms, timeoutDuration: 10ms }
    timeout: { perAttempt: 150ms, overall: 400ms }
    retry: { maxAttempts: 3, initialBackoff: 2ms, maxBackoff: 10ms, retryableStatusCodes: [429, 502, 503, 504] }
    routes:
      "GET /hedge/{id}":
        retry: { enabled: false }
        hedging: { maxAttempts: 3, hedgingDelay: 20ms }
      "GET /nf/{id}":
        timeout: { perAttempt: 400ms, overall: 400ms }
`, `
defaults:
  circuitBreaker: { slidingWindowSize: 30, minimumNumberOfCalls: 10, waitDurationInOpenState: 30ms }
hosts:
  "{{host}}":
    bulkhead: { maxConcurrentCalls: 3, maxWaitDuration: 10ms }
    rateLimiter: { limitForPeriod: 15, limitRefreshPeriod: 20ms, timeoutDuration: 10ms }
    timeout: { perAttempt: 120ms, overall: 350ms }
    retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 5ms, retryableStatusCodes: [429, 503] }
    routes:
      "GET /hedge/{id}":
        retry: { enabled: false }
        hedging: { maxAttempts: 2, hedgingDelay: 10ms }
      "GET /nf/{id}":
        timeout: { perAttempt: 350ms, overall: 350ms }
`}

var soakHTTPServerConfigs = [2]string{`
hosts:
  "{{host}}":
    bulkhead: { maxConcurrentCalls: 6 }
    rateLimiter: { limitForPeriod: 60, limitRefreshPeriod: 50ms }
`, `
hosts:
  "{{host}}":
    bulkhead: { maxConcurrentCalls: 4 }
    rateLimiter: { limitForPeriod: 40, limitRefreshPeriod: 50ms }
`}

// soakInvalid returns cfg made invalid (ParseConfig refuses it, so it is
// built in Go): Reload refuses it and the old one stays.
func soakInvalid(cfg *httpmw.Config, host string) *httpmw.Config {
	zero := 0
	retry := *cfg.Hosts[host].Retry
	retry.MaxAttempts = &zero
	cfg.Hosts[host].Retry = &retry
	return cfg
}

// What the soak's handler does, by the request's X-Soak-Do header.
var soakBehaviours = []string{"ok", "ok", "ok", "204", "404", "429", "500", "503", "big503", "panic", "hang", "slow", "cut", "partial"}

// soakArrivals counts, per request id, the requests that reached the
// server (outer: before its load shedding; inner: the handler).
type soakArrivals struct {
	mu           sync.Mutex
	outer, inner map[int64]int
}

func (a *soakArrivals) add(m map[int64]int, id int64) {
	a.mu.Lock()
	m[id]++
	a.mu.Unlock()
}

func (a *soakArrivals) get(m map[int64]int, id int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return m[id]
}

// soakPayload is the body request id sends.
func soakPayload(id int64) []byte {
	return bytes.Repeat([]byte("payload-"+strconv.FormatInt(id, 10)+";"), 20)
}

// soakPanicKey marks, in a request's context, the attempt on which the
// RoundTripper below the chain panics.
type soakPanicKey struct{}

type soakPanic struct {
	at    int32
	calls atomic.Int32
}

func soakGetOrHead() string {
	if rand.IntN(5) == 0 {
		return http.MethodHead
	}
	return http.MethodGet
}

// soakRecord is what a caller saw of one request, checked once every
// server arrival is counted.
type soakRecord struct {
	id      int64
	method  string
	path    string // "retry", "hedge", "nf", "post", "put"
	key     bool   // the request carried an Idempotency-Key
	status  int    // 0: no response
	err     error
	relayed bool // the response was a meshless server's rejection
}

// TestSoak mixes, for a bounded time under -race, what an unlucky
// production does at once to an HTTP client and server — statuses of every
// kind, Retry-After, handlers that panic, hang, write slowly, cut the
// connection mid-body or read half the request, callers that cancel, read
// part of a body or leave it open, a RoundTripper below the chain that
// panics, configurations reloaded (and refused) on both sides — and then
// checks only invariants: every bulkhead is back to zero in flight, every
// response has a body, a rejection is the documented one, a 404 and a POST
// without Idempotency-Key reach the server at most once, a replayed body
// arrives whole (goleak, in TestMain, checks the goroutines).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	var (
		arrivals = &soakArrivals{outer: map[int64]int{}, inner: map[int64]int{}}
		stop     = make(chan struct{})
		problems = make(chan string, 100)
	)
	fail := func(format string, args ...any) {
		select {
		case problems <- fmt.Sprintf(format, args...):
		default:
		}
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.Header.Get("X-Soak-Id"), 10, 64)
		arrivals.add(arrivals.inner, id)
		switch r.Header.Get("X-Soak-Do") {
		case "ok":
			if r.Body != nil && r.ContentLength != 0 {
				b, err := io.ReadAll(r.Body)
				if err == nil && !bytes.Equal(b, soakPayload(id)) {
					fail("request %d: the server read a body of %d bytes that is not the one sent (%d bytes)", id, len(b), len(soakPayload(id)))
				}
			}
			io.WriteString(w, "ok") //nolint:errcheck
		case "204":
			w.WriteHeader(http.StatusNoContent)
		case "404":
			http.NotFound(w, r)
		case "429":
			w.Header().Set("Retry-After", strconv.Itoa(rand.IntN(2)))
			w.WriteHeader(http.StatusTooManyRequests)
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
		case "503":
			if rand.IntN(2) == 0 {
				w.Header().Set("Retry-After", "0")
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		case "big503":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(bytes.Repeat([]byte("x"), 6<<10)) //nolint:errcheck
		case "panic":
			panic("soak: a handler's panic")
		case "hang":
			select {
			case <-r.Context().Done():
			case <-stop:
			case <-time.After(time.Second):
			}
		case "slow":
			w.WriteHeader(http.StatusOK)
			for range 5 {
				if _, err := io.WriteString(w, "slowly.."); err != nil {
					return
				}
				http.NewResponseController(w).Flush() //nolint:errcheck
				time.Sleep(3 * time.Millisecond)
			}
		case "cut":
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "cut here..")       //nolint:errcheck
			http.NewResponseController(w).Flush() //nolint:errcheck
			panic(http.ErrAbortHandler)           // net/http closes the connection
		case "partial":
			if r.Body != nil {
				io.ReadFull(r.Body, make([]byte, 3)) //nolint:errcheck
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})

	srv := httptest.NewUnstartedServer(nil)
	host := srv.Listener.Addr().String()
	srvCfg := func(i int) *httpmw.Config {
		cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(soakHTTPServerConfigs[i], "{{host}}", host)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	shed, err := httpmw.NewServer(srvCfg(0))
	if err != nil {
		t.Fatal(err)
	}
	inner := shed.Handler(handler)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.Header.Get("X-Soak-Id"), 10, 64)
		arrivals.add(arrivals.outer, id)
		inner.ServeHTTP(w, r)
	})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handlers' panics
	srv.Start()

	cliCfg := func(yaml string) *httpmw.Config {
		cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(yaml, "{{host}}", host)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	chain, err := httpmw.New(cliCfg(soakHTTPClientConfigs[0]))
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	panicky := rtFunc(func(r *http.Request) (*http.Response, error) {
		if p, ok := r.Context().Value(soakPanicKey{}).(*soakPanic); ok && p.calls.Add(1) == p.at {
			panic("soak: a RoundTripper's panic")
		}
		return tr.RoundTrip(r)
	})
	client := &http.Client{Transport: chain.RoundTripper(panicky)}

	var (
		nextID                                  atomic.Int64
		responses, localRejections, relayedRejs atomic.Int64
		clientPanics, cancels, otherErrs        atomic.Int64
		recMu                                   sync.Mutex
		records                                 []soakRecord
		openMu                                  sync.Mutex
		open                                    []io.Closer // bodies left open until the end
		wg                                      sync.WaitGroup
		reasonsMu                               sync.Mutex
		reasons                                 = map[string]int{}
	)
	one := func() {
		id := nextID.Add(1)
		rec := soakRecord{id: id}
		var body []byte
		switch rand.IntN(6) {
		case 0, 1:
			rec.method, rec.path = soakGetOrHead(), "retry"
		case 2:
			rec.method, rec.path = soakGetOrHead(), "hedge"
		case 3:
			rec.method, rec.path = http.MethodGet, "nf"
		case 4:
			rec.method, rec.path, body = http.MethodPost, "post", soakPayload(id)
		default:
			rec.method, rec.path, body = http.MethodPut, "put", soakPayload(id)
		}
		do := soakBehaviours[rand.IntN(len(soakBehaviours))]
		if rec.path == "nf" {
			do = "404"
		}
		// A context that never ends (a response left unreleased would hold
		// its connection for ever: goleak sees it), or one that ends with
		// the call, or at random before.
		ctx := context.Background()
		if rand.IntN(4) > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			if rand.IntN(6) == 0 {
				cancels.Add(1)
				timer := time.AfterFunc(time.Duration(rand.IntN(40))*time.Millisecond, cancel)
				defer timer.Stop()
			}
		}
		if rand.IntN(30) == 0 { // the RoundTripper below panics on this request's first or second attempt
			ctx = context.WithValue(ctx, soakPanicKey{}, &soakPanic{at: 1 + rand.Int32N(2)})
		}
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, rec.method, srv.URL+"/"+rec.path+"/"+strconv.FormatInt(id, 10), rd)
		if err != nil {
			fail("request %d: %v", id, err)
			return
		}
		req.Header.Set("X-Soak-Id", strconv.FormatInt(id, 10))
		req.Header.Set("X-Soak-Do", do)
		if rec.method == http.MethodPost && rand.IntN(2) == 0 {
			req.Header.Set("Idempotency-Key", strconv.FormatInt(id, 10))
			rec.key = true
		}
		var resp *http.Response
		if p := func() (p any) {
			defer func() { p = recover() }()
			resp, err = client.Do(req)
			return nil
		}(); p != nil {
			if p != "soak: a RoundTripper's panic" {
				fail("request %d: an unexpected panic went on up: %v", id, p)
			}
			clientPanics.Add(1)
			rec.err = fmt.Errorf("panic: %v", p)
			recMu.Lock()
			records = append(records, rec)
			recMu.Unlock()
			return
		}
		rec.err = err
		switch {
		case err != nil:
			if resp != nil {
				fail("request %d: a response and an error (%v)", id, err)
			}
			checkSoakError(id, err, fail)
			if r := httpmw.RejectionReason(err); r != "" {
				localRejections.Add(1)
				reasonsMu.Lock()
				reasons[r]++
				reasonsMu.Unlock()
				time.Sleep(2 * time.Millisecond) // a polite caller backs off
			} else {
				otherErrs.Add(1)
			}
		case resp == nil || resp.Body == nil:
			fail("request %d: no error and no response body (%v)", id, resp)
		default:
			responses.Add(1)
			rec.status = resp.StatusCode
			reason := resp.Header.Get(httpmw.ReasonHeader)
			rec.relayed = reason != ""
			if rec.relayed {
				relayedRejs.Add(1)
			}
			switch mode := rand.IntN(6); mode {
			case 0, 1: // read it whole, close it
				b, rerr := io.ReadAll(resp.Body)
				if rerr == nil && rec.relayed {
					checkSoakRejection(id, resp, b, rec.method == http.MethodHead, fail)
				}
				resp.Body.Close()
			case 2: // read it whole, never close it (EOF gives the connection back)
				io.ReadAll(resp.Body) //nolint:errcheck
			case 3: // read a part, close it
				io.ReadFull(resp.Body, make([]byte, 5)) //nolint:errcheck
				resp.Body.Close()
			case 4: // close it unread
				resp.Body.Close()
			default: // leave it open, unread, until the end
				openMu.Lock()
				open = append(open, resp.Body)
				openMu.Unlock()
			}
		}
		recMu.Lock()
		records = append(records, rec)
		recMu.Unlock()
	}
	for range 8 {
		wg.Go(func() {
			for range 5000 { // bounded; stop ends it sooner
				select {
				case <-stop:
					return
				default:
				}
				one()
			}
		})
	}
	// Reloads of both sides, valid and invalid, while the workers run.
	// Every bulkhead either side used, the ones reloads replaced included.
	bulkheads := map[*bulkhead.Bulkhead]string{}
	keep := func() {
		if bh, ok := chain.Bulkhead(host); ok {
			bulkheads[bh] = "client"
		}
		if bh, ok := shed.Bulkhead(host); ok {
			bulkheads[bh] = "server"
		}
	}
	for round := range 40 {
		time.Sleep(50 * time.Millisecond) // load runs meanwhile; nothing waits for a state here
		keep()
		if round%5 == 4 {
			if err := chain.Reload(soakInvalid(cliCfg(soakHTTPClientConfigs[0]), host)); err == nil {
				t.Error("the client's Reload took an invalid configuration")
			}
			if err := shed.Reload(soakInvalid(cliCfg(soakHTTPClientConfigs[1]), host)); err == nil {
				t.Error("the server's Reload took an invalid configuration")
			}
			continue
		}
		if err := chain.Reload(cliCfg(soakHTTPClientConfigs[round%2])); err != nil {
			t.Fatal(err)
		}
		if err := shed.Reload(srvCfg((round / 2) % 2)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for _, b := range open {
		b.Close()
	}
	srv.Close() // waits for the handlers
	tr.CloseIdleConnections()

	t.Logf("%d requests: %d responses (%d relayed rejections), %d local rejections, %d other errors, %d RoundTripper panics, %d cancels",
		nextID.Load(), responses.Load(), relayedRejs.Load(), localRejections.Load(), otherErrs.Load(), clientPanics.Load(), cancels.Load())
	t.Logf("local rejections: %v", reasons)
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	if responses.Load() == 0 {
		t.Error("the soak got no response: it did not exercise what it claims")
	}
	// Every bulkhead is back to zero in flight.
	keep()
	sides := map[string]bool{}
	for bh, side := range bulkheads {
		sides[side] = true
		if n := bh.Active(); n != 0 {
			t.Errorf("a %s bulkhead (limit %d) holds %d permits after the soak, want 0", side, bh.Limit(), n)
		}
	}
	if !sides["client"] || !sides["server"] {
		t.Errorf("bulkheads seen: %v; want the client's and the server's", sides)
	}
	chain.Close()
	shed.Close()

	// What reached the server, request by request.
	for _, rec := range records {
		outer, in := arrivals.get(arrivals.outer, rec.id), arrivals.get(arrivals.inner, rec.id)
		switch {
		case rec.path == "nf" && outer > 1:
			t.Errorf("request %d (%s /nf/, answered 404 or rejected): reached the server %d times, want at most 1 (got %d, %v)",
				rec.id, rec.method, outer, rec.status, rec.err)
		case rec.method == http.MethodPost && !rec.key && outer > 1:
			t.Errorf("request %d (POST without Idempotency-Key): reached the server %d times, want at most 1 (got %d, %v)",
				rec.id, outer, rec.status, rec.err)
		case in > outer:
			t.Errorf("request %d: the handler saw it %d times, the server %d", rec.id, in, outer)
		}
		if rec.method == http.MethodPost && !rec.key && rec.err != nil && !strings.HasPrefix(rec.err.Error(), "panic") &&
			httpmw.RejectionReason(rec.err) == "" && !errors.Is(rec.err, httpmw.ErrNotReplayable) {
			t.Errorf("request %d (POST without Idempotency-Key on a retrying route) failed with %v, which does not match ErrNotReplayable", rec.id, rec.err)
		}
	}
}

// checkSoakError checks a call's error: a local rejection matches its
// policy's sentinel.
func checkSoakError(id int64, err error, fail func(string, ...any)) {
	sentinels := map[string]error{
		resilience.ReasonCircuitOpen:  circuitbreaker.ErrOpen,
		resilience.ReasonBulkheadFull: bulkhead.ErrFull,
		resilience.ReasonRateLimited:  ratelimiter.ErrLimited,
		resilience.ReasonThrottled:    throttler.ErrThrottled,
	}
	reason := httpmw.RejectionReason(err)
	if reason == "" {
		for r, s := range sentinels {
			if errors.Is(err, s) {
				fail("request %d: %v matches the sentinel of %s but names no reason", id, err, r)
			}
		}
		return
	}
	if s, ok := sentinels[reason]; !ok || !errors.Is(err, s) {
		fail("request %d: a local rejection %s whose error (%v) does not match its sentinel", id, reason, err)
	}
}

// checkSoakRejection checks a meshless server's rejection as docs/http.md
// ("Rejections on the wire") writes it.
func checkSoakRejection(id int64, resp *http.Response, body []byte, head bool, fail func(string, ...any)) {
	reason := resp.Header.Get(httpmw.ReasonHeader)
	want := map[string]int{resilience.ReasonBulkheadFull: http.StatusServiceUnavailable, resilience.ReasonRateLimited: http.StatusTooManyRequests}[reason]
	if want == 0 || resp.StatusCode != want {
		fail("request %d: a server rejection %q with status %d", id, reason, resp.StatusCode)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "1" {
		fail("request %d: a server rejection %s with Retry-After %q, want 1", id, reason, ra)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		fail("request %d: a server rejection %s with Content-Type %q", id, reason, ct)
	}
	if head {
		if len(body) != 0 {
			fail("request %d: a server rejection %s of a HEAD request with a body %q", id, reason, body)
		}
		return
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Type != httpmw.ProblemType || p.Status != resp.StatusCode ||
		p.Reason != reason || p.Title != http.StatusText(resp.StatusCode) || p.Detail == "" {
		fail("request %d: a server rejection %s with the body %q (%v)", id, reason, body, err)
	}
}
