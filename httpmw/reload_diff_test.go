package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/difftest"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// diffNext is the transport below the chains of TestAReloadedChainBehavesAsOneBuiltFresh:
// a request answers the status its header S names, after the delay its
// header D names (or its context's end). It counts the attempts.
type diffNext struct{ n atomic.Int64 }

func (d *diffNext) RoundTrip(r *http.Request) (*http.Response, error) {
	d.n.Add(1)
	if ms, _ := strconv.Atoi(r.Header.Get("D")); ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	status, _ := strconv.Atoi(r.Header.Get("S"))
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1, Request: r}, nil
}

// diffCall is one request (or burst of requests) of a script: its host and path, the status the
// backend answers and after how long, and the time the script waits
// before it.
type diffCall struct {
	host, path    string
	status, delay int // delay in ms
	burst         int // requests sent at once, when more than 1
	gap           time.Duration
}

// A diffSection is one variation of one host's section: yaml is the host's
// entry, keep what must be equal for its state to carry over a reload
// (docs/reload.md), stateless a section that keeps nothing between calls.
// A lazy section's policy is replaced at its key's next call: a reload to
// B and back to A with no call between keeps it.
type diffSection struct {
	yaml, keep string
	stateless  bool
	lazy       bool // replaced at the key's next call, not at Reload
}

// diffHosts are the hosts of the generated configurations, each varying
// one section.
type diffHost struct {
	host     string
	variants []diffSection
}

var diffHosts = []diffHost{
	{"cb.test", []diffSection{
		// keep: the window, the mode and keyBy (a threshold change keeps the breaker).
		{yaml: "circuitBreaker: { enabled: true, slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 20s }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureRateThreshold: 40, waitDurationInOpenState: 20s }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 3, waitDurationInOpenState: 5s, permittedNumberOfCallsInHalfOpenState: 1 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 6, minimumNumberOfCalls: 3, waitDurationInOpenState: 20s }", keep: "c6"},
		{yaml: "", keep: "none"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, mode: FORCED_OPEN }", keep: "c4 forced"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, keyBy: method, waitDurationInOpenState: 20s }", keep: "c4 method"},
		{yaml: "circuitBreaker: { slidingWindowType: TIME_BASED, slidingWindowSize: 10, minimumNumberOfCalls: 3 }", keep: "t10"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureStatusCodes: [500] }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowType: TIME_BASED, slidingWindowSize: 10, minimumNumberOfCalls: 2, failureRateThreshold: 30, waitDurationInOpenState: 3s }", keep: "t10"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, slowCallDurationThreshold: 1s, slowCallRateThreshold: 50 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureStatusCodes: [500, 502], ignoredStatusCodes: [503] }\n    retry: { maxAttempts: 3, initialBackoff: 2s }", keep: "c4"},
	}},
	{"rt.test", []diffSection{
		{yaml: "retry: { maxAttempts: 3, initialBackoff: 100ms }", stateless: true},
		{yaml: "retry: { maxAttempts: 2, initialBackoff: 1s }", stateless: true},
		{yaml: "hedging: { maxAttempts: 2, hedgingDelay: 500ms }", stateless: true},
		{yaml: "retry: { maxAttempts: 3, initialBackoff: 100ms }\n    routes: { \"GET /r\": { retry: { enabled: false } } }", stateless: true},
		{yaml: "timeout: { perAttempt: 1s }\n    retry: { maxAttempts: 2, initialBackoff: 200ms }", stateless: true},
		{yaml: "mode: observe\n    hedging: { maxAttempts: 3, hedgingDelay: 700ms }\n    timeout: { perAttempt: 2s }", stateless: true},
	}},
	{"to.test", []diffSection{
		{yaml: "timeout: { perAttempt: 1s }", stateless: true},
		{yaml: "timeout: { perAttempt: 3s, overall: 5s }", stateless: true},
		{yaml: "timeout: { overall: 1500ms }\n    routes: { \"GET /r\": { timeout: { overall: 10s } } }", stateless: true},
	}},
	{"bh.test", []diffSection{
		{yaml: "bulkhead: { maxConcurrentCalls: 1 }", keep: "1", lazy: true},
		{yaml: "bulkhead: { maxConcurrentCalls: 5 }", keep: "5", lazy: true},
		{yaml: "", keep: "none", lazy: true},
		{yaml: "bulkhead: { adaptive: { initialLimit: 4, maxLimit: 10 } }", keep: "a", lazy: true},
		{yaml: "bulkhead: { maxConcurrentCalls: 2, maxWaitDuration: 500ms }", keep: "2w", lazy: true},
		{yaml: "mode: observe\n    bulkhead: { maxConcurrentCalls: 1 }", keep: "1o", lazy: true},
	}},
	{"rl.test", []diffSection{
		{yaml: "rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 1h }", keep: "3/1h", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 5, limitRefreshPeriod: 1h }", keep: "5/1h", lazy: true},
		{yaml: "", keep: "none", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 10s }", keep: "3/10s", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 5s, timeoutDuration: 3s }", keep: "2/5s", lazy: true},
	}},
	{"ob.test", []diffSection{
		// The breaker is kept across a change of mode: its state carries.
		{yaml: "mode: observe\n    circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }", keep: "c4"},
	}},
}

const diffBase = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n  circuitBreaker: { enabled: false }\n" +
	"retryThrottling: { maxTokens: 1000, tokenRatio: 1 }\nhosts:\n"

// diffYAML is the configuration that gives host i its variant pick[i].
func diffYAML(hosts []diffHost, pick []int) string {
	var b strings.Builder
	b.WriteString(diffBase)
	for i, h := range hosts {
		if y := h.variants[pick[i]].yaml; y != "" { // "": the host is not in the YAML
			fmt.Fprintf(&b, "  %s:\n    %s\n", h.host, y)
		}
	}
	return b.String()
}

func diffScript(r *rand.Rand, hosts []diffHost, n int) []diffCall {
	statuses := []int{200, 200, 404, 500, 503, 503}
	delays := []int{0, 0, 0, 1201, 2503}
	gaps := []time.Duration{0, 0, 100 * time.Millisecond, time.Second, 6 * time.Second, 25 * time.Second}
	paths := []string{"/", "/r"}
	s := make([]diffCall, n)
	for i := range s {
		s[i] = diffCall{host: hosts[r.IntN(len(hosts))].host, path: paths[r.IntN(2)],
			status: statuses[r.IntN(len(statuses))], delay: delays[r.IntN(len(delays))], gap: gaps[r.IntN(len(gaps))]}
		if r.IntN(4) == 0 {
			s[i].burst, s[i].delay = 2+r.IntN(5), 301+r.IntN(3)*1000
		}
		// A timer and a call due at the same instant of the bubble run in
		// no fixed order (a breaker's open wait ending as a call comes):
		// a jitter of a few microseconds keeps every script clear of it.
		s[i].gap += time.Duration(1+r.IntN(1e6)) * time.Nanosecond
	}
	return s
}

// diffChain is a chain under test with its transport below.
type diffChain struct {
	chain  *httpmw.Chain
	srv    *httpmw.Server // in chain's place, with h its handler
	h      http.Handler
	next   *diffNext
	client *http.Client
	obs    *resiliencetest.Observer
	// released names the sources whose gauges were released.
	released *releases
}

// releases counts the gauges an observer was told to release.
type releases struct {
	mu    sync.Mutex
	names []string
}

func (r *releases) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.names
	r.names = nil
	return n
}

type releasingRecorder struct {
	resilience.Recorder
	r    *releases
	name string
}

func (rr releasingRecorder) Release() {
	rr.r.mu.Lock()
	defer rr.r.mu.Unlock()
	rr.r.names = append(rr.r.names, rr.name)
}

func newDiffChain(t *testing.T, yaml string, server bool) *diffChain {
	t.Helper()
	next, obs, rel := &diffNext{}, &resiliencetest.Observer{}, &releases{}
	o := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return releasingRecorder{Recorder: obs.Attach(src), r: rel, name: src.Kind.String() + " " + src.Name}
	})
	if server {
		srv := newServer(t, yaml, httpmw.WithServerObserver(o))
		h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resp, err := next.RoundTrip(r)
			if err != nil {
				w.WriteHeader(499)
				return
			}
			w.WriteHeader(resp.StatusCode)
		}))
		return &diffChain{srv: srv, h: h, next: next, obs: obs, released: rel}
	}
	c := newChain(t, yaml, "", httpmw.WithObserver(o))
	return &diffChain{chain: c, next: next, client: c.Client(next), obs: obs, released: rel}
}

// reload gives the chain (or server) cfg.
func (d *diffChain) reload(cfg *httpmw.Config) error {
	if d.srv != nil {
		return d.srv.Reload(cfg)
	}
	return d.chain.Reload(cfg)
}

// do sends req through the chain, or the server's handler.
func (d *diffChain) do(req *http.Request) (*http.Response, error) {
	if d.srv == nil {
		return d.client.Do(req)
	}
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, req)
	resp := rec.Result()
	if reason := resp.Header.Get("Meshless-Rejection"); reason != "" {
		return nil, errors.New("rejected " + reason)
	}
	return resp, nil
}

// events returns, sorted, the events the observer received since the
// last call (but those of the hosts in skip), and forgets them.
func (d *diffChain) events(skip map[string]bool) []string { return difftest.Events(d.obs, skip) }

// play sends c and describes its answer: result, attempts, time taken.
func (d *diffChain) play(c diffCall) string {
	// A burst: c.burst requests at once, each held c.delay (never 0: a
	// request that blocks on nothing would end before the next starts, in
	// an order the bubble does not fix).
	return difftest.Burst(c.burst, func() string { return d.one(c) })
}

// one sends c's request and describes its answer.
func (d *diffChain) one(c diffCall) string {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+c.host+c.path, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("S", strconv.Itoa(c.status))
	req.Header.Set("D", strconv.Itoa(c.delay))
	before, start := d.next.n.Load(), time.Now()
	resp, err := d.do(req)
	res := ""
	switch {
	case err != nil && httpmw.RejectionReason(err) != "":
		res = httpmw.RejectionReason(err)
	case errors.Is(err, context.DeadlineExceeded):
		res = "deadline"
	case err != nil:
		res = "error " + err.Error()
	default:
		_ = resp.Body.Close()
		res = strconv.Itoa(resp.StatusCode)
	}
	took := time.Since(start)
	if c.burst > 1 {
		return fmt.Sprintf("%s %s: %s in %v", c.host, c.path, res, took) // the attempts of a burst run together
	}
	return fmt.Sprintf("%s %s: %s after %d attempts in %v", c.host, c.path, res, d.next.n.Load()-before, took)
}

// playBoth plays c into x and y at the same moment.
func playBoth(x, y *diffChain, c diffCall) (gx, gy string) {
	done := make(chan struct{})
	go func() { defer close(done); gy = y.play(c) }()
	gx = x.play(c)
	<-done
	return gx, gy
}

// state describes the breakers, bulkheads and rate limiters of the keys
// of host h.
func (d *diffChain) state(h string) string {
	var b strings.Builder
	for _, k := range []string{h, h + "/GET /r", h + "/_OTHER"} {
		if d.srv != nil {
			if bh, ok := d.srv.Bulkhead(k); ok && bh.Active() > 0 {
				fmt.Fprintf(&b, "[%s bulkhead limit %d active %d]", k, bh.Limit(), bh.Active())
			}
			continue
		}
		if cb, ok := d.chain.Breaker(k); ok {
			m := cb.Metrics()
			fmt.Fprintf(&b, "[%s breaker %v calls %d failed %d slow %d refused %d]", k, m.State, m.Calls, m.FailedCalls, m.SlowCalls, m.NotPermittedCalls)
		}
		if bh, ok := d.chain.Bulkhead(k); ok && bh.Active() > 0 {
			fmt.Fprintf(&b, "[%s bulkhead limit %d active %d]", k, bh.Limit(), bh.Active())
		}
	}
	return b.String()
}

// A chain reloaded from configuration A to B behaves as a chain built
// fresh from B, but for the state docs/reload.md says a reload carries
// over: a breaker whose window, mode and keyBy did not change keeps its
// state and counts, a bulkhead or rate limiter whose settings did not
// change is kept. Each host of the generated configurations varies one
// section; the fresh chain plays the script the reloaded one played
// before its reload into exactly the hosts whose state carries over. Then
// both play the same script and must answer every call alike: result,
// attempts, time taken on the bubble's clock, and the breakers' and
// bulkheads' metrics. The retry throttle is kept out of it (its bucket is
// too large to matter): TestReloadAppliesNewThrottleSettings covers it.
func TestAReloadedChainBehavesAsOneBuiltFresh(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 16
	}
	reloadDiff(t, diffHosts, false, seeds)
}

// The same for a server, whose requests pass a bulkhead and a rate
// limiter only.
func TestAReloadedServerBehavesAsOneBuiltFresh(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 16
	}
	reloadDiff(t, []diffHost{diffHosts[3], diffHosts[4]}, true, seeds)
}

func reloadDiff(t *testing.T, diffHosts []diffHost, server bool, seeds int) {
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		a, b := make([]int, len(diffHosts)), make([]int, len(diffHosts))
		for i, h := range diffHosts {
			a[i], b[i] = r.IntN(len(h.variants)), r.IntN(len(h.variants))
			if r.IntN(3) == 0 {
				b[i] = a[i] // about a third of the sections unchanged
			}
		}
		if seed%8 == 0 {
			copy(b, a) // a reload with the same configuration changes nothing
		}
		back := seed%5 == 1 // Reload(B) then Reload(A): as if A had stayed
		// An invalid B (a host written in upper case) is refused, and
		// leaves X as it was: as if B were A.
		invalid := seed%7 == 3 && !back
		if invalid {
			copy(b, a)
		}
		pre, post := diffScript(r, diffHosts, 14), diffScript(r, diffHosts, 18)
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				final := b
				if back {
					final = a
				}
				x, y := newDiffChain(t, diffYAML(diffHosts, a), server), newDiffChain(t, diffYAML(diffHosts, final), server)
				kept := map[string]bool{}
				for i, h := range diffHosts {
					va, vb := h.variants[a[i]], h.variants[b[i]]
					// (a host B removes has its policies closed or
					// dropped at Reload, lazy or not)
					kept[h.host] = !back && va.keep == vb.keep && !va.stateless ||
						back && !va.stateless && (va.lazy && vb.yaml != "" || va.keep == vb.keep)
				}
				// Y plays the script into the hosts whose state carries
				// over, at the same moments as X.
				for _, c := range pre {
					time.Sleep(c.gap)
					if kept[c.host] {
						playBoth(x, y, c)
					} else {
						x.play(c)
					}
				}
				if invalid {
					bad, err := httpmw.ParseConfig([]byte(diffYAML(diffHosts, a)))
					if err != nil {
						t.Fatal(err)
					}
					if bad.Hosts == nil {
						bad.Hosts = map[string]*config.Host{}
					}
					bad.Hosts["Upper.Case"] = &config.Host{} // as a program may build it
					if err := x.reload(bad); err == nil || !strings.Contains(err.Error(), `hosts."Upper.Case"`) {
						t.Fatalf("Reload of an invalid configuration: %v, want an error naming hosts.\"Upper.Case\"", err)
					}
				} else {
					reloadDiffYAML(t, x, diffYAML(diffHosts, b))
				}
				if back {
					reloadDiffYAML(t, x, diffYAML(diffHosts, a))
				}
				// A reload that changes nothing (the same configuration,
				// or one refused) releases no gauge: no series starts
				// again.
				if gone := x.released.take(); slices.Equal(a, b) && !back && len(gone) > 0 {
					t.Errorf("a reload that changed nothing released the gauges of %q", gone)
				}
				skip := map[string]bool{}
				for i, h := range diffHosts {
					va, vb := h.variants[a[i]], h.variants[final[i]]
					// A kept breaker's thresholds may have changed: it
					// holds what A's made of the script, which B's may
					// not have. Only when they agree can the rest be
					// compared.
					if kept[h.host] && (va.yaml != vb.yaml || back && va.yaml != h.variants[b[i]].yaml) {
						// (a running open wait keeps its length, too)
						if sx := x.state(h.host); sx != y.state(h.host) || strings.Contains(sx, "OPEN") {
							skip[h.host] = true
						}
					}
				}
				x.events(nil)
				y.events(nil)
				for i, h := range diffHosts {
					if kept[h.host] && !skip[h.host] {
						if gx, gy := x.state(h.host), y.state(h.host); gx != gy {
							t.Errorf("before the script, %s (variants %d → %d): reloaded %s, fresh %s", h.host, a[i], b[i], gx, gy)
						}
					}
				}
				for n, c := range post {
					time.Sleep(c.gap)
					gx, gy := playBoth(x, y, c)
					if ex, ey := x.events(skip), y.events(skip); !slices.Equal(ex, ey) {
						t.Errorf("call %d (%s): the events differ:\nreloaded %q\nfresh    %q", n, gx, ex, ey)
					}
					if skip[c.host] {
						continue
					}
					if gx != gy {
						t.Errorf("call %d: reloaded %s, fresh %s\nA:\n%s\nB:\n%s", n, gx, gy, diffYAML(diffHosts, a), diffYAML(diffHosts, b))
					}
					if sx, sy := x.state(c.host), y.state(c.host); sx != sy {
						t.Errorf("after call %d: reloaded %s, fresh %s", n, sx, sy)
					}
				}
			})
		})
	}
}

func reloadDiffYAML(t *testing.T, d *diffChain, yaml string) {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.reload(cfg); err != nil {
		t.Fatal(err)
	}
}
