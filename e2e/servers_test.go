package e2e

// TestServersAgree is the server side's differential test: grpcmw.NewServer
// and httpmw.NewServer are two adapters on one engine, configured from one
// YAML, and on a server only the bulkhead (fixed or adaptive) and the rate
// limiter run (docs/grpc-server.md, docs/http.md). One script of concurrent
// arrivals — calls their handlers hold for scripted times, then answer OK,
// a business error or a failure, or panic, or ignore their context; callers
// that give up mid-call — is served by each server in its own
// testing/synctest bubble, and compared call by call (what the caller got,
// whether the handler ran, how many times the call reached the server) and
// at the end (the servers' metric counts and gauges, the bulkhead's limit
// and calls in flight). A rejection either server makes must reach its
// caller marked with its reason, and a meshless client one hop up must never
// send it again.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// sAnswer is what a handler does once it has held its call.
type sAnswer uint8

const (
	sOK             sAnswer = iota
	sNotFound               // NOT_FOUND / 404: a business answer
	sFailure                // INTERNAL / 500
	sPanic                  // the handler panics
	sIgnoresContext         // the handler holds for its whole time, whatever its context, then answers OK
	sEnded                  // (the handler's context ended while it held the call)
)

var sAnswerNames = []string{"ok", "not_found", "failure", "panic", "ignores_ctx", "ended"}

func (a sAnswer) String() string { return sAnswerNames[a] }

// arrival is one call of a server script.
type arrival struct {
	at     time.Duration // when it is sent, since the start
	hold   time.Duration // how long its handler holds it
	answer sAnswer
	cancel time.Duration // when not 0: the caller gives up that long after sending it
	// deadline, when not 0, is the caller's deadline, that long after
	// sending it.
	deadline time.Duration
}

func (a arrival) String() string {
	s := fmt.Sprintf("at %v, held %v, %v", a.at, a.hold, a.answer)
	if a.cancel != 0 {
		s += fmt.Sprintf(", cancelled after %v", a.cancel)
	}
	if a.deadline != 0 {
		s += fmt.Sprintf(", deadline %v", a.deadline)
	}
	return s
}

// serverScript is a script and the servers' configuration.
type serverScript struct {
	yml       string
	arrivals  []arrival
	reloadAt  time.Duration // when reloadYML is set: when the servers reload it
	reloadYML string
}

// serverYML is the servers' one configuration: the same sections for the
// gRPC service and for the HTTP host (the defaults' sections would apply to
// both too).
const serverYML = `
defaults:
  adaptiveThrottling: { enabled: false }
services:
  grpc.testing.TestService:
    bulkhead: { maxConcurrentCalls: 3, maxWaitDuration: 150ms }
    rateLimiter: { limitForPeriod: 8, limitRefreshPeriod: 1s, timeoutDuration: 0s }
hosts:
  backend.test:
    bulkhead: { maxConcurrentCalls: 3, maxWaitDuration: 150ms }
    rateLimiter: { limitForPeriod: 8, limitRefreshPeriod: 1s, timeoutDuration: 0s }
`

// clientYML is the meshless client's one hop up: its own gates out of the
// way (no bulkhead, rate limiter, throttler or timeout; a breaker that
// never decides within a script), and retries that list the codes the
// servers' rejections are sent with, which it must never retry all the
// same (docs/concepts.md). A handler's failure (INTERNAL / 500) is not
// retried by these lists.
const clientYML = `
defaults:
  adaptiveThrottling: { enabled: false }
  bulkhead: { enabled: false }
  timeout: { enabled: false }
  circuitBreaker: { slidingWindowSize: 1000, minimumNumberOfCalls: 1000, slowCallDurationThreshold: 60s }
  retry: { maxAttempts: 3, initialBackoff: 100ms, maxBackoff: 400ms, jitter: 0 }
services:
  grpc.testing.TestService:
    retry: { retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
hosts:
  backend.test:
    retry: { retryableStatusCodes: [503, 429] }
`

// attrKey names a data point by the attributes that are not the
// transport's own.
func attrKey(attrs []attribute.KeyValue) string {
	var kv []string
	for _, a := range attrs {
		if !transportAttrs[a.Key] {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// generateArrivals is a script of n arrivals drawn from seed: bursts that
// fill the bulkhead and spend the rate limiter's period, and lulls. Arrival
// i is sent i+1 µs past a whole millisecond, its handler holds it a whole
// number of milliseconds and 500 µs plus 7(i+1) ns, its caller gives up a
// whole number of milliseconds and 700 µs plus 11(i+1) ns after sending it,
// or its deadline is 800 µs plus 13(i+1) ns past a whole millisecond: no
// two of these instants, and none with the configuration's
// whole-millisecond waits, are likely to fall together, so that both
// bubbles see the events in the one order (the rate limiter's waiters of
// one period come out at one instant: see serverLimiterWaitsYML). Panics
// are left out for a meshless client: net/http's answer to one is a
// broken connection, which an HTTP client retries (docs/http.md) and a
// gRPC client does not.
func generateArrivals(seed uint64, n int, panics bool) []arrival {
	r := rand.New(rand.NewPCG(seed, 0x5e7e))
	out := make([]arrival, n)
	ms := 0
	for i := range out {
		switch r.IntN(10) {
		case 0:
			ms += 300 + r.IntN(1500) // a lull: the queue drains, the period refreshes
		case 1, 2, 3:
			ms += r.IntN(3) // a burst
		default:
			ms += r.IntN(120)
		}
		a := arrival{at: time.Duration(ms)*time.Millisecond + time.Duration(i+1)*time.Microsecond}
		a.hold = time.Duration(r.IntN(400))*time.Millisecond + 500*time.Microsecond + time.Duration(7*(i+1))
		pool := []sAnswer{sOK, sOK, sOK, sOK, sNotFound, sFailure, sIgnoresContext, sPanic}
		if !panics {
			pool = pool[:len(pool)-1]
		}
		a.answer = pool[r.IntN(len(pool))]
		switch r.IntN(6) {
		case 0:
			a.cancel = time.Duration(r.IntN(500))*time.Millisecond + 700*time.Microsecond + time.Duration(11*(i+1))
		case 1: // past the rate limiter's timeoutDuration (120ms): see TestAServerRateLimiterSeesTheCallersDeadlineOverGRPCOnly
			a.deadline = time.Duration(121+r.IntN(500))*time.Millisecond + 800*time.Microsecond + time.Duration(13*(i+1))
		}
		out[i] = a
	}
	return out
}

// compareServers plays sc against both servers and reports every
// difference, and every call that broke a rule both must keep.
func compareServers(t *testing.T, sc serverScript, meshless bool) (g, h serverRun) {
	t.Helper()
	g, h = playServerGRPC(t, sc, meshless), playServerHTTP(t, sc, meshless)
	checkServerRun(t, "gRPC", sc, g, meshless)
	checkServerRun(t, "HTTP", sc, h, meshless)
	diffs := 0
	for i, a := range sc.arrivals {
		if g.classes[i] != h.classes[i] || g.ran[i] != h.ran[i] || g.arrivals[i] != h.arrivals[i] {
			if diffs++; diffs <= 10 {
				t.Errorf("call %d (%v):\n\tgRPC %s, handler ran %v, reached the server %d times\n\tHTTP %s, handler ran %v, reached the server %d times",
					i, a, g.classes[i], g.ran[i], g.arrivals[i], h.classes[i], h.ran[i], h.arrivals[i])
			}
		}
	}
	if diffs > 10 {
		t.Errorf("… %d calls differ in all", diffs)
	}
	for _, k := range union(g.metrics, h.metrics) {
		if g.metrics[k] != h.metrics[k] {
			t.Errorf("server %s: gRPC %d, HTTP %d", k, g.metrics[k], h.metrics[k])
		}
	}
	for _, k := range union(g.gauges, h.gauges) {
		if g.gauges[k] != h.gauges[k] {
			t.Errorf("server gauge %s at the end: gRPC %d, HTTP %d", k, g.gauges[k], h.gauges[k])
		}
	}
	for _, k := range union(g.client, h.client) {
		if g.client[k] != h.client[k] {
			t.Errorf("client %s: gRPC %d, HTTP %d", k, g.client[k], h.client[k])
		}
	}
	if g.state != h.state {
		t.Errorf("bulkhead at the end: gRPC %s, HTTP %s", g.state, h.state)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("gRPC bulkhead %s; server metrics:\n%s\ngauges:\n%s\nclient metrics:\n%s", g.state, dump(g.metrics), dump(g.gauges), dump(g.client))
	}
	return g, h
}

// checkServerRun holds one server's run to the documentation, whatever
// the other did: every call reached the server once (a meshless client
// sends none again, a rejection least of all); a call its caller did not
// give up on got its handler's answer, unchanged, when the handler ran,
// and a rejection marked with its reason when it did not; nothing is left
// in flight.
func checkServerRun(t *testing.T, name string, sc serverScript, r serverRun, meshless bool) {
	t.Helper()
	bad := 0
	for i, a := range sc.arrivals {
		c := r.classes[i]
		want := map[sAnswer]string{sOK: "ok", sIgnoresContext: "ok", sNotFound: "business:NOT_FOUND",
			sFailure: "failure:INTERNAL", sPanic: "panicked"}[a.answer]
		var why string
		switch {
		case r.arrivals[i] != 1:
			why = fmt.Sprintf("reached the server %d times", r.arrivals[i])
		case c == "cancelled" && a.cancel != 0:
		case c == "failure:DEADLINE_EXCEEDED" && a.deadline != 0:
		case r.ran[i] && c != want:
			why = "its handler ran and answered " + want
		case !r.ran[i] && c != "relayed:BULKHEAD_FULL" && c != "relayed:RATE_LIMITED":
			why = "its handler did not run, and it got no rejection"
		}
		if why != "" {
			if bad++; bad <= 10 {
				t.Errorf("%s: call %d (%v): %s: %s", name, i, a, c, why)
			}
		}
	}
	if !strings.HasSuffix(r.state, "active 0") {
		t.Errorf("%s: bulkhead at the end: %s, want none active", name, r.state)
	}
	if meshless {
		// The client's breaker ignores a relayed BULKHEAD_FULL or RATE_LIMITED
		// (a busy service is not a broken one), and its retry policy
		// counts each call once, never retried.
		var relayed int64
		for _, c := range r.classes {
			if strings.HasPrefix(c, "relayed:") {
				relayed++
			}
		}
		var ignored int64
		for k, v := range r.client {
			if strings.HasPrefix(k, "meshless.circuit_breaker.calls{") && strings.Contains(k, "outcome=ignored") {
				ignored += v
			}
		}
		if ignored < relayed {
			t.Errorf("%s: the client's breaker ignored %d calls, yet %d were relayed rejections", name, ignored, relayed)
		}
	}
}

// The server configurations the scripts are played under.
var (
	serverNoWaitYML = strings.ReplaceAll(serverYML, "maxWaitDuration: 150ms", "maxWaitDuration: 0s")
	// serverLimiterWaitsYML lets calls wait for the rate limiter's next
	// period, with room for them all in the bulkhead: the waiters of one
	// period come out of the limiter at its one instant, and a bulkhead
	// with fewer places would admit those it had room for in whatever order
	// the scheduler picks.
	serverLimiterWaitsYML = strings.NewReplacer("maxConcurrentCalls: 3, maxWaitDuration: 150ms", "maxConcurrentCalls: 60",
		"timeoutDuration: 0s", "timeoutDuration: 120ms").Replace(serverYML)
	serverAdaptiveYML = strings.ReplaceAll(serverYML, "maxConcurrentCalls: 3,",
		"adaptive: { minLimit: 1, maxLimit: 6, initialLimit: 3 },")
	serverObserveYML = strings.Replace(serverYML, "defaults:\n", "defaults:\n  mode: observe\n", 1)
	serverWiderYML   = strings.NewReplacer("maxConcurrentCalls: 3", "maxConcurrentCalls: 5",
		"limitForPeriod: 8", "limitForPeriod: 12").Replace(serverYML)
)

func TestServersAgree(t *testing.T) {
	for _, v := range []struct {
		name, yml, reload string
	}{
		{"fixed bulkhead, waits", serverYML, ""},
		{"fixed bulkhead, no waits", serverNoWaitYML, ""},
		{"the rate limiter waits", serverLimiterWaitsYML, ""},
		{"adaptive bulkhead", serverAdaptiveYML, ""},
		{"observe mode", serverObserveYML, ""},
		{"reload to a wider limit", serverYML, serverWiderYML},
		{"reload to adaptive", serverYML, serverAdaptiveYML},
		{"reload to observe", serverYML, serverObserveYML},
		{"reload from observe", serverObserveYML, serverNoWaitYML},
	} {
		for _, seed := range []uint64{1, 2, 3} {
			for _, meshless := range []bool{false, true} {
				name := fmt.Sprintf("%s/seed %d/meshless client %v", v.name, seed, meshless)
				t.Run(name, func(t *testing.T) {
					arr := generateArrivals(seed, 120, !meshless)
					sc := serverScript{yml: v.yml, arrivals: arr, reloadYML: v.reload}
					if v.reload != "" { // between two arrivals, on no other event's instant
						sc.reloadAt = arr[len(arr)/2-1].at + 333
					}
					g, _ := compareServers(t, sc, meshless)
					if v.yml == serverObserveYML && v.reload == "" {
						// Observe mode sheds nothing: it reports what it would have shed.
						if i := slices.IndexFunc(g.classes, func(c string) bool { return strings.HasPrefix(c, "relayed:") }); i >= 0 {
							t.Errorf("observe mode: call %d (%v) got %s", i, arr[i], g.classes[i])
						}
						if g.metrics["meshless.observe.decisions{meshless.observe.action=reject,meshless.policy.kind=bulkhead}"] == 0 {
							t.Errorf("observe mode reported no call it would have shed")
						}
					}
					if !slices.ContainsFunc(g.classes, func(c string) bool { return strings.HasPrefix(c, "relayed:") }) &&
						!strings.Contains(v.yml, "observe") {
						t.Errorf("no call was shed: the script does not test shedding")
					}
				})
			}
		}
	}
}

// The two servers' rate limiters differ on a caller's deadline shorter than
// their timeoutDuration (docs/http.md, server section): a gRPC call carries
// its caller's deadline to the server (grpc-timeout), and HTTP has none on
// the wire, so a rate limiter that may wait refuses a gRPC call at once,
// RATE_LIMITED, when no permit comes free before its deadline
// (docs/ratelimiter.md), and holds the HTTP request, its permit reserved,
// until its client's own timeout ends it. The handler runs for neither.
// (The generated scripts give their calls deadlines longer than the
// timeoutDuration, where the two agree.) Here: one call per 200ms, a wait
// of up to 500ms, and a call sent while the permit is spent, with a
// deadline of 100ms.
func TestAServerRateLimiterSeesTheCallersDeadlineOverGRPCOnly(t *testing.T) {
	const yml = `
services:
  grpc.testing.TestService:
    rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 200ms, timeoutDuration: 500ms }
hosts:
  backend.test:
    rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 200ms, timeoutDuration: 500ms }
`
	sc := serverScript{yml: yml, arrivals: []arrival{
		{at: time.Microsecond, hold: 10*time.Millisecond + 500*time.Microsecond},
		{at: 2*time.Millisecond + 2*time.Microsecond, hold: 10*time.Millisecond + 500*time.Microsecond, deadline: 100*time.Millisecond + 800*time.Microsecond},
	}}
	g, h := playServerGRPC(t, sc, false), playServerHTTP(t, sc, false)
	if g.classes[1] != "relayed:RATE_LIMITED" || g.ran[1] {
		t.Errorf("gRPC: %s (handler ran %v), want RATE_LIMITED at once: no permit before the caller's deadline", g.classes[1], g.ran[1])
	}
	if h.classes[1] != "failure:DEADLINE_EXCEEDED" || h.ran[1] {
		t.Errorf("HTTP: %s (handler ran %v), want the client's own timeout: the server waits, blind to it", h.classes[1], h.ran[1])
	}
}
