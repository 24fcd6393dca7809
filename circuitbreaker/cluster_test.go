package circuitbreaker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
)

// hookLog records what OnTransition is told.
type hookLog struct {
	mu  sync.Mutex
	got []string
}

func (l *hookLog) on(_ any, from, to, r uint8) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, circuitbreaker.State(from).String()+"->"+circuitbreaker.State(to).String()+"("+circuitbreaker.Reason(r).String()+")")
}

func (l *hookLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func TestWindowReadsCountsAndTimes(t *testing.T) {
	h := newHarness(t, small...)
	h.calls(2, fail, 0)
	h.calls(1, ok, 2*time.Second) // slow
	w := coord.Of(h.cb).Window()
	if circuitbreaker.State(w.State) != circuitbreaker.StateClosed || w.Calls != 3 || w.Failures != 2 || w.Slow != 1 || !w.Since.Equal(t0) {
		t.Fatalf("Window = %+v", w)
	}
	h.calls(2, fail, 0) // 5 calls, 4 failed: open
	w = coord.Of(h.cb).Window()
	if circuitbreaker.State(w.State) != circuitbreaker.StateOpen || w.Calls != 0 || !w.Until.Equal(h.clk.Now().Add(10*time.Second)) {
		t.Fatalf("open Window = %+v", w)
	}
}

func TestOnTransitionHearsOwnChangesOnly(t *testing.T) {
	h := newHarness(t, small...)
	var log hookLog
	coord.Of(h.cb).Coordinate(&coord.Coordination{OnTransition: log.on})
	h.halfOpen()
	h.calls(2, ok, 0)
	h.cb.ForceOpen()
	h.cb.Reset()
	coord.Of(h.cb).OpenRemote(time.Second, 0, uint8(circuitbreaker.ReasonFailureRate))
	coord.Of(h.cb).CloseRemote()
	want := []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)", "HALF_OPEN->CLOSED(probes_succeeded)"}
	if got := log.list(); !slices.Equal(got, want) {
		t.Fatalf("OnTransition heard %q, want %q", got, want)
	}
	// Observers hear every change, remote ones included.
	if got := h.transitions(); len(got) != 7 || got[5] != "CLOSED->OPEN(failure_rate)" || got[6] != "OPEN->CLOSED(probes_succeeded)" {
		t.Fatalf("observer heard %q", got)
	}
}

func TestOpenRemoteTakesTheGivenWait(t *testing.T) {
	h := newHarness(t, small...)
	if !coord.Of(h.cb).OpenRemote(3*time.Second, 1, uint8(circuitbreaker.ReasonFailureRate)) {
		t.Fatal("OpenRemote from CLOSED did not open")
	}
	if w := coord.Of(h.cb).Window(); !w.Until.Equal(t0.Add(3*time.Second)) || w.Reopens != 1 {
		t.Fatalf("Window = %+v", w)
	}
	// Re-timed while open: no state change, the new wait counts.
	if coord.Of(h.cb).OpenRemote(5*time.Second, 1, uint8(circuitbreaker.ReasonFailureRate)) {
		t.Fatal("re-timing an open breaker reported a state change")
	}
	h.clk.Advance(3 * time.Second)
	h.wantState(circuitbreaker.StateOpen)
	h.clk.Advance(2 * time.Second)
	h.wantState(circuitbreaker.StateHalfOpen)
	if coord.Of(h.cb).OpenRemote(0, 0, uint8(circuitbreaker.ReasonFailureRate)) {
		t.Fatal("a zero wait opened the breaker")
	}
	h.cb.ForceOpen()
	if coord.Of(h.cb).OpenRemote(time.Second, 0, uint8(circuitbreaker.ReasonFailureRate)) || coord.Of(h.cb).CloseRemote() {
		t.Fatal("a remote decision moved a FORCED_OPEN breaker")
	}
	h.wantState(circuitbreaker.StateForcedOpen)
}

func TestClusterDecidesStopsLocalOpensButNotTrip(t *testing.T) {
	h := newHarness(t, small...)
	coord.Of(h.cb).Coordinate(&coord.Coordination{ClusterDecides: true})
	h.calls(10, fail, 0)
	h.wantState(circuitbreaker.StateClosed)
	if !coord.Of(h.cb).Trip(uint8(circuitbreaker.ReasonFailureRate)) {
		t.Fatal("Trip did not open")
	}
	h.wantState(circuitbreaker.StateOpen)
	if coord.Of(h.cb).Trip(uint8(circuitbreaker.ReasonFailureRate)) {
		t.Fatal("Trip of an open breaker reported a change")
	}
}

func TestLeasedProbes(t *testing.T) {
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.PermittedNumberOfCallsInHalfOpenState = 3 })))...)
	coord.Of(h.cb).Coordinate(&coord.Coordination{LeaseProbes: true})
	h.halfOpen()
	if h.call(ok, 0) {
		t.Fatal("a half-open breaker with no lease admitted a probe")
	}
	if g := coord.Of(h.cb).GrantProbes(1); g != 1 {
		t.Fatalf("GrantProbes(1) = %d", g)
	}
	p, err := h.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.call(ok, 0) {
		t.Fatal("a second probe ran on one lease")
	}
	p.Record(ok) // the one granted probe decides
	h.wantState(circuitbreaker.StateClosed)

	// Granting never passes the limit.
	h.open()
	h.clk.Advance(10 * time.Second)
	if g := coord.Of(h.cb).GrantProbes(5); g != 3 {
		t.Fatalf("GrantProbes(5) = %d, want 3", g)
	}
	if g := coord.Of(h.cb).GrantProbes(1); g != 0 {
		t.Fatalf("GrantProbes past the limit = %d", g)
	}
}

func TestCoordinateNilGrantsTheRestOfTheProbes(t *testing.T) {
	h := newHarness(t, small...)
	coord.Of(h.cb).Coordinate(&coord.Coordination{LeaseProbes: true})
	h.halfOpen()
	coord.Of(h.cb).GrantProbes(1)
	coord.Of(h.cb).Coordinate(nil) // the cluster went away: decide alone
	h.calls(2, ok, 0)
	h.wantState(circuitbreaker.StateClosed)
	if g := coord.Of(h.cb).GrantProbes(1); g != 0 {
		t.Fatalf("GrantProbes on a closed breaker = %d", g)
	}
}
