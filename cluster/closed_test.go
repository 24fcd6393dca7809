package cluster_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience"
)

// A breaker added to a closed cluster decides alone, and a Sync after
// Close does nothing and says the cluster is closed. Add attached the
// breaker to the closed cluster's "Redis down" coordination, and a manual
// Sync then exchanged with Redis, switched the cluster's health to up and
// gave the breaker the leasing coordination, with no loop left to grant
// it probes: once HALF_OPEN, it refused every call, for good.
func TestAddAndSyncAfterCloseLeaveTheBreakerDecidingAlone(t *testing.T) {
	w := newWorld(t)
	p := w.pod("a", false)
	p.sync()
	p.c.Close()
	b, err := circuitbreaker.New(circuitbreaker.WithConfig(podConf()), circuitbreaker.WithName("late"), circuitbreaker.WithClock(w.clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	p.c.Add(b)
	if err := p.c.Sync(t.Context()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Sync after Close: %v, want an error that says the cluster is closed", err)
	}
	if p.c.Connected() {
		t.Errorf("a closed cluster reports itself connected")
	}
	late := &pod{t: t, c: p.c, b: b, clk: w.clk}
	late.calls(10, resilience.Failure)
	late.wantState(circuitbreaker.StateOpen)
	w.clk.Advance(openWait)
	if n := late.calls(2, resilience.Success); n != 2 {
		t.Fatalf("HALF_OPEN: %d of 2 probes let through (window %+v), want both: the breaker decides alone", n, coord.Of(b).Window())
	}
	late.wantState(circuitbreaker.StateClosed)
}

// Add racing Close: either the breaker was added first and Close returns
// it to deciding alone, or it is not added; either way, once both have
// returned, it hands out its own probes.
func TestAddRacingCloseLeavesTheBreakerDecidingAlone(t *testing.T) {
	w := newWorld(t)
	for i := range 20 {
		p := w.pod("a", false)
		p.sync()
		b, err := circuitbreaker.New(circuitbreaker.WithConfig(podConf()), circuitbreaker.WithName("late"), circuitbreaker.WithClock(w.clk))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { p.c.Add(b) })
		p.c.Close()
		wg.Wait()
		if err := p.c.Sync(t.Context()); err == nil {
			t.Fatalf("round %d: Sync after Close succeeded", i)
		}
		late := &pod{t: t, c: p.c, b: b, clk: w.clk}
		late.calls(10, resilience.Failure)
		late.wantState(circuitbreaker.StateOpen)
		w.clk.Advance(openWait)
		if n := late.calls(2, resilience.Success); n != 2 {
			t.Fatalf("round %d: HALF_OPEN: %d of 2 probes let through (window %+v), want both", i, n, coord.Of(b).Window())
		}
		b.Close()
	}
}
