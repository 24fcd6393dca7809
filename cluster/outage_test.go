package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
)

func TestRedisGoneAndBack(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	a.sync()
	b.sync()
	if !a.c.Connected() || !a.l.connected.Load() {
		t.Fatal("not connected after a good sync")
	}

	w.srv.Kill()
	for range 3 {
		if err := a.c.Sync(t.Context()); err == nil {
			t.Fatal("Sync succeeded with Redis killed")
		}
	}
	if a.c.Connected() || a.l.connected.Load() {
		t.Fatal("still connected with Redis killed")
	}
	if n := a.l.failed.Load(); n != 3 {
		t.Errorf("%d failed syncs counted, want 3", n)
	}
	if n := a.l.warnings.Load(); n != 1 {
		t.Errorf("%d warnings logged, want 1 (once)", n)
	}

	// Local decisions: a opens on its own window, b knows nothing.
	a.calls(6, fail)
	a.wantState(circuitbreaker.StateOpen)
	if _, err := a.b.Acquire(context.Background()); !errors.Is(err, circuitbreaker.ErrOpen) {
		t.Fatalf("a call got %v, want the breaker's own rejection", err)
	}
	_ = a.c.Sync(t.Context()) // the open cannot be published
	b.wantState(circuitbreaker.StateClosed)
	// Half-open without Redis: the probes are the breaker's own, at once.
	w.clk.Advance(openWait)
	if n := a.calls(5, fail); n != 2 {
		t.Fatalf("%d local probes ran, want 2", n)
	}
	a.wantState(circuitbreaker.StateOpen) // re-opened by its own probes

	w.srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for a.c.Sync(t.Context()) != nil { // go-redis reconnects on the next command
		if time.Now().After(deadline) {
			t.Fatal("Sync still failing 10s after Redis came back")
		}
	}
	if !a.c.Connected() || !a.l.connected.Load() {
		t.Fatal("not connected after Redis came back")
	}
	b.sync()
	b.wantState(circuitbreaker.StateOpen) // the open made while Redis was away, shared now
	if !b.b.Window().Until.Equal(a.b.Window().Until) {
		t.Errorf("b opens until %v, a until %v", b.b.Window().Until, a.b.Window().Until)
	}
	if n := a.l.warnings.Load(); n != 1 {
		t.Errorf("%d warnings logged in all, want 1", n)
	}
}

func TestARunningClusterWithoutRedisStopsCleanly(t *testing.T) {
	w := newWorld(t)
	w.srv.Kill()
	a := w.pod("a", true)
	eventually(t, "a failed sync", func() bool { return a.l.failed.Load() > 0 })
	a.calls(6, fail) // wakes the loop; the claim fails; nothing blocks the caller
	a.wantState(circuitbreaker.StateOpen)
	a.c.Close() // returns: every exchange is bounded (goleak checks the rest)
}
