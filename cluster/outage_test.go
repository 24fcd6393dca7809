package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
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
	if _, err := a.enter(); !errors.Is(err, circuitbreaker.ErrOpen) {
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
	if !coord.Of(b.b).Window().Until.Equal(coord.Of(a.b).Window().Until) {
		t.Errorf("b opens until %v, a until %v", coord.Of(b.b).Window().Until, coord.Of(a.b).Window().Until)
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

// A Redis that holds every command (CLIENT PAUSE) is a slow Redis: the sync
// gives up at its timeout, the instance decides locally, and it shares again
// once Redis answers.
func TestRedisSlowMeansLocalDecisions(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a", false, clusterConf(func(c *cluster.Config) { c.Timeout = 100 * time.Millisecond }))
	a.sync()
	admin := redis.NewClient(&redis.Options{Addr: w.srv.Addr()})
	defer admin.Close()
	if err := admin.Do(t.Context(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Sync(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync against a paused Redis: %v, want the timeout", err)
	}
	if a.c.Connected() || a.l.warnings.Load() != 1 {
		t.Fatalf("connected %v, %d warnings: want local decisions, logged once", a.c.Connected(), a.l.warnings.Load())
	}
	a.calls(6, fail) // decided locally, at once
	a.wantState(circuitbreaker.StateOpen)
	deadline := time.Now().Add(10 * time.Second)
	for a.c.Sync(t.Context()) != nil { // the pause ends by itself
		if time.Now().After(deadline) {
			t.Fatal("Sync still failing 10s after the pause")
		}
	}
	if v := admin.Get(t.Context(), "test:open:svc").Val(); v == "" {
		t.Fatal("the open decided while Redis was slow was not published once it answered")
	}
}

// A sync cut short by its caller's context (or by Close, whose loop may
// start one as it stops) says nothing about Redis: it is neither counted
// as a failed sync nor logged, and the cluster stays connected.
func TestASyncCutShortIsNotRedisFailing(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a", false)
	a.sync()
	a.calls(6, fail) // an open to claim: the flush has work too
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.c.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with a cancelled context returned %v, want context.Canceled", err)
	}
	if n, warn := a.l.failed.Load(), a.l.warnings.Load(); n != 0 || warn != 0 || !a.c.Connected() || !a.l.connected.Load() {
		t.Errorf("after a cancelled sync: %d failed syncs, %d warnings, connected %v (listener %v); want 0, 0, still connected",
			n, warn, a.c.Connected(), a.l.connected.Load())
	}
	a.sync() // the open still pending is claimed now
	b := w.pod("b", false)
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
}
