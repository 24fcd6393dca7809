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
	"google.golang.org/grpc/test/bufconn"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// Every call's goroutine, every connection and every server must be over
// when run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listenBufconn is an in-memory listener: inside a synctest bubble, a
// goroutine blocked on it is durably blocked, as one blocked on a socket is
// not, so the bubble's fake time can advance.
func listenBufconn() (net.Listener, string, []grpc.DialOption, error) {
	lis := bufconn.Listen(1 << 20)
	dial := func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	return lis, "passthrough:///bufconn", []grpc.DialOption{grpc.WithContextDialer(dial)}, nil
}

// runInBubble plays cfg in a synctest bubble over bufconn. Its time is fake:
// it advances only when every goroutine of the run waits, so every latency,
// deadline, backoff and phase is exact, however loaded the machine is.
// Calls that start at the same instant may still run in any order, so the
// counts vary a little from run to run; the tests' margins allow for that.
func runInBubble(t *testing.T, cfg config, w io.Writer) summary {
	t.Helper()
	var sum summary
	synctest.Test(t, func(t *testing.T) {
		cfg.Listen = listenBufconn
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

// shortConfig is the default scenario shrunk to about a second of the
// bubble's fake time (see runInBubble).
func shortConfig(t *testing.T) config {
	t.Helper()
	cfg, err := defaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Schedule {
		cfg.Schedule[i].Duration = 200 * time.Millisecond
	}
	cfg.Rate = 500
	cfg.Overloaded = 5 * time.Millisecond
	if err := cfg.setTimeout(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cb := cfg.Client.Defaults.CircuitBreaker
	cb.SlowCallDurationThreshold = grpcmw.Dur(40 * time.Millisecond)
	// Longer than the failing and hanging phases together: once open, the
	// breaker lets no probe through before the hanging phase is over.
	cb.WaitDurationInOpenState = grpcmw.Dur(time.Second)
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
		tot := c.Total
		if tot.Calls != tot.OK+tot.NotFound+tot.Failed+tot.Open+tot.Full {
			t.Errorf("%s: counts do not add up: %+v", c.Name, tot.tally)
		}
		if tot.Calls < 100 {
			t.Errorf("%s made %d calls, want hundreds", c.Name, tot.Calls)
		}
	}
	if bare.Total.Calls != mesh.Total.Calls {
		t.Errorf("the clients made %d and %d calls, want the same", bare.Total.Calls, mesh.Total.Calls)
	}
	if bare.Total.Rejected() != 0 || bare.Total.Reached != bare.Total.Calls {
		t.Errorf("bare: %+v, want every call sent once and none rejected", bare.Total.tally)
	}

	// NOT_FOUND is a healthy backend's answer: half the calls of the first
	// phase got it, and the breaker did not move.
	h := mesh.Phases[phaseHealthy]
	if h.Rejected() != 0 || h.Failed != 0 || h.NotFound == 0 || h.OK == 0 {
		t.Errorf("meshless in the healthy phase: %+v, want OK and NOT_FOUND answers only", h.tally)
	}

	// Overloaded: retries turned most of bare's failures into answers.
	bo, mo := bare.Phases[phaseOverloaded], mesh.Phases[phaseOverloaded]
	if bo.Failed == 0 || mo.Failed >= bo.Failed {
		t.Errorf("while overloaded bare failed %d calls and meshless %d, want meshless fewer", bo.Failed, mo.Failed)
	}
	if mo.Reached <= mo.Calls-mo.Rejected() {
		t.Errorf("meshless while overloaded: %+v, want retries (more requests than calls sent)", mo.tally)
	}

	// The breaker opened during the failing phase, not before.
	var opened *transition
	for i, tr := range sum.Transitions {
		if tr.Client == "meshless" && tr.To == circuitbreaker.StateOpen {
			opened = &sum.Transitions[i]
			break
		}
	}
	switch {
	case opened == nil:
		t.Fatalf("the meshless breaker never opened; transitions %+v", sum.Transitions)
	case opened.Phase != phaseFailing:
		t.Errorf("the meshless breaker first opened at %v, in phase %d, want the failing phase (%d)",
			opened.At, opened.Phase, phaseFailing)
	}

	// While the backend was bad, the breaker kept most calls off it.
	bareBad := bare.Phases[phaseFailing].Reached + bare.Phases[phaseHanging].Reached
	meshBad := mesh.Phases[phaseFailing].Reached + mesh.Phases[phaseHanging].Reached
	if meshBad*4 >= bareBad {
		t.Errorf("during failing+hanging meshless sent %d requests to the backend and bare %d, want under a quarter",
			meshBad, bareBad)
	}
	if mesh.Phases[phaseHanging].Open == 0 {
		t.Errorf("meshless rejected no call while the backend hung")
	}

	// While it hung, bare waited out every deadline; meshless answered at
	// once.
	if p99 := bare.Phases[phaseHanging].P99; p99 < cfg.Timeout {
		t.Errorf("bare's p99 latency while hanging = %v, want at least the deadline %v", p99, cfg.Timeout)
	}
	if p99 := mesh.Phases[phaseHanging].P99; p99 >= cfg.Timeout/2 {
		t.Errorf("meshless's p99 latency while hanging = %v, want well under the deadline %v", p99, cfg.Timeout)
	}

	for _, want := range []string{
		"maxConcurrentCalls: 30",
		"▶ phase 3/5, failing",
		"⚡ meshless breaker CLOSED → OPEN (failure_rate)",
		"summary:",
		"calls made",
		"requests the backend received",
		"answered NOT_FOUND (a business answer)",
		"rejected fast: breaker open (CIRCUIT_OPEN)",
		"rejected fast: bulkhead full (BULKHEAD_FULL)",
		"latency p99",
		"peak in-flight calls (goroutines)",
		"while hanging",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestBreakerClosesOnceBackendRecovers(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Quiet = true
	cb := cfg.Client.Defaults.CircuitBreaker
	cb.WaitDurationInOpenState = grpcmw.Dur(100 * time.Millisecond) // 100, 200, 400ms as it re-opens
	cb.MaxWaitDurationInOpenState = grpcmw.Dur(400 * time.Millisecond)
	cfg.Schedule[phaseRecovered].Duration = 800 * time.Millisecond
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
	cfg = shortConfig(t)
	cfg.Client.Defaults.CircuitBreaker.MinimumNumberOfCalls = grpcmw.Ptr(*cfg.Client.Defaults.CircuitBreaker.SlidingWindowSize + 1)
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
