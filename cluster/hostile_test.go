package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
)

// Everything in the namespace may have been written by anyone: these tests
// plant bad content by hand in a real redis-server and want every sync to
// succeed, the bad key repaired, and the breakers to keep sharing.

// maxOwnWait is the test pods' longest open wait: the default
// maxWaitDurationInOpenState.
const maxOwnWait = 5 * time.Minute

// healthy wants p's syncs to have gone well throughout: Redis was never
// reported down, nothing was logged as a warning.
func (p *pod) healthy() {
	p.t.Helper()
	if !p.c.Connected() || p.l.failed.Load() != 0 || p.l.warnings.Load() != 0 {
		p.t.Fatalf("%s: connected %v, %d failed syncs, %d warnings; want connected, 0, 0",
			p.c.InstanceID(), p.c.Connected(), p.l.failed.Load(), p.l.warnings.Load())
	}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// admin is a client of the world's server, for planting and reading keys.
func (w *world) admin() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr()})
	w.t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestAWrongTypedKeyIsThatKeysProblem(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plant func(ctx context.Context, r *redis.Client) error
		key   string
		typ   string // what the key holds after the sync: the right type, or nothing
	}{
		{name: "window hash holds a string", key: "test:w:svc", typ: "hash",
			plant: func(ctx context.Context, r *redis.Client) error { return r.Set(ctx, "test:w:svc", "junk", 0).Err() }},
		{name: "window hash holds a list", key: "test:w:svc", typ: "hash",
			plant: func(ctx context.Context, r *redis.Client) error { return r.RPush(ctx, "test:w:svc", "junk").Err() }},
		{name: "open record holds a hash", key: "test:open:svc", typ: "string",
			plant: func(ctx context.Context, r *redis.Client) error { return r.HSet(ctx, "test:open:svc", "f", "v").Err() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			if err := tt.plant(t.Context(), admin); err != nil {
				t.Fatal(err)
			}
			a, b := w.pod("a", false), w.pod("b", false)
			b.calls(6, fail)
			b.wantState(circuitbreaker.StateOpen)
			// Every sync succeeds; the first of them repairs the key, the
			// open is claimed, published and adopted.
			for range 2 {
				b.sync()
				a.sync()
			}
			a.wantState(circuitbreaker.StateOpen)
			if !coord.Of(a.b).Window().Until.Equal(coord.Of(b.b).Window().Until) {
				t.Errorf("a opens until %v, b until %v", coord.Of(a.b).Window().Until, coord.Of(b.b).Window().Until)
			}
			a.healthy()
			b.healthy()
			if n := a.l.repairs.Load() + b.l.repairs.Load(); n < 1 {
				t.Error("no repair logged")
			}
			if typ := admin.Type(t.Context(), tt.key).Val(); typ != tt.typ && typ != "none" {
				t.Errorf("%s holds a %s after the syncs, want a %s or nothing", tt.key, typ, tt.typ)
			}
			// And the breakers still share counts: 3 + 3 failures open both.
			w.clk.Advance(maxOwnWait)
			a.b.Reset()
			b.b.Reset()
			a.calls(3, fail)
			b.calls(3, fail)
			for range 2 {
				a.sync()
				b.sync()
			}
			a.wantState(circuitbreaker.StateOpen)
			b.wantState(circuitbreaker.StateOpen)
			a.healthy()
		})
	}
}

func TestABadProbeLeaseIsThatKeysProblem(t *testing.T) {
	for _, tt := range []struct {
		name   string
		plant  func(ctx context.Context, r *redis.Client, key string) error
		probes int // probes the pod gets at its first lease
	}{
		{name: "a hash", probes: 2,
			plant: func(ctx context.Context, r *redis.Client, key string) error { return r.HSet(ctx, key, "f", "v").Err() }},
		{name: "not a number", probes: 2,
			plant: func(ctx context.Context, r *redis.Client, key string) error { return r.Set(ctx, key, "abc", 0).Err() }},
		{name: "past int64", probes: 2,
			plant: func(ctx context.Context, r *redis.Client, key string) error {
				return r.Set(ctx, key, "99999999999999999999999", 0).Err()
			}},
		{name: "every probe taken, forever", probes: 0, // taken: none now, but not for ever
			plant: func(ctx context.Context, r *redis.Client, key string) error { return r.Set(ctx, key, "7", 0).Err() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			a := w.pod("a", false)
			a.calls(6, fail)
			a.sync()
			key := "test:probes:svc:" + ms(coord.Of(a.b).Window().Until)
			if err := tt.plant(t.Context(), admin, key); err != nil {
				t.Fatal(err)
			}
			w.clk.Advance(openWait)
			a.wantState(circuitbreaker.StateHalfOpen)
			a.sync()
			a.healthy()
			if n := count(probes(5, a)); n != tt.probes {
				t.Fatalf("%d probes after the lease, want %d", n, tt.probes)
			}
			if ttl := admin.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > 3*interval {
				t.Fatalf("the lease key's TTL is %v, want (0, %v]: a planted lease must not outlive three sync intervals", ttl, 3*interval)
			}
		})
	}
}

func TestWindowsDatedInTheFutureAreIgnoredAndDeleted(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ahead   time.Duration
		counted bool
	}{
		{name: "10 minutes ahead", ahead: 10 * time.Minute, counted: false},
		{name: "two sync intervals ahead", ahead: 2 * interval, counted: false},
		{name: "within one sync interval", ahead: interval / 2, counted: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			a := w.pod("a", false)
			a.sync()
			at := w.clk.Now().Add(tt.ahead)
			admin.HSet(t.Context(), "test:w:svc", "ahead", "10 10 0 "+ms(at.Add(-time.Second))+" "+ms(at))
			a.calls(3, fail) // with the planted 10 failures: 13 of 13
			a.sync()
			a.healthy()
			want := circuitbreaker.StateClosed
			if tt.counted {
				want = circuitbreaker.StateOpen
			}
			a.wantState(want)
			a.sync()
			_, kept := admin.HGetAll(t.Context(), "test:w:svc").Val()["ahead"]
			if kept == !tt.counted {
				t.Fatalf("the window %v ahead is kept: %v; want it deleted exactly when it is not counted", tt.ahead, kept)
			}
		})
	}
}

func TestAPeersCountsAreCappedByWhatItsWindowHolds(t *testing.T) {
	timeBased := []circuitbreaker.Option{circuitbreaker.WithConfig(podConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowType = circuitbreaker.TimeBased
	})), circuitbreaker.WithName("svc")}
	for _, tt := range []struct {
		name       string
		bopts      []circuitbreaker.Option
		own        [2]int // a's failures, successes
		peer       string // calls failures slow
		wantOpen   bool
		whyCounted string
	}{
		// COUNT_BASED, slidingWindowSize 10: the liar weighs 10 calls.
		{name: "count: a billion successes", own: [2]int{10, 0}, peer: "1000000000 0 0", wantOpen: true,
			whyCounted: "10 failures of 10 + 10 (capped)"},
		{name: "count: a billion calls at 90% keep their rate", own: [2]int{0, 10}, peer: "1000000000 900000000 0", wantOpen: false,
			whyCounted: "9 failures of 10 (capped, rate kept) + 0 of 10: 45%"},
		{name: "count: an honest full window", own: [2]int{5, 5}, peer: "10 6 0", wantOpen: true,
			whyCounted: "5 + 6 failures of 20: 55%"},
		// TIME_BASED: the liar weighs as much as a's own window (8 calls).
		{name: "time: a billion successes", bopts: timeBased, own: [2]int{8, 0}, peer: "1000000000 0 0", wantOpen: true,
			whyCounted: "8 failures of 8 + 8 (capped)"},
		{name: "time: a small window counts whole", bopts: timeBased, own: [2]int{3, 0}, peer: "5 0 0", wantOpen: false,
			whyCounted: "3 failures of 3 + 5: 37%"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			a := w.podWith("a", false, tt.bopts, decideOn(cluster.DecideCluster))
			a.sync()
			now := w.clk.Now()
			admin.HSet(t.Context(), "test:w:svc", "liar", tt.peer+" "+ms(now.Add(-time.Second))+" "+ms(now))
			a.calls(tt.own[0], fail)
			a.calls(tt.own[1], ok)
			a.sync()
			a.healthy()
			want := circuitbreaker.StateClosed
			if tt.wantOpen {
				want = circuitbreaker.StateOpen
			}
			if got := a.b.State(); got != want {
				t.Fatalf("a is %v, want %v (%s)", got, want, tt.whyCounted)
			}
		})
	}
}

// A window hash stuffed with more fields than instances can share a key
// is dropped whole: read in one bounded reply, counted not at all.
func TestAStuffedWindowHashIsDropped(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a := w.pod("a", false, decideOn(cluster.DecideCluster))
	a.sync()
	now := w.clk.Now()
	fields := make([]any, 0, 2*2000)
	for i := range 2000 {
		fields = append(fields, "fake"+strconv.Itoa(i), "10 0 0 "+ms(now)+" "+ms(now))
	}
	if err := admin.HSet(t.Context(), "test:w:svc", fields...).Err(); err != nil {
		t.Fatal(err)
	}
	a.calls(10, fail)
	a.sync()
	a.healthy()
	a.wantState(circuitbreaker.StateOpen) // 2000 fake pods' successes would have hidden 10 failures
	if n := admin.HLen(t.Context(), "test:w:svc").Val(); n > cluster.MaxInstances {
		t.Fatalf("the window hash still has %d fields", n)
	}
}

func TestAnAdoptedOpenEndsWithinTheReadersLongestWait(t *testing.T) {
	far := func(w *world) string { return ms(w.clk.Now().Add(time.Hour)) + " 3 failure_rate evil" }
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, w *world, a *pod)
	}{
		{name: "open record", plant: func(t *testing.T, w *world, a *pod) {
			w.admin().Set(t.Context(), "test:open:svc", far(w), 0) // and no TTL
			a.sync()
		}},
		{name: "message", plant: func(t *testing.T, w *world, a *pod) {
			w.admin().Set(t.Context(), "test:open:svc", far(w), 0)
			cluster.Deliver(a.c, "o "+far(w)+" svc")
			a.sync()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a, b := w.pod("a", false), w.pod("b", false)
			a.sync()
			b.sync()
			tt.plant(t, w, a)
			a.wantState(circuitbreaker.StateOpen)
			a.healthy()
			limit := w.clk.Now().Add(maxOwnWait)
			if until := coord.Of(a.b).Window().Until; until.After(limit) {
				t.Fatalf("a opens until %v, %v from now; want at most its longest wait, %v", until, until.Sub(w.clk.Now()), maxOwnWait)
			}
			// The record keeps its content, its TTL bounded by a's longest
			// wait: it expires, and b, syncing later, agrees on the bound.
			if ttl := w.admin().PTTL(t.Context(), "test:open:svc").Val(); ttl <= 0 || ttl > maxOwnWait {
				t.Fatalf("the far record's TTL is %v, want at most a's longest wait %v", ttl, maxOwnWait)
			}
			b.sync()
			if !coord.Of(b.b).Window().Until.Equal(coord.Of(a.b).Window().Until) {
				t.Errorf("b opens until %v, a until %v", coord.Of(b.b).Window().Until, coord.Of(a.b).Window().Until)
			}
			// The wait ends, and the record does not hold a open again.
			w.clk.Advance(maxOwnWait)
			a.sync()
			a.wantState(circuitbreaker.StateHalfOpen)
			if n := count(probes(5, a)); n != 2 {
				t.Fatalf("%d probes once the bounded wait ended, want 2", n)
			}
		})
	}
}

// A record in force that no instance could have written (its end is past
// the claimer's longest wait) does not stop an open from being claimed and
// published.
func TestAFarOpenRecordDoesNotBlockClaims(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a, b := w.pod("a", false), w.pod("b", false)
	b.sync()
	admin.Set(t.Context(), "test:open:svc", ms(w.clk.Now().Add(time.Hour))+" 3 failure_rate evil", time.Hour)
	a.calls(6, fail)
	own := coord.Of(a.b).Window().Until
	a.sync()
	a.healthy()
	if got := coord.Of(a.b).Window().Until; !got.Equal(own) {
		t.Fatalf("a opens until %v after its claim, want its own %v", got, own)
	}
	if v := admin.Get(t.Context(), "test:open:svc").Val(); !strings.HasPrefix(v, ms(own)+" ") {
		t.Fatalf("the open record is %q, want a's", v)
	}
	b.sync()
	if got := coord.Of(b.b).Window().Until; !got.Equal(own) {
		t.Fatalf("b opens until %v, want a's %v", got, own)
	}
}

// A close message dated in the future would make every window older than
// it stale until that date: its date is bounded by the reader's clock.
func TestACloseFromTheFutureDoesNotStopCounting(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	a.calls(6, fail)
	a.sync() // a claims its open
	round := ms(coord.Of(a.b).Window().Until)
	cluster.Deliver(a.c, "c "+round+" "+ms(w.clk.Now().Add(time.Hour))+" evil svc")
	a.wantState(circuitbreaker.StateClosed) // anyone may close (docs/cluster.md)
	w.clk.Advance(openWait)                 // a's open record is over
	b.calls(3, fail)
	b.sync() // b's window: 3 failures; a's: none, so b does not decide
	b.wantState(circuitbreaker.StateClosed)
	a.calls(3, fail)
	a.sync() // 3 + b's 3 = 6 failures: minimumNumberOfCalls
	a.wantState(circuitbreaker.StateOpen)
}

// Errors that are Redis's and not one key's still mean Redis is away for
// the cluster: a Redis out of memory refuses every write.
func TestRedisRefusingWritesIsStillDown(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a := w.pod("a", false)
	a.sync()
	if err := admin.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	err := a.c.Sync(t.Context())
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("Sync against a Redis out of memory: %v, want its OOM error", err)
	}
	if a.c.Connected() || a.l.warnings.Load() != 1 {
		t.Fatalf("connected %v, %d warnings; want local decisions, logged once", a.c.Connected(), a.l.warnings.Load())
	}
	if err := admin.ConfigSet(t.Context(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	a.sync()
}

func TestAGarbageOpenRecordIsDeleted(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{name: "short", value: "not an open record"},
		{name: "long", value: strings.Repeat("9", 4096)},
		{name: "too many reopens", value: "99999999999999 65 failure_rate evil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			admin.Set(t.Context(), "test:open:svc", tt.value, 0)
			a := w.pod("a", false)
			a.sync()
			a.healthy()
			a.wantState(circuitbreaker.StateClosed)
			if n := admin.Exists(t.Context(), "test:open:svc").Val(); n != 0 {
				t.Fatalf("the garbage open record is still there")
			}
		})
	}
}

// Breaker names come from configuration: a long one makes bounded keys and
// messages, and the pods still share.
func TestLongBreakerNamesMakeBoundedKeys(t *testing.T) {
	w := newWorld(t)
	long := []circuitbreaker.Option{circuitbreaker.WithName(strings.Repeat("pkg.VeryLongServiceName", 500))}
	a, b := w.podWith("a", false, long), w.podWith("b", false, long)
	a.sync()
	b.sync()
	a.calls(6, fail)
	a.sync()
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
	keys := w.admin().Keys(t.Context(), "test:*").Val()
	if len(keys) < 2 {
		t.Fatalf("keys %q: want the window hash and the open record", keys)
	}
	for _, k := range keys {
		if len(k) > 160 {
			t.Errorf("a key of %d bytes: %.60q…", len(k), k)
		}
	}
}

// wrongType is a server's WRONGTYPE reply, as go-redis hands it over.
type wrongType struct{}

func (wrongType) Error() string {
	return "WRONGTYPE Operation against a key holding the wrong kind of value"
}
func (wrongType) RedisError() {}

// failFirstScript fails the first script a client runs with WRONGTYPE, as
// a script that reads a key of the wrong type would.
type failFirstScript struct{ done atomic.Bool }

func (h *failFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && h.done.CompareAndSwap(false, true) {
			cmd.SetErr(wrongType{})
			return wrongType{}
		}
		return next(ctx, cmd)
	}
}
func (h *failFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A script that fails on its key (the claim, the lease) is that key's
// problem: the key is deleted, the breaker's change stays pending and is
// acted on in the same sync, and Redis is not down.
func TestAScriptFailingOnItsKeyIsRepairedAndRetried(t *testing.T) {
	t.Run("claim", func(t *testing.T) {
		w := newWorld(t)
		a, b := w.pod("a", false), w.pod("b", false)
		w.admin().Set(t.Context(), "test:open:svc", "planted", 0)
		a.rdb.AddHook(new(failFirstScript))
		a.calls(6, fail)
		a.sync()
		a.healthy()
		if a.l.repairs.Load() != 1 {
			t.Fatalf("%d repairs logged, want 1", a.l.repairs.Load())
		}
		b.sync()
		if !coord.Of(b.b).Window().Until.Equal(coord.Of(a.b).Window().Until) {
			t.Fatalf("b opens until %v, a until %v: the claim was not retried", coord.Of(b.b).Window().Until, coord.Of(a.b).Window().Until)
		}
	})
	t.Run("lease", func(t *testing.T) {
		w := newWorld(t)
		a := w.pod("a", false)
		a.calls(6, fail)
		a.sync()
		w.admin().Set(t.Context(), "test:probes:svc:"+ms(coord.Of(a.b).Window().Until), "planted", 0)
		w.clk.Advance(openWait)
		a.rdb.AddHook(new(failFirstScript))
		a.sync()
		a.healthy()
		if n := count(probes(5, a)); n != 2 {
			t.Fatalf("%d probes after the sync, want 2: the lease was not retried", n)
		}
	})
}
