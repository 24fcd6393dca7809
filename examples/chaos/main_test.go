package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"go.uber.org/goleak"
)

// Every call's goroutine must be over when run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortConfig is the default scenario shrunk to under a second. The
// assertions below compare the two clients with wide margins, so that a
// loaded CI machine running -race does not make them flaky.
func shortConfig() config {
	cfg := defaultConfig()
	for i := range cfg.Schedule {
		cfg.Schedule[i].Duration = 200 * time.Millisecond
	}
	cfg.Rate = 500
	cfg.Timeout = 50 * time.Millisecond
	cfg.Breaker.SlowCall = 40 * time.Millisecond
	// Longer than the failing and hanging phases together: once open, the
	// breaker lets no probe through before the hanging phase is over.
	cfg.Breaker.OpenWait = time.Second
	return cfg
}

const (
	phaseHealthy = iota
	phaseFailing
	phaseHanging
	phaseRecovered
)

func TestBreakerShedsLoadOfFailingAndHangingDependency(t *testing.T) {
	cfg := shortConfig()
	var out bytes.Buffer
	sum, err := run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("output:\n%s", out.String())
	if len(sum.Clients) != 2 {
		t.Fatalf("got %d clients, want 2", len(sum.Clients))
	}
	bare, mesh := sum.Clients[0], sum.Clients[1]

	for _, c := range sum.Clients {
		tot := c.Total
		if tot.Calls != tot.Reached+tot.Rejected || tot.Reached != tot.OK+tot.Failed {
			t.Errorf("%s: counts do not add up: %+v", c.Name, tot.tally)
		}
		if tot.Calls < 100 {
			t.Errorf("%s made %d calls, want hundreds", c.Name, tot.Calls)
		}
	}
	if bare.Total.Calls != mesh.Total.Calls {
		t.Errorf("the clients made %d and %d calls, want the same", bare.Total.Calls, mesh.Total.Calls)
	}
	if bare.Total.Rejected != 0 {
		t.Errorf("bare had %d calls rejected, want none", bare.Total.Rejected)
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
	if mesh.Phases[phaseHealthy].Rejected != 0 || mesh.Phases[phaseHealthy].Failed != 0 {
		t.Errorf("meshless in the healthy phase: %+v, want every call ok", mesh.Phases[phaseHealthy].tally)
	}

	// While the dependency was bad, the breaker kept most calls off it.
	bareBad := bare.Phases[phaseFailing].Reached + bare.Phases[phaseHanging].Reached
	meshBad := mesh.Phases[phaseFailing].Reached + mesh.Phases[phaseHanging].Reached
	if meshBad*4 >= bareBad {
		t.Errorf("during failing+hanging meshless sent %d calls to the dependency and bare %d, want under a quarter",
			meshBad, bareBad)
	}
	if mesh.Phases[phaseHanging].Rejected == 0 {
		t.Errorf("meshless rejected no call while the dependency hung")
	}

	// While it hung, bare waited out every timeout; meshless answered at once.
	if p99 := bare.Phases[phaseHanging].P99; p99 < cfg.Timeout {
		t.Errorf("bare's p99 latency while hanging = %v, want at least the timeout %v", p99, cfg.Timeout)
	}
	if p99 := mesh.Phases[phaseHanging].P99; p99 >= cfg.Timeout/2 {
		t.Errorf("meshless's p99 latency while hanging = %v, want well under the timeout %v", p99, cfg.Timeout)
	}

	for _, want := range []string{
		"▶ phase 2/4, failing",
		"⚡ meshless breaker CLOSED → OPEN (failure_rate)",
		"summary:",
		"calls made",
		"reached the dependency",
		"rejected by the breaker",
		"latency p99",
		"peak in-flight calls (goroutines)",
		"while hanging",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestBreakerClosesOnceDependencyRecovers(t *testing.T) {
	cfg := shortConfig()
	cfg.Quiet = true
	cfg.Breaker.OpenWait = 100 * time.Millisecond // 100, 200, 400ms as it re-opens
	cfg.Schedule[phaseRecovered].Duration = 800 * time.Millisecond
	var out bytes.Buffer
	sum, err := run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	trs := sum.Transitions
	if len(trs) == 0 {
		t.Fatal("no transition")
	}
	if last := trs[len(trs)-1]; last.To != circuitbreaker.StateClosed || last.Phase != phaseRecovered {
		t.Errorf("last transition %+v, want to CLOSED in the recovered phase; all %+v", last, trs)
	}
	if ok := sum.Clients[1].Phases[phaseRecovered].OK; ok == 0 {
		t.Errorf("meshless had no call succeed once the dependency recovered")
	}
	if s := out.String(); strings.Contains(s, "▶ phase") || !strings.Contains(s, "summary:") {
		t.Errorf("quiet output should be the summary alone, got:\n%s", s)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := shortConfig()
	cfg.Rate = 0
	if _, err := run(context.Background(), cfg, new(bytes.Buffer)); err == nil {
		t.Error("run with rate 0: no error")
	}
	cfg = shortConfig()
	cfg.Breaker.MinCalls = cfg.Breaker.Window + 1
	if _, err := run(context.Background(), cfg, new(bytes.Buffer)); err == nil {
		t.Error("run with an invalid breaker: no error")
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
