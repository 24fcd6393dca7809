package e2e

// TestTransportsAgree is a differential test of the two transports: grpcmw
// and httpmw are two adapters on one engine, configured from one YAML, and
// the product promises that the same YAML behaves the same over gRPC and
// HTTP (docs/http.md, docs/concepts.md). One script of backend answers is
// served over gRPC and over HTTP, played through each client in its own
// testing/synctest bubble (so both see the same time), and compared call by
// call — what the caller got, how many attempts the backend saw — and at the
// end — the breaker's transitions with their times, its state, and the
// metric counts by outcome.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// diffYAML is the one configuration both clients read. The differences it
// writes between services (gRPC) and hosts (HTTP) are the ones the
// documentation gives each transport:
//
//   - Code lists are per transport: "The defaults section's code lists are
//     gRPC's: they never apply to HTTP" (docs/configuration.md, hosts
//     (HTTP)). The lists below name the same answers in each transport's
//     codes: UNAVAILABLE ↔ 502 and 503, DEADLINE_EXCEEDED ↔ 504 (and a
//     timeout), RESOURCE_EXHAUSTED ↔ 429. INTERNAL, UNKNOWN and DATA_LOSS
//     are all 500, listed nowhere: failures, not retried.
//   - "Whatever the lists say, a transport error … and a timeout are
//     failures, and — for a request that may be sent again — retried"
//     (docs/configuration.md, hosts (HTTP); docs/http.md, Classification),
//     while a gRPC attempt's timeout is DEADLINE_EXCEEDED, retried only when
//     retryableStatusCodes lists it (docs/concepts.md, What counts as a
//     failure). So gRPC lists DEADLINE_EXCEEDED here; TestATimedOutAttempt
//     keeps the default lists and encodes the difference.
//
// The adaptive throttler is off: it sheds at random (a draw per call), so
// two runs cannot be compared call by call; jitter is 0 for the same reason.
const diffYAML = `
retryThrottling: { maxTokens: 10, tokenRatio: 1 }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker:
    slidingWindowSize: 8
    minimumNumberOfCalls: 4
    failureRateThreshold: 50
    waitDurationInOpenState: 5s
    maxWaitDurationInOpenState: 20s
    permittedNumberOfCallsInHalfOpenState: 2
    slowCallDurationThreshold: 500ms
    slowCallRateThreshold: 75
  retry: { maxAttempts: 3, initialBackoff: 100ms, maxBackoff: 400ms, jitter: 0 }
  timeout: { perAttempt: 1s, overall: 4s }
  rateLimiter: { limitForPeriod: 8, limitRefreshPeriod: 1s }
services:
  grpc.testing.TestService:
    retry: { retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED] }
hosts:
  backend.test:
    retry: { retryableStatusCodes: [502, 503, 504, 429] }
`

// compare plays steps through both transports and reports every
// difference.
func compare(t *testing.T, yml string, steps []step) {
	t.Helper()
	compareWith(t, yml, steps, true)
}

// compareWith is compare, holding each run to checkRun when oracle is set.
func compareWith(t *testing.T, yml string, steps []step, oracle bool) {
	t.Helper()
	compareSetup(t, setup{yml: yml}, steps, oracle)
}

// compareSetup is compareWith with a setup.
func compareSetup(t *testing.T, su setup, steps []step, oracle bool) {
	t.Helper()
	g := playGRPCWith(t, su, steps)
	h := playHTTPWith(t, su, steps)
	if oracle {
		observe := strings.Contains(su.yml, "mode: observe")
		checkRun(t, "gRPC", steps, g, observe)
		checkRun(t, "HTTP", steps, h, observe)
	}
	// A hedged call's copies run at once: those that lose end together,
	// cancelled, and the breaker hears them in whatever order their
	// goroutines run; a call's outcomes are compared as a set then.
	hedged := strings.Contains(su.yml, "hedging:")
	diffs := 0
	for i := range steps {
		if i >= len(g.classes) || i >= len(h.classes) {
			break
		}
		if g.classes[i] != h.classes[i] || g.attempts[i] != h.attempts[i] || g.tokens[i] != h.tokens[i] ||
			!sameOutcomes(g.outcomes[i], h.outcomes[i], hedged) {
			diffs++
			if diffs <= 10 {
				t.Errorf("call %d (%v):\n\tgRPC %s after %d attempts, breaker [%s], retry tokens %v\n\tHTTP %s after %d attempts, breaker [%s], retry tokens %v",
					i, steps[i], g.classes[i], g.attempts[i], g.outcomes[i], g.tokens[i],
					h.classes[i], h.attempts[i], h.outcomes[i], h.tokens[i])
			}
		}
	}
	if diffs > 10 {
		t.Errorf("… %d calls differ in all", diffs)
	}
	if !slices.Equal(g.transitions, h.transitions) {
		t.Errorf("breaker transitions differ:\ngRPC %v\nHTTP %v", g.transitions, h.transitions)
	}
	if g.state != h.state {
		t.Errorf("breaker's state at the end: gRPC %s, HTTP %s", g.state, h.state)
	}
	for _, k := range union(g.metrics, h.metrics) {
		if g.metrics[k] != h.metrics[k] {
			t.Errorf("%s: gRPC %d, HTTP %d", k, g.metrics[k], h.metrics[k])
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("gRPC transitions %v; metrics:\n%s", g.transitions, dump(g.metrics))
	}
}

// checkRun holds one transport's run to the documentation, whatever the
// other did (two transports wrong the same way agree): only a retryable
// answer is followed by another attempt — a business answer, INTERNAL/500
// and a relayed rejection never are (docs/concepts.md, What counts as a
// failure) —; a call ends with its last attempt's answer, unchanged, or
// with the caller's deadline cutting a hung attempt, or with a rejection
// of our own, made instead of an attempt. In observe mode no timeout cuts
// an attempt: a late answer reaches the caller.
func checkRun(t *testing.T, name string, steps []step, r run, observe bool) {
	t.Helper()
	bad := 0
	for i, s := range steps {
		if i >= len(r.classes) {
			break
		}
		k, c := r.attempts[i], r.classes[i]
		answer := func(j int) answer { return s.answers[min(j, len(s.answers)-1)] }
		var why string
		for j := range max(k-1, 0) {
			if !answer(j).retryable() {
				why = fmt.Sprintf("attempt %d's answer, %v, was retried", j+1, answer(j))
			}
		}
		switch {
		case why != "":
		case k > 3:
			why = "more attempts than maxAttempts (3)"
		case strings.HasPrefix(c, "rejected:"):
			if k > 0 && !answer(k-1).retryable() {
				why = fmt.Sprintf("a rejection replaced attempt %d's final answer, %v", k, answer(k-1))
			}
		case k == 0 && s.deadline == 0 && s.cancel == 0:
			why = "no attempt, yet no rejection"
		case s.deadline < 0 || s.cancel < 0:
			// Not attempted, the context's own error (docs/concepts.md, What counts as a failure).
			if want := map[bool]string{true: "cancelled", false: "failure:DEADLINE_EXCEEDED"}[s.cancel < 0]; k != 0 || c != want {
				why = "a call whose context had ended before it began: want " + want + ", not attempted"
			}
		case c == "cancelled" && s.cancel != 0:
		case c == "failure:DEADLINE_EXCEEDED" && s.deadline != 0:
		case c == "ok" && observe && answer(k-1) == aLate:
		case c == "failure:DEADLINE_EXCEEDED":
			if a := answer(k - 1); a != aHang && a != aLate && a != aGatewayTimeout {
				why = fmt.Sprintf("a timeout, yet attempt %d's answer was %v", k, answer(k-1))
			}
		case c != answer(k-1).class():
			why = fmt.Sprintf("attempt %d's answer was %v (%s)", k, answer(k-1), answer(k-1).class())
		}
		if why == "" && !observe {
			why = checkOutcomes(s, k, c, r.outcomes[i])
		}
		if why != "" {
			if bad++; bad <= 10 {
				t.Errorf("%s: call %d (%v): %s after %d attempts: %s", name, i, s, c, k, why)
			}
		}
	}
}

// outcome is what the breaker counts an attempt that got a as
// (docs/concepts.md, What counts as a failure; docs/http.md,
// Classification): a relayed CIRCUIT_OPEN says the backend cannot serve,
// a relayed BULKHEAD_FULL or RATE_LIMITED says nothing of its health.
func (a answer) outcome() string {
	switch a {
	case aOK, aSlow, aNotFound, aInvalid, aUnimplemented, aPushback, aPushbackLong, aPushbackNow, aExhausted:
		return "success"
	case aRelayedFull, aRelayedLimit, aCancelled:
		return "ignored"
	}
	return "failure"
}

// checkOutcomes holds the breaker's outcomes of a call's k attempts to
// what each attempt's answer counts as; the last one is left out when the
// caller's own deadline or cancel may have cut it. Rejections are no
// attempts: the breaker's own ("rejected"), and the one a gate after it
// made ("ignored", the call's last).
func checkOutcomes(s step, k int, class, outcomes string) string {
	var got []string
	for _, o := range strings.Fields(outcomes) {
		if o != "rejected" {
			got = append(got, strings.TrimSuffix(o, "(slow)"))
		}
	}
	if strings.HasPrefix(class, "rejected:") && class != "rejected:CIRCUIT_OPEN" && len(got) > 0 {
		got = got[:len(got)-1]
	}
	if len(got) != k {
		return fmt.Sprintf("the breaker heard %d attempts [%s]", len(got), outcomes)
	}
	if s.deadline != 0 || s.cancel != 0 {
		k--
	}
	for j := range max(k, 0) {
		if a := s.answers[min(j, len(s.answers)-1)]; got[j] != a.outcome() {
			return fmt.Sprintf("attempt %d's answer, %v, counted as %s, not %s", j+1, a, got[j], a.outcome())
		}
	}
	return ""
}

func union(a, b map[string]int64) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func dump(m map[string]int64) string {
	var b strings.Builder
	for _, k := range union(m, nil) {
		fmt.Fprintf(&b, "  %s = %d\n", k, m[k])
	}
	return b.String()
}

// calls is n calls with no gap that each get the answers as.
func calls(n int, as ...answer) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{answers: as}
	}
	return out
}

// then returns steps with a gap before the first.
func after(gap time.Duration, steps []step) []step {
	steps[0].gap = gap
	return steps
}

func script(parts ...[]step) []step { return slices.Concat(parts...) }

// The table: each answer alone, then the breaker's life: opened by
// failures, half-open after its wait, closed or opened again by its probes.
var diffTable = []struct {
	name  string
	steps []step
}{
	{"each answer", script( // successes between the failures keep the breaker closed
		calls(1, aOK), calls(1, aNotFound), calls(1, aInvalid), calls(1, aUnavailable, aOK),
		calls(1, aInternal), calls(3, aOK), calls(1, aHang, aOK), calls(1, aPushback, aOK),
		after(time.Second, calls(1, aRelayedOpen)), calls(3, aOK), calls(1, aRelayedFull), calls(1, aRelayedLimit),
		calls(1, aPushback, aPushback, aNotFound), calls(1, aUnavailable, aHang, aOK), calls(4, aOK),
		calls(1, aPushbackLong, aOK), calls(1, aUnavailableWait, aOK), calls(1, aUnavailableWait, aPushbackLong),
		calls(1, aHang, aHang, aHang))},
	{"retries end at a wait past the deadline", calls(2, aPushback, aPushbackLong, aOK)},
	{"business answers never open the breaker", calls(20, aNotFound, aInvalid)},
	{"501 is a business answer", script(calls(10, aUnimplemented), calls(1, aOK))},
	{"retries exhausted", calls(3, aUnavailable)},
	{"open, half-open, close", script(
		calls(4, aInternal), calls(2, aOK), // the window opens at 4 failures of 4; then rejected
		after(5*time.Second+time.Microsecond, calls(3, aOK)), calls(2, aOK))},
	{"open, half-open, open again, longer wait", script(
		calls(4, aInternal),
		after(5*time.Second+time.Microsecond, calls(2, aInternal)), calls(1, aOK),
		after(5*time.Second+time.Microsecond, calls(1, aOK)), // still open: the wait doubled
		after(5*time.Second+time.Microsecond, calls(3, aOK)))},
	{"an open breaker ends a retry loop", script(
		calls(3, aInternal), calls(1, aUnavailable))},
	{"hangs open the breaker", script(calls(3, aHang), calls(2, aOK))},
	{"relayed rejections", script(
		calls(4, aRelayedOpen), calls(1, aOK),
		after(6*time.Second, calls(4, aRelayedFull)), calls(4, aRelayedLimit), calls(1, aOK))},
	{"retry throttling", calls(8, aUnavailable, aUnavailable, aOK)},
	{"slow calls open the breaker", script(calls(4, aSlow), calls(1, aOK))},
	{"the caller's deadline", script(
		[]step{{deadline: 1500*time.Millisecond + 3*time.Microsecond, answers: []answer{aHang, aHang}}},
		[]step{{deadline: 1050*time.Millisecond + 3*time.Microsecond, answers: []answer{aUnavailable, aOK}}},
		[]step{{deadline: 500*time.Millisecond + 3*time.Microsecond, answers: []answer{aPushback, aOK}}},
		[]step{{deadline: 300*time.Millisecond + 3*time.Microsecond, answers: []answer{aHang}}},
		calls(4, aOK))},
	{"the caller gives up", script(
		[]step{{cancel: 1500*time.Millisecond + 3*time.Microsecond, answers: []answer{aHang, aHang}}},
		[]step{{cancel: 50*time.Millisecond + 3*time.Microsecond, answers: []answer{aUnavailable, aOK}}},
		[]step{{cancel: 500*time.Millisecond + 3*time.Microsecond, answers: []answer{aPushback, aOK}}},
		[]step{{cancel: 300*time.Millisecond + 3*time.Microsecond, answers: []answer{aHang}}},
		calls(4, aOK))},
	{"dead on arrival", script( // the engine answers these before any policy: nothing counted
		[]step{{deadline: -time.Second, answers: []answer{aInternal}}}, []step{{cancel: -1, answers: []answer{aInternal}}},
		calls(3, aInternal), []step{{deadline: -time.Second, answers: []answer{aOK}}}, calls(1, aOK))},
	{"gateways, unknown and lost", script( // UNAVAILABLE ↔ 502, DEADLINE_EXCEEDED ↔ 504, UNKNOWN and DATA_LOSS ↔ 500
		calls(1, aBadGateway, aOK), calls(1, aGatewayTimeout, aOK), calls(4, aOK), calls(1, aUnknown),
		calls(1, aDataLoss), calls(4, aOK), calls(1, aBadGateway, aGatewayTimeout, aUnavailable), calls(4, aOK),
		calls(1, aGatewayTimeout, aBadGateway, aNotFound))},
	{"exhausted without pushback", script(calls(1, aExhausted, aExhausted, aOK), calls(1, aExhausted),
		calls(1, aExhausted, aPushback, aExhausted))},
	{"the backend's caller gave up", script(calls(6, aCancelled), calls(1, aCancelled, aOK), calls(1, aOK))},
	{"a pushback of no wait", script(calls(1, aPushbackNow, aOK), calls(1, aPushbackNow, aPushbackNow, aPushbackNow),
		calls(1, aPushbackNow, aExhausted, aOK))},
	{"late answers", script(calls(1, aLate, aOK), calls(3, aOK), calls(1, aLate, aLate, aLate), calls(3, aOK),
		calls(1, aLate, aUnavailable, aLate), calls(5, aOK), calls(4, aLate), calls(1, aOK))},
	{"business answers close a half-open breaker", halfOpenBusiness},
	{"broken connections", script(calls(1, aAbort, aOK), calls(3, aOK), calls(1, aAbort, aAbort, aOK), calls(5, aOK),
		calls(1, aAbort, aAbort, aAbort), calls(5, aOK), calls(1, aOK, aAbort), calls(4, aAbort))},
	{"bodies cut short", script(calls(1, aCut, aOK), calls(3, aOK), calls(1, aCut, aAbort, aOK), calls(5, aOK),
		calls(1, aCut, aCut, aCut), calls(5, aOK), calls(1, aUnavailable, aCut), calls(4, aCut))},
	{"rate limited", script(calls(9, aOK), calls(1, aUnavailable, aOK),
		after(time.Second+time.Microsecond, calls(7, aOK)), calls(1, aUnavailable, aOK))},
}

// halfOpenBusiness opens the breaker, then answers its half-open probes
// with NOT_FOUND: they count as successes, so the breaker closes and the
// calls after them go through (TestBusinessProbesCloseTheBreaker).
var halfOpenBusiness = script(calls(4, aInternal), after(5*time.Second+time.Microsecond, calls(2, aNotFound)),
	calls(3, aOK), calls(1, aInvalid), calls(1, aOK))

// TestBusinessProbesCloseTheBreaker holds each transport to what the
// differential test can only compare: half-open probes answered with a
// business answer close the breaker, and a 501 is one (docs/concepts.md, What counts as a
// failure: NOT_FOUND is a success).
func TestBusinessProbesCloseTheBreaker(t *testing.T) {
	for name, play := range map[string]playFunc{"gRPC": playGRPC, "HTTP": playHTTP} {
		r := play(t, diffYAML, halfOpenBusiness)
		want := "[0s CLOSED→OPEN 5s OPEN→HALF_OPEN 5.000001s HALF_OPEN→CLOSED]"
		if got := fmt.Sprint(r.transitions); got != want || r.state != "CLOSED" {
			t.Errorf("%s: transitions %s, state %s; want %s, CLOSED", name, got, r.state, want)
		}
		if got := r.classes[4:]; !slices.Equal(got, []string{"business:NOT_FOUND", "business:NOT_FOUND", "ok", "ok", "ok",
			"business:INVALID_ARGUMENT", "ok"}) {
			t.Errorf("%s: the calls after the wait got %v", name, got)
		}
		// 501 is a 5xx, yet a healthy server saying no (docs/http.md,
		// Classification), as gRPC's UNIMPLEMENTED, listed nowhere.
		r = play(t, diffYAML, script(calls(6, aUnimplemented), calls(1, aOK)))
		if r.transitions != nil || slices.ContainsFunc(r.outcomes, func(o string) bool { return o != "success" }) {
			t.Errorf("%s: UNIMPLEMENTED/501 answers: transitions %v, breaker %q; want all successes", name, r.transitions, r.outcomes)
		}
	}
}

func TestTransportsAgree(t *testing.T) {
	for _, tc := range diffTable {
		t.Run(tc.name, func(t *testing.T) { compare(t, diffYAML, tc.steps) })
	}
}

// generate is a script of n calls drawn from seed: spells of health and of
// outage, so that the breaker opens, half-opens and closes, and gaps that
// let its open wait run out. Every gap ends a microsecond past a whole
// millisecond, so that no call starts at the very instant a timer an
// earlier call set is due.
func generate(seed uint64, n int) []step {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	healthy := []answer{aOK, aOK, aOK, aOK, aOK, aOK, aSlow, aNotFound, aInvalid, aUnavailable, aPushback, aUnavailableWait,
		aRelayedFull, aRelayedLimit, aPushbackLong, aExhausted, aOK, aOK, aUnimplemented,
		aPushbackNow, aCancelled}
	outage := []answer{aUnavailable, aInternal, aHang, aUnavailable, aOK, aOK, aSlow, aSlow, aRelayedOpen, aUnavailableWait,
		aBadGateway, aGatewayTimeout, aUnknown, aDataLoss, aLate, aNotFound, aNotFound, aAbort, aCut, aUnimplemented}
	steps := make([]step, n)
	bad := false
	for i := range steps {
		if r.IntN(map[bool]int{false: 25, true: 8}[bad]) == 0 {
			bad = !bad
		}
		pool := healthy
		if bad {
			pool = outage
		}
		as := make([]answer, 1+r.IntN(3))
		for j := range as {
			as[j] = pool[r.IntN(len(pool))]
		}
		if r.IntN(4) == 0 {
			steps[i].gap = time.Duration(r.IntN(8000))*time.Millisecond + time.Microsecond
		}
		// The caller's own deadline or cancel, a few µs off the
		// configuration's round times so as never to tie with them.
		switch r.IntN(10) {
		case 0:
			steps[i].deadline = time.Duration(r.IntN(3500))*time.Millisecond + 3*time.Microsecond
		case 1:
			steps[i].cancel = time.Duration(r.IntN(3500))*time.Millisecond + 3*time.Microsecond
		}
		steps[i].answers = as
	}
	return steps
}

// seeds is the seeds a test of generated scripts plays: def, or the range
// "first-last" of $MESHLESS_DIFF_SEEDS, for a one-off wide run
// (MESHLESS_DIFF_SEEDS=25-999 go test -run 'TestTransportsAgreeOnGeneratedScripts' ./e2e).
func seeds(t *testing.T, def ...uint64) []uint64 {
	env := os.Getenv("MESHLESS_DIFF_SEEDS")
	if env == "" {
		return def
	}
	var first, last uint64
	if _, err := fmt.Sscanf(env, "%d-%d", &first, &last); err != nil || last < first {
		t.Fatalf("MESHLESS_DIFF_SEEDS=%q: want first-last", env)
	}
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}

func TestTransportsAgreeOnGeneratedScripts(t *testing.T) {
	for _, seed := range seeds(t, 1, 2, 3, 4, 5) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { compare(t, diffYAML, generate(seed, 300)) })
	}
}

// The documented differences, each encoded here rather than compared away.

// With the code lists as the documentation gives them, a timed-out attempt
// is retried over HTTP and not over gRPC: under hosts, "a transport error
// … and a timeout are failures, and — for a request that may be sent
// again — retried" whatever the lists say (docs/configuration.md, hosts
// (HTTP); docs/http.md, Classification), while gRPC retries
// DEADLINE_EXCEEDED only when retryableStatusCodes lists it, and the
// default list does not (docs/concepts.md, What counts as a failure:
// "retried by default: no").
func TestATimedOutAttemptIsRetriedOverHTTPOnly(t *testing.T) {
	const listed = "[UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED]"
	if !strings.Contains(diffYAML, listed) {
		t.Fatalf("diffYAML no longer writes %s", listed)
	}
	yml := strings.Replace(diffYAML, listed, "[UNAVAILABLE, RESOURCE_EXHAUSTED]", 1)
	steps := calls(1, aHang, aOK)
	g, h := playGRPC(t, yml, steps), playHTTP(t, yml, steps)
	if g.classes[0] != "failure:DEADLINE_EXCEEDED" || g.attempts[0] != 1 {
		t.Errorf("gRPC: %s after %d attempts, want DEADLINE_EXCEEDED after 1 (not retried)", g.classes[0], g.attempts[0])
	}
	if h.classes[0] != "ok" || h.attempts[0] != 2 {
		t.Errorf("HTTP: %s after %d attempts, want ok after 2 (the timeout retried)", h.classes[0], h.attempts[0])
	}
}

// An HTTP call is as long as its response's header: the timeouts bound the
// wait for the header, and the breaker's outcome is made at it; the body
// is read afterwards, under the request's own context (docs/http.md, The
// order). A gRPC unary call ends with its reply. So a reply that comes past
// the per-attempt timeout after a header that came at once is a timeout
// over gRPC (a failure, retried) and a success over HTTP, its body read
// whole; and a connection that drops after OK's header is UNAVAILABLE over
// gRPC (a failure, retried) and over HTTP a success whose body the caller
// finds cut short.
func TestAResponseIsOneCallAsLongAsItsHeaderOverHTTPOnly(t *testing.T) {
	steps := script(calls(1, aLateBody, aOK), calls(3, aOK), calls(1, aOKCut, aOK))
	g, h := playGRPC(t, diffYAML, steps), playHTTP(t, diffYAML, steps)
	for i, want := range map[int][2]string{0: {"failure", "ok"}, 4: {"failure", "ok"}} {
		if g.classes[i] != want[1] || g.attempts[i] != 2 || !strings.HasPrefix(g.outcomes[i], want[0]) {
			t.Errorf("gRPC call %d (%v): %s after %d attempts, breaker [%s]; want ok after 2, the first a failure",
				i, steps[i], g.classes[i], g.attempts[i], g.outcomes[i])
		}
	}
	for i, want := range map[int]string{0: "ok", 4: "ok, its body cut short"} {
		if h.classes[i] != want || h.attempts[i] != 1 || h.outcomes[i] != "success" {
			t.Errorf("HTTP call %d (%v): %s after %d attempts, breaker [%s]; want %s after 1, a success",
				i, steps[i], h.classes[i], h.attempts[i], h.outcomes[i], want)
		}
	}
}

// A POST is sent once, whatever retryableStatusCodes says: "Retries go only
// to idempotent methods … or requests with an Idempotency-Key header"
// (docs/configuration.md, hosts (HTTP); docs/http.md, Retries, bodies and
// hedging). gRPC has no such notion: a unary call is retried as its method's
// retry section says.
func TestAPostIsNotRetried(t *testing.T) {
	steps := calls(1, aUnavailable, aOK)
	g, h := playGRPC(t, diffYAML, steps), playHTTPWith(t, setup{yml: diffYAML, method: http.MethodPost}, steps)
	if g.classes[0] != "ok" || g.attempts[0] != 2 {
		t.Errorf("gRPC: %s after %d attempts, want ok after 2", g.classes[0], g.attempts[0])
	}
	if h.classes[0] != "failure:UNAVAILABLE" || h.attempts[0] != 1 {
		t.Errorf("HTTP POST: %s after %d attempts, want its 503 after 1", h.classes[0], h.attempts[0])
	}
}

// An HTTP request whose reused connection closes before any byte of a
// response is sent again by net/http itself, once, on a new connection,
// when it is idempotent (net/http's Transport documents it): the backend
// sees it twice, meshless once — one attempt, one outcome, no retry token.
// A gRPC call the server received is never sent again by grpc-go. The
// harness answers the resend as the attempt it repeats (backend.resent);
// this holds that it happens, so that the encoding stays needed.
func TestNetHTTPResendsAnAttemptItsReusedConnectionLost(t *testing.T) {
	steps := script(calls(2, aOK), calls(1, aAbort, aOK))
	g, h := playGRPC(t, diffYAML, steps), playHTTP(t, diffYAML, steps)
	for name, r := range map[string]run{"gRPC": g, "HTTP": h} {
		if r.classes[2] != "ok" || r.attempts[2] != 2 || r.outcomes[2] != "failure success" {
			t.Errorf("%s: %s after %d attempts, breaker [%s]; want ok after 2, [failure success]",
				name, r.classes[2], r.attempts[2], r.outcomes[2])
		}
	}
	if h.resends != 1 {
		t.Errorf("HTTP: net/http resent %d aborted attempts, want 1", h.resends)
	}
}

// sameOutcomes reports whether two calls' breaker outcomes agree: in order,
// or, for hedged calls, as a multiset.
func sameOutcomes(a, b string, unordered bool) bool {
	if !unordered || a == b {
		return a == b
	}
	x, y := strings.Fields(a), strings.Fields(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
