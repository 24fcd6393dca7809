package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/meshless/meshless/circuitbreaker"
	meshconfig "github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// Every call's goroutine, every connection and every server must be over
// when run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listenMem is an in-memory listener for gRPC (package memnet): inside a
// synctest bubble, a goroutine blocked on it is durably blocked, as one
// blocked on a socket is not, so the bubble's fake time can advance.
//
// Not bufconn: each bufconn connection arms two timers of 0 s, and in a
// bubble the runtime runs such a timer at once, on the system stack; under
// the race detector that crashed the test binary now and then (a SIGSEGV in
// the race runtime, tsan's SlotLock or StackDepotBase::Put, three times in
// about forty runs of the suite, Go 1.26.8). net.Pipe arms no timer until
// a deadline is set.
func listenMem() (net.Listener, string, []grpc.DialOption, error) {
	lis := memnet.Listen()
	return lis, "passthrough:///mem", []grpc.DialOption{grpc.WithContextDialer(lis.Dialer())}, nil
}

// runInBubble plays cfg in a synctest bubble over net.Pipe (listenMem,
// listenPipe). Its time is fake:
// it advances only when every goroutine of the run waits, so every latency,
// deadline, backoff and phase is exact, however loaded the machine is.
// Calls that start at the same instant may still run in any order, so the
// counts vary a little from run to run; the tests' margins allow for that.
func runInBubble(t *testing.T, cfg config, w io.Writer) summary {
	t.Helper()
	var sum summary
	synctest.Test(t, func(t *testing.T) {
		cfg.Listen = listenMem
		if cfg.Transport == transportHTTP {
			cfg.Listen = listenPipe
		}
		var err error
		if sum, err = run(t.Context(), cfg, w); err != nil {
			t.Fatalf("run: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return sum
}

// shortConfig is the default scenario with shorter phases, run on the
// bubble's fake time (see runInBubble): about 1700 calls per client.
func shortConfig(t *testing.T) config {
	t.Helper()
	cfg, err := defaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Schedule {
		cfg.Schedule[i].Duration = time.Second
	}
	cfg.Schedule[phaseHealthy].Duration = 500 * time.Millisecond
	return cfg
}

const (
	phaseHealthy = iota
	phaseOverloaded
	phaseFailing
	phaseHanging
	phaseRecovered
)

func TestMeshlessShedsLoadOfABackendThatFailsAndHangs(t *testing.T) {
	cfg := shortConfig(t)
	var out bytes.Buffer
	sum := runInBubble(t, cfg, &out)
	t.Logf("output:\n%s", out.String())
	if len(sum.Clients) != 2 {
		t.Fatalf("got %d clients, want 2", len(sum.Clients))
	}
	bare, mesh := sum.Clients[0], sum.Clients[1]

	for _, c := range sum.Clients {
		for i, r := range append(c.Phases, c.Total) {
			if r.Calls != r.Answered()+r.Failed+r.Rejected() {
				t.Errorf("%s, phase %d: counts do not add up: %+v", c.Name, i, r.tally)
			}
			// Every answer came from the backend: a request reached it.
			if r.Reached < r.Answered() {
				t.Errorf("%s, phase %d: %d answers from %d requests at the backend", c.Name, i, r.Answered(), r.Reached)
			}
			if r.Reached > 3*r.Calls { // maxAttempts: 3
				t.Errorf("%s, phase %d: %d requests for %d calls, over 3 per call", c.Name, i, r.Reached, r.Calls)
			}
		}
	}
	for i := range sum.Schedule {
		if b, m := bare.Phases[i].Calls, mesh.Phases[i].Calls; b != m || b == 0 {
			t.Errorf("phase %d: the clients made %d and %d calls, want the same, some", i, b, m)
		}
	}
	if bare.Total.Rejected() != 0 || bare.Total.Reached != bare.Total.Calls {
		t.Errorf("bare: %+v, want every call sent once and none rejected", bare.Total.tally)
	}

	// NOT_FOUND is a healthy backend's answer: half the calls of the first
	// phase got it, and the breaker did not move.
	for _, c := range sum.Clients {
		h := c.Phases[phaseHealthy]
		if h.Rejected() != 0 || h.Failed != 0 || h.NotFound == 0 || h.OK == 0 {
			t.Errorf("%s in the healthy phase: %+v, want OK and NOT_FOUND answers only", c.Name, h.tally)
		}
	}
	for _, tr := range sum.Transitions {
		if tr.Phase == phaseHealthy {
			t.Errorf("the breaker moved in the healthy phase: %+v", tr)
		}
	}

	// The backend overloads for real: bare offers it 2.5 times what it
	// serves, and it answers what its workers can (the calls of the phase,
	// plus those its queue held at the end), queues (latency grows) and
	// sheds the rest.
	bo := bare.Phases[phaseOverloaded]
	served := cfg.Capacity.perSecond() * sum.Schedule[phaseOverloaded].Duration.Seconds()
	if a := float64(bo.Answered()); a < 0.9*served || a > served+float64(cfg.Capacity.Workers+cfg.Capacity.Queue) {
		t.Errorf("bare while overloaded: %d answers, want what the workers serve, about %.0f", bo.Answered(), served)
	}
	if bo.Failed == 0 || bare.Shed == 0 {
		t.Errorf("bare while overloaded: %d failed, %d shed, want some shed", bo.Failed, bare.Shed)
	}
	if bo.P99 < 2*cfg.Capacity.Work {
		t.Errorf("bare's p99 while overloaded = %v, want queueing to add to the %v of work", bo.P99, cfg.Capacity.Work)
	}

	// While the backend failed and hung, the breaker kept most calls off it,
	// and meshless did better there.
	bareBad := bare.Phases[phaseFailing].Reached + bare.Phases[phaseHanging].Reached
	meshBad := mesh.Phases[phaseFailing].Reached + mesh.Phases[phaseHanging].Reached
	if meshBad*4 >= bareBad {
		t.Errorf("during failing+hanging meshless sent %d requests to the backend and bare %d, want under a quarter",
			meshBad, bareBad)
	}
	if mesh.Phases[phaseHanging].Open == 0 {
		t.Errorf("meshless rejected no call while the backend hung")
	}
	for _, p := range []int{phaseFailing, phaseHanging} {
		if v := sum.Verdicts[p]; v.Winner != "meshless" {
			t.Errorf("while %s: %s did better (%s), want meshless", sum.Schedule[p], v.Winner, v.Why)
		}
	}

	// While it hung, bare waited out every deadline; meshless answered at
	// once, but for its breaker's probes (one every open wait, about 1 % of
	// the calls), which wait out theirs.
	if p99 := bare.Phases[phaseHanging].P99; p99 < cfg.Timeout {
		t.Errorf("bare's p99 latency while hanging = %v, want at least the deadline %v", p99, cfg.Timeout)
	}
	if p50 := mesh.Phases[phaseHanging].P50; p50 >= cfg.Timeout/2 {
		t.Errorf("meshless's median latency while hanging = %v, want well under the deadline %v", p50, cfg.Timeout)
	}
	if h := mesh.Phases[phaseHanging]; h.Reached*20 > h.Calls {
		t.Errorf("meshless sent %d requests to the hanging backend for %d calls, want under 5 %%", h.Reached, h.Calls)
	}

	for _, want := range []string{
		"maxConcurrentCalls: 30",
		"▶ phase 2/5, overloaded for 1s: 1000 calls a second, 2.5x what the backend serves",
		"▶ phase 3/5, failing",
		"⚡ meshless breaker CLOSED → OPEN (failure_rate)",
		"NOT_FOUND fail  rej in-flight",
		"─ process ─",
		"summary:",
		"calls made",
		"requests the backend received",
		"answered NOT_FOUND (a business answer)",
		"rejected fast: breaker open (CIRCUIT_OPEN)",
		"rejected fast: bulkhead full (BULKHEAD_FULL)",
		"latency p99",
		"peak in-flight calls (goroutines)",
		"who did better:",
		"while healthy (200 calls a second)",
		"while overloaded (1000 calls a second)",
		"while failing (200 calls a second)",
		"while hanging (200 calls a second)",
		"while recovered (200 calls a second)",
		"backend requests per call",
		"  → meshless did better: backend requests per call",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if n := strings.Count(out.String(), "  → "); n != len(sum.Schedule) {
		t.Errorf("%d verdict lines, want one per phase (%d)", n, len(sum.Schedule))
	}
}

// Phase by phase, from the run's own numbers, meshless does at least as
// well as the bare client. Margins, stated:
//   - success rate ≥ bare's − 2 points (the summary's tie) in every phase
//     but "recovered";
//   - while recovered, the breaker (opened by the failing and hanging
//     phases) closes within one open wait at its longest
//     (maxWaitDurationInOpenState) plus the probe's time
//     (maxWaitDurationInHalfOpenState, a hung probe) plus one healthy call;
//     meshless's success rate may fall short of bare's by the calls of that
//     time and no more. No client-side breaker can know the backend is back
//     before a probe has come back from it;
//   - p99 ≤ bare's × 1.1 + 1ms (the summary's tie) in every phase. While
//     the backend fails, bare answers at once and meshless retries its
//     first few calls (retry throttling stops it after two or three, the
//     breaker after a few dozen attempts), each retried call taking a
//     backoff longer: the failing phase runs 3s here (600 calls), so that a
//     p99 is not the third-worst call, which would be one of those;
//   - while overloaded, the backend receives no more requests from meshless
//     than from bare.
func TestMeshlessAtLeastAsGoodAsBareInEveryPhase(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Schedule[phaseRecovered].Duration = 3 * time.Second
	cfg.Schedule[phaseFailing].Duration = 3 * time.Second
	sum := runInBubble(t, cfg, io.Discard)
	bare, mesh := sum.Clients[0], sum.Clients[1]
	cb := cfg.Client.Defaults.CircuitBreaker
	recovery := cb.MaxWaitDurationInOpenState.D() + cb.MaxWaitDurationInHalfOpenState.D() + cfg.Capacity.Work
	rate := func(r result) float64 { return float64(r.Answered()) / float64(r.Calls) }
	for i, ph := range sum.Schedule {
		b, m := bare.Phases[i], mesh.Phases[i]
		margin := 0.02
		if i == phaseRecovered {
			margin = recovery.Seconds() / ph.Duration.Seconds()
		}
		t.Logf("%s: bare %+v p99 %v; meshless %+v p99 %v", ph, b.tally, b.P99, m.tally, m.P99)
		if rate(m) < rate(b)-margin {
			t.Errorf("while %s: meshless success %.1f%%, bare %.1f%%: want at most %.1f points less", ph, 100*rate(m), 100*rate(b), 100*margin)
		}
		if m.P99 > b.P99+b.P99/10+time.Millisecond {
			t.Errorf("while %s: meshless p99 %v, bare %v: want no more (within 10 %% or 1ms)", ph, m.P99, b.P99)
		}
		if v := sum.Verdicts[i]; v.Winner == "bare" && i != phaseRecovered {
			t.Errorf("while %s bare did better: %s", ph, v.Why)
		}
	}
	if b, m := bare.Phases[phaseOverloaded].Reached, mesh.Phases[phaseOverloaded].Reached; m > b {
		t.Errorf("while overloaded the backend received %d requests from meshless, %d from bare: want no more", m, b)
	}
	// The breaker closed in time once the backend recovered.
	recovered := sum.Schedule.start(phaseRecovered)
	var closed time.Duration
	for _, tr := range sum.Transitions {
		if tr.To == circuitbreaker.StateClosed && tr.At >= recovered && closed == 0 {
			closed = tr.At
		}
	}
	if closed == 0 || closed-recovered > recovery {
		t.Errorf("the breaker closed %v after the backend recovered (0: never), want within %v; transitions %+v", closed-recovered, recovery, sum.Transitions)
	}
	t.Logf("the breaker closed %v after the backend recovered; meshless success while recovered %.1f%% (bare %.1f%%)",
		closed-recovered, 100*rate(mesh.Phases[phaseRecovered]), 100*rate(bare.Phases[phaseRecovered]))
}

func TestShedWithPushback(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Capacity.Shed = shedPushback
	cfg.Schedule = cfg.Schedule[:phaseFailing]
	var out bytes.Buffer
	sum := runInBubble(t, cfg, &out)
	bo := sum.Clients[0].Phases[phaseOverloaded]
	if bo.Failed == 0 || sum.Clients[0].Shed == 0 {
		t.Errorf("bare while overloaded: %+v, %d shed: want calls shed", bo.tally, sum.Clients[0].Shed)
	}
	if want := "RESOURCE_EXHAUSTED, pushback 40ms"; !strings.Contains(out.String(), want) {
		t.Errorf("the output lacks %q:\n%s", want, out.String())
	}
}

func TestBreakerClosesOnceBackendRecovers(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Quiet = true
	cb := cfg.Client.Defaults.CircuitBreaker
	cb.WaitDurationInOpenState = meshconfig.Dur(100 * time.Millisecond) // 100, 200, 400ms as it re-opens
	cb.MaxWaitDurationInOpenState = meshconfig.Dur(400 * time.Millisecond)
	cfg.Schedule[phaseRecovered].Duration = 2 * time.Second
	var out bytes.Buffer
	sum := runInBubble(t, cfg, &out)
	trs := sum.Transitions
	if len(trs) == 0 {
		t.Fatal("no transition")
	}
	if last := trs[len(trs)-1]; last.To != circuitbreaker.StateClosed || last.Phase != phaseRecovered {
		t.Errorf("last transition %+v, want to CLOSED in the recovered phase; all %+v", last, trs)
	}
	if ok := sum.Clients[1].Phases[phaseRecovered].OK; ok == 0 {
		t.Errorf("meshless had no call succeed once the backend recovered")
	}
	if s := out.String(); strings.Contains(s, "▶ phase") || !strings.Contains(s, "summary:") {
		t.Errorf("quiet output should be the summary alone, got:\n%s", s)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Rate = 0
	if _, err := run(context.Background(), cfg, new(bytes.Buffer)); err == nil {
		t.Error("run with rate 0: no error")
	}
	for _, bad := range []func(*config){
		func(c *config) { c.Load = 0 },
		func(c *config) { c.Capacity.Workers = 0 },
		func(c *config) { c.Capacity.Work = 0 },
		func(c *config) { c.Capacity.Queue = -1 },
		func(c *config) { c.Capacity.Shed = "drop" },
		func(c *config) { c.Capacity.FailEvery = 1 },
		func(c *config) { c.Load, c.Capacity.Work = 100, time.Microsecond },
	} {
		cfg = shortConfig(t)
		bad(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("config %+v: no error", cfg)
		}
	}
	cfg = shortConfig(t)
	cfg.Client.Defaults.CircuitBreaker.MinimumNumberOfCalls = meshconfig.Ptr(*cfg.Client.Defaults.CircuitBreaker.SlidingWindowSize + 1)
	_, err := run(context.Background(), cfg, new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "minimumNumberOfCalls") {
		t.Errorf("run with an invalid client config: %v, want an error naming minimumNumberOfCalls", err)
	}
}

// The embedded client.yaml is what the program prints, unless -timeout
// changes it; then it prints the configuration in force.
func TestPrintedConfigIsTheOneInForce(t *testing.T) {
	cfg, err := defaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientYAML != clientYAML || cfg.Timeout.String() != "500ms" {
		t.Fatalf("default config prints %q with timeout %v", cfg.ClientYAML, cfg.Timeout)
	}
	if err := cfg.setTimeout(80 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	back, err := grpcmw.ParseConfig([]byte(cfg.ClientYAML))
	if err != nil {
		t.Fatalf("the printed config does not parse: %v\n%s", err, cfg.ClientYAML)
	}
	if got := back.Defaults.Timeout; got.PerAttempt.D() != 80*time.Millisecond || got.Overall.D() != 160*time.Millisecond {
		t.Errorf("printed timeouts %v/%v, want 80ms/160ms", got.PerAttempt.D(), got.Overall.D())
	}
}

func TestPercentile(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{nil, 99, 0},
		{[]time.Duration{7}, 50, 7},
		{[]time.Duration{7}, 99, 7},
		{[]time.Duration{1, 2}, 50, 1},
		{[]time.Duration{1, 2}, 99, 2},
		{hundred, 50, 50},
		{hundred, 99, 99},
		{hundred, 100, 100},
		{hundred[:99], 99, 99}, // ⌈0.99 × 99⌉ = 99
		{append(hundred[:100:100], 101), 99, 100},
	} {
		if got := percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("percentile(%d values, p%d) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
		}
	}
}

func TestJudge(t *testing.T) {
	res := func(calls, answered, reached int, p99 time.Duration) result {
		return result{tally: tally{Calls: calls, OK: answered, Failed: calls - answered, Reached: reached}, P99: p99}
	}
	for _, tc := range []struct {
		name   string
		a, b   result
		winner string
		whyHas string
	}{
		{name: "success decides", a: res(100, 40, 100, 60*time.Millisecond), b: res(100, 4, 5, time.Millisecond),
			winner: "a", whyHas: "(b did better on backend requests per call 0.05 against 1.00, p99 1.0ms against 60.0ms)"},
		{name: "success within 2 points, load decides", a: res(1000, 1000, 1000, time.Millisecond), b: res(1000, 990, 1500, time.Millisecond),
			winner: "a", whyHas: "backend requests per call 1.00 against b's 1.50"},
		{name: "p99 decides", a: res(100, 0, 100, 500*time.Millisecond), b: res(100, 0, 100, time.Millisecond),
			winner: "b", whyHas: "p99 1.0ms against a's 500.0ms"},
		{name: "tie", a: res(100, 100, 100, 20*time.Millisecond), b: res(100, 99, 104, 21*time.Millisecond), winner: "tie"},
		{name: "no calls", a: res(0, 0, 0, 0), b: res(10, 10, 10, 0), winner: "tie", whyHas: "no calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judge("a", "b", tc.a, tc.b)
			if v.Winner != tc.winner || !strings.Contains(v.Why, tc.whyHas) {
				t.Errorf("judge = %+v, want winner %s, why with %q", v, tc.winner, tc.whyHas)
			}
		})
	}
}

// With -transport http the backend scenario runs over HTTP — a net/http
// client with a deadline beside httpmw's RoundTripper, from the same
// client.yaml — with the same outcome: a 404 is an answer, the breaker
// opens on the failing backend's 503s and on its hang, and meshless sends
// the backend far fewer requests per call than bare while it fails and
// hangs, and none twice.
func TestTheBackendScenarioOverHTTP(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Transport = transportHTTP
	var out bytes.Buffer
	sum := runInBubble(t, cfg, &out)
	t.Logf("output:\n%s", out.String())
	for _, want := range []string{"2 HTTP clients", "404 fail  rej in-flight", "answered 404 (a business answer)", "failed (503, timeouts…)", "success (OK or 404)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q: it does not speak HTTP", want)
		}
	}
	bare, mesh := sum.Clients[0], sum.Clients[1]
	for _, c := range sum.Clients {
		for i, r := range append(c.Phases, c.Total) {
			if r.Calls != r.Answered()+r.Failed+r.Rejected() {
				t.Errorf("%s, phase %d: counts do not add up: %+v", c.Name, i, r.tally)
			}
		}
		h := c.Phases[phaseHealthy]
		if h.Rejected() != 0 || h.Failed != 0 || h.NotFound == 0 || h.OK == 0 {
			t.Errorf("%s in the healthy phase: %+v, want 200 and 404 answers only", c.Name, h.tally)
		}
	}
	if bare.Total.Rejected() != 0 || bare.Total.Reached != bare.Total.Calls {
		t.Errorf("bare: %+v, want every call sent once and none rejected", bare.Total.tally)
	}
	for _, p := range []int{phaseFailing, phaseHanging} {
		b, m := bare.Phases[p], mesh.Phases[p]
		if m.Open == 0 || 2*m.Reached > b.Reached {
			t.Errorf("phase %d: meshless %+v, bare %+v: want the breaker to refuse calls and meshless to send under half of bare's requests", p, m.tally, b.tally)
		}
	}
	if len(sum.Transitions) == 0 {
		t.Error("the breaker never moved")
	}
}
