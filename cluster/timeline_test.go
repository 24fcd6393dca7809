package cluster_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// syncUntil syncs p until a sync succeeds, or fails the test after 10 s;
// it returns the syncs it took.
func (p *pod) syncUntil() int {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := 1; ; n++ {
		if p.c.Sync(p.t.Context()) == nil {
			return n
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: Sync still failing after 10s", p.c.InstanceID())
		}
	}
}

// A read-only Redis (a replica of a master that is gone) answers every
// write with READONLY: the breakers decide locally, logged once, and share
// again at the first sync once it is writable.
func TestARedisReadOnlyOverTime(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a, b := w.pod("a", false), w.pod("b", false)
	a.sync()
	b.sync()
	if err := admin.Do(t.Context(), "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		err := a.c.Sync(t.Context())
		if err == nil || !strings.Contains(err.Error(), "READONLY") {
			t.Fatalf("Sync against a read-only Redis: %v, want its READONLY error", err)
		}
		_ = b.c.Sync(t.Context())
	}
	if a.c.Connected() || a.l.warnings.Load() != 1 || a.l.failed.Load() != 5 {
		t.Fatalf("connected %v, %d warnings, %d failed; want local, logged once, 5 failed", a.c.Connected(), a.l.warnings.Load(), a.l.failed.Load())
	}
	a.calls(6, fail)
	a.wantState(circuitbreaker.StateOpen)
	for range 3 {
		_ = a.c.Sync(t.Context())
		_ = b.c.Sync(t.Context())
	}
	b.wantState(circuitbreaker.StateClosed)
	b.calls(6, ok)
	b.wantState(circuitbreaker.StateClosed)
	if a.l.warnings.Load() != 1 {
		t.Fatalf("%d warnings", a.l.warnings.Load())
	}
	if err := admin.Do(t.Context(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if n := a.syncUntil(); n != 1 {
		t.Errorf("a shared again after %d syncs, want 1", n)
	}
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
}

// FLUSHALL between syncs: the open record, the windows and the presence
// keys vanish; the pods keep their states, write their fields again, and
// a new open is shared at once.
func TestFlushAllBetweenSyncs(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a, b, c := w.pod("a", false), w.pod("b", false), w.pod("c", false)
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	a.calls(6, fail)
	a.sync()
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
	admin.FlushAll(t.Context())
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	c.wantState(circuitbreaker.StateClosed) // the open is lost with its record
	b.wantState(circuitbreaker.StateOpen)   // what it adopted stays
	w.clk.Advance(openWait)
	// probes: leases vanished with the flush too
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	if n := a.calls(2, ok) + b.calls(2, ok); n == 0 {
		t.Fatal("no probe ran after the flush")
	}
	for range 3 {
		for _, p := range []*pod{a, b, c} {
			p.sync()
		}
		a.calls(2, ok)
		b.calls(2, ok)
	}
	a.wantState(circuitbreaker.StateClosed)
	b.wantState(circuitbreaker.StateClosed)
	// windows: 3 failures on a, flushed, then 3 on c: the cluster's 6 open.
	a.calls(3, fail)
	a.sync()
	admin.FlushAll(t.Context())
	c.calls(3, fail)
	for range 2 {
		a.sync()
		c.sync()
	}
	c.wantState(circuitbreaker.StateOpen)
}

// A Redis stopped (SIGSTOP) for longer than several sync intervals: the
// pods go local at the timeout, logged once; when it resumes the replies
// that waited are not acted on and the pods share again within a sync or
// two.
func TestARedisPausedOverTime(t *testing.T) {
	w := newWorld(t)
	conf := clusterConf(func(c *cluster.Config) { c.Timeout = 200 * time.Millisecond })
	// go-redis waits for its ReadTimeout, not the context, on a reply
	client := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	}
	a, b := w.podClient("a", false, client(), nil, conf), w.podClient("b", false, client(), nil, conf)
	a.sync()
	b.sync()
	w.srv.Pause()
	for range 3 {
		w.clk.Advance(interval)
		_ = a.c.Sync(t.Context())
		_ = b.c.Sync(t.Context())
	}
	if a.c.Connected() || a.l.warnings.Load() != 1 {
		t.Fatalf("connected %v, %d warnings", a.c.Connected(), a.l.warnings.Load())
	}
	a.calls(6, fail)
	a.wantState(circuitbreaker.StateOpen)
	b.wantState(circuitbreaker.StateClosed)
	w.srv.Resume()
	na, nb := a.syncUntil(), b.syncUntil()
	if na > 2 || nb > 2 {
		t.Errorf("shared again after %d and %d syncs, want at most 2", na, nb)
	}
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
	if a.l.warnings.Load() != 1 || b.l.warnings.Load() != 1 {
		t.Fatalf("warnings a %d b %d", a.l.warnings.Load(), b.l.warnings.Load())
	}
}

// Running pods (their own loops, a sync every 20 ms) against a Redis
// stopped for many sync intervals: no goroutine piles up, the outage is
// logged once per pod, and they share again once it resumes.
func TestRunningPodsAcrossAPause(t *testing.T) {
	w := newWorld(t)
	conf := clusterConf(func(c *cluster.Config) { c.SyncInterval = 20 * time.Millisecond; c.Timeout = 100 * time.Millisecond })
	client := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1, ReadTimeout: 150 * time.Millisecond})
	}
	a, b := w.podClient("a", true, client(), nil, conf), w.podClient("b", true, client(), nil, conf)
	eventually(t, "connected", func() bool { return a.c.Connected() && b.c.Connected() })
	before := runtime.NumGoroutine()
	warnA, warnB := a.l.warnings.Load(), b.l.warnings.Load()
	w.srv.Pause()
	eventually(t, "local", func() bool { return !a.c.Connected() && !b.c.Connected() })
	a.calls(6, fail)
	a.wantState(circuitbreaker.StateOpen)
	eventually(t, "failed syncs", func() bool { return a.l.failed.Load() >= 4 })
	if n := runtime.NumGoroutine(); n > before+4 {
		t.Errorf("%d goroutines while paused, %d before", n, before)
	}
	if a.l.warnings.Load() != warnA+1 || b.l.warnings.Load() != warnB+1 {
		t.Errorf("warnings during the pause: a %d b %d, want 1 each", a.l.warnings.Load()-warnA, b.l.warnings.Load()-warnB)
	}
	w.srv.Resume()
	eventually(t, "b adopts a's open", func() bool { return b.b.State() == circuitbreaker.StateOpen })
}

// Running pods against a Redis that answers every write with an error
// (read-only, out of memory): local decisions, logged once per pod, no
// repair logged, and sharing again once it accepts writes.
func TestRunningPodsAgainstARedisRefusingWrites(t *testing.T) {
	for _, tt := range []struct {
		name    string
		on, off [][]any
	}{
		{name: "read-only", on: [][]any{{"REPLICAOF", "127.0.0.1", "1"}}, off: [][]any{{"REPLICAOF", "NO", "ONE"}}},
		{name: "out of memory", on: [][]any{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}},
			off: [][]any{{"CONFIG", "SET", "maxmemory", "0"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			// A timeout far above the interval: refusals come at once, and a
			// sync late on busy cores must not count as an outage of its own.
			conf := clusterConf(func(c *cluster.Config) { c.SyncInterval = 20 * time.Millisecond; c.Timeout = time.Second })
			a, b := w.pod("a", true, conf), w.pod("b", true, conf)
			eventually(t, "connected", func() bool { return a.c.Connected() && b.c.Connected() })
			for _, cmd := range tt.on {
				if err := admin.Do(t.Context(), cmd...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "local", func() bool { return !a.c.Connected() && !b.c.Connected() })
			a.calls(6, fail)
			a.wantState(circuitbreaker.StateOpen)
			eventually(t, "failed syncs", func() bool { return a.l.failed.Load() >= 10 && b.l.failed.Load() >= 10 })
			b.wantState(circuitbreaker.StateClosed)
			for _, cmd := range tt.off {
				if err := admin.Do(t.Context(), cmd...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "b adopts a's open", func() bool { return b.b.State() == circuitbreaker.StateOpen })
			if a.l.warnings.Load() != 1 || b.l.warnings.Load() != 1 || a.l.repairs.Load()+b.l.repairs.Load() != 0 {
				t.Errorf("warnings a %d b %d, repairs %d %d; want 1, 1, 0, 0", a.l.warnings.Load(), b.l.warnings.Load(), a.l.repairs.Load(), b.l.repairs.Load())
			}
		})
	}
}
