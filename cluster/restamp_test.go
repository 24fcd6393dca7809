package cluster_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A window that did not move is not rewritten at every sync: these tests
// count what a pod sends (a go-redis hook) and read what its peers read,
// on the fake clock.

// sent is one command a client sent, and when by the pods' clock.
type sent struct {
	name string // lower case
	args []any
	at   time.Time
}

func (s sent) key() string {
	if len(s.args) < 2 {
		return ""
	}
	k, _ := s.args[1].(string)
	return k
}

// recorder is a go-redis hook that records every command its client sends.
type recorder struct {
	clk  *resiliencetest.Clock
	mu   sync.Mutex
	list []sent
}

func record(p *pod, clk *resiliencetest.Clock) *recorder {
	r := &recorder{clk: clk}
	p.rdb.AddHook(r)
	return r
}

func (r *recorder) add(cmds ...redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		r.list = append(r.list, sent{name: strings.ToLower(c.Name()), args: c.Args(), at: r.clk.Now()})
	}
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.add(cmd)
		return next(ctx, cmd)
	}
}
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.add(cmds...)
		return next(ctx, cmds)
	}
}

// take returns the commands sent since the last take.
func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list = nil
	return out
}

// count returns how many of list are name on key ("" for any key).
func count1(list []sent, name, key string) int {
	n := 0
	for _, s := range list {
		if s.name == name && (key == "" || s.key() == key) {
			n++
		}
	}
	return n
}

// field reads an instance's field of the window hash: its counts and its
// at, or ok false when it has none.
func field(t *testing.T, rdb *redis.Client, inst string) (counts string, at int64, ok bool) {
	t.Helper()
	v, err := rdb.HGet(t.Context(), "test:w:svc", inst).Result()
	if err == redis.Nil {
		return "", 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(v, ' ')
	j := strings.LastIndexByte(v[:i], ' ')
	at, err = strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("field %q: %v", v, err)
	}
	return v[:j], at, true
}

// An idle window is written at one sync, not at the next, and re-stamped
// (HSET with the new time, PEXPIRE of the hash) at the one after: k = 2.
// Every sync still reads the hash and the open record, and writes the
// pod's presence key.
func TestAnIdleWindowIsRestampedEverySecondSync(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a := w.pod("a", false)
	rec := record(a, w.clk)
	a.calls(3, ok)
	a.sync()
	written := w.clk.Now()
	if got := rec.take(); count1(got, "hset", "test:w:svc") != 1 || count1(got, "pexpire", "test:w:svc") != 1 {
		t.Fatalf("first sync sent %v: want the window written", names(got))
	}
	for round := 1; round <= 8; round++ {
		w.clk.Advance(interval)
		a.sync()
		got := rec.take()
		restamp := round%2 == 0
		wantWrites := 0
		if restamp {
			wantWrites, written = 1, w.clk.Now()
		}
		for _, c := range []struct {
			name, key string
			want      int
		}{
			{"hset", "test:w:svc", wantWrites},
			{"pexpire", "test:w:svc", wantWrites},
			{"hscan", "test:w:svc", 1},
			{"getrange", "test:open:svc", 1},
			{"set", "test:alive:a", 1},
		} {
			if n := count1(got, c.name, c.key); n != c.want {
				t.Fatalf("sync %d sent %d %s %s, want %d (all: %v)", round, n, c.name, c.key, c.want, names(got))
			}
		}
		if want := 3 + 2*wantWrites; len(got) != want {
			t.Fatalf("sync %d sent %d commands, want %d: %v", round, len(got), want, names(got))
		}
		counts, at, ok := field(t, admin, "a")
		if !ok || counts != "3 0 0" || at != written.UnixMilli() {
			t.Fatalf("after sync %d a's field is %q at %d (present %v), want \"3 0 0\" at %d", round, counts, at, ok, written.UnixMilli())
		}
		if ttl := admin.PTTL(t.Context(), "test:alive:a").Val(); ttl <= 0 || ttl > 3*interval {
			t.Fatalf("presence key TTL %v, want (0, %v]", ttl, 3*interval)
		}
	}
}

func names(list []sent) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.name + " " + s.key()
	}
	return out
}

// A window that moved is written at the very next sync, whatever the
// re-stamping rhythm; a breaker that leaves CLOSED deletes its field at
// once, and only once.
func TestAChangedWindowIsWrittenAtTheNextSync(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(a *pod)
		want   string // a's field after the sync: counts, or "" for none
	}{
		{name: "a failure", change: func(a *pod) { a.calls(1, fail) }, want: "4 1 0"},
		{name: "a success", change: func(a *pod) { a.calls(1, ok) }, want: "4 0 0"},
		{name: "a reset", change: func(a *pod) { a.b.Reset() }, want: "0 0 0"},
		{name: "an open", change: func(a *pod) { a.calls(6, fail) }, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			a := w.pod("a", false)
			rec := record(a, w.clk)
			a.calls(3, ok)
			a.sync() // written: the next sync would not rewrite it
			rec.take()
			w.clk.Advance(interval)
			tt.change(a)
			a.sync()
			got := rec.take()
			counts, _, present := field(t, admin, "a")
			if tt.want == "" {
				a.wantState(circuitbreaker.StateOpen)
				if present || count1(got, "hdel", "test:w:svc") != 1 {
					t.Fatalf("open: a's field present %v after %v; want it deleted", present, names(got))
				}
				for range 3 {
					w.clk.Advance(interval)
					rec.take()
					a.sync()
					if got := rec.take(); count1(got, "hdel", "test:w:svc")+count1(got, "hscan", "test:w:svc") != 0 {
						t.Fatalf("an open breaker sent %v: its field is deleted already, and its peers' windows decide nothing", names(got))
					}
				}
				return
			}
			if count1(got, "hset", "test:w:svc") != 1 || !present || counts != tt.want {
				t.Fatalf("sent %v; a's field %q (present %v), want %q written", names(got), counts, present, tt.want)
			}
		})
	}
}

// Whatever happens to the field (a peer deleted it, the hash expired or was
// repaired, Redis restarted empty), the pod writes it again within two
// syncs; in between its peers do not count it.
func TestALostFieldIsWrittenAgainWithinTwoSyncs(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a := w.pod("a", false)
	a.calls(3, ok)
	a.sync()
	admin.Del(t.Context(), "test:w:svc")
	w.clk.Advance(interval)
	a.sync()
	if _, _, ok := field(t, admin, "a"); ok {
		t.Fatal("the field is back after one sync: the test does not test the second")
	}
	w.clk.Advance(interval)
	a.sync()
	if counts, _, ok := field(t, admin, "a"); !ok || counts != "3 0 0" {
		t.Fatalf("a's field %q (present %v) after two syncs, want \"3 0 0\"", counts, ok)
	}
}

// A peer counts an idle pod's window at every sync, however the syncs are
// spaced in these patterns (each gap after a skipped write below two
// intervals; docs/cluster.md says where a later one loses), and the window
// hash's TTL, renewed by the idle pod alone, never runs out: the age of the
// field a peer reads and the time between two renewals stay below the
// three intervals of the horizon.
func TestAnIdleWindowNeverLooksStaleNorExpires(t *testing.T) {
	i := func(tenths int) time.Duration { return interval * time.Duration(tenths) / 10 }
	for _, tt := range []struct {
		name   string
		gaps   []time.Duration // between syncs, in turn
		maxAge time.Duration   // of a's field when b reads it, and between a's renewals
	}{
		{name: "every interval", gaps: []time.Duration{i(10)}, maxAge: i(20)},                   // re-stamped every second sync
		{name: "every 1.2 intervals", gaps: []time.Duration{i(12)}, maxAge: i(24)},              // every second sync
		{name: "every 1.3 intervals", gaps: []time.Duration{i(13)}, maxAge: i(13)},              // 2.6 would pass 2.5: every sync
		{name: "every 2 intervals", gaps: []time.Duration{i(20)}, maxAge: i(20)},                // every sync
		{name: "every 2.9 intervals", gaps: []time.Duration{i(29)}, maxAge: i(29)},              // every sync, as before
		{name: "one late, one early", gaps: []time.Duration{i(16), i(4), i(10)}, maxAge: i(16)}, // the second sync after a late one re-stamps
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			admin := w.admin()
			a := w.pod("a", false)
			// b decides on the cluster only: its 5 failures of 6 open it
			// unless a's 10 successes count (5 of 16).
			b := w.pod("b", false, decideOn(cluster.DecideCluster))
			b.rdb.AddHook(new(noWindowWrites)) // so that only a renews the hash
			rec := record(a, w.clk)
			b.sync() // b decides on the cluster's counts from now on
			a.calls(10, ok)
			b.calls(5, fail)
			b.calls(1, ok)
			a.sync()
			renewed := w.clk.Now()
			var maxAge, maxRenewal time.Duration
			for round := range 42 {
				w.clk.Advance(tt.gaps[round%len(tt.gaps)])
				_, at, present := field(t, admin, "a")
				age := w.clk.Now().Sub(time.UnixMilli(at))
				if !present || age >= 3*interval {
					t.Fatalf("round %d: a's field present %v, %v old: b would not count it", round, present, age)
				}
				maxAge = max(maxAge, age)
				b.sync() // before a re-stamps: the oldest b can read
				b.wantState(circuitbreaker.StateClosed)
				a.sync()
				for _, s := range rec.take() {
					if s.name != "pexpire" || s.key() != "test:w:svc" {
						continue
					}
					if px, _ := s.args[2].(int64); px != (3 * interval).Milliseconds() {
						t.Fatalf("PEXPIRE %v, want %d ms", s.args, (3 * interval).Milliseconds())
					}
					maxRenewal = max(maxRenewal, s.at.Sub(renewed))
					renewed = s.at
				}
				if w.clk.Now().Sub(renewed) >= 3*interval {
					t.Fatalf("round %d: the hash's TTL, renewed %v ago, would have run out", round, w.clk.Now().Sub(renewed))
				}
				if ttl := admin.PTTL(t.Context(), "test:w:svc").Val(); ttl <= 0 {
					t.Fatalf("round %d: the window hash has TTL %v", round, ttl)
				}
			}
			if maxAge != tt.maxAge || maxRenewal != tt.maxAge {
				t.Fatalf("b read a's field up to %v old, a renewed the hash up to %v apart; want %v both", maxAge, maxRenewal, tt.maxAge)
			}
		})
	}
}

// noWindowWrites drops a client's writes to the window hash: its pod reads
// its peers' windows and publishes none.
type noWindowWrites struct{}

func (noWindowWrites) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (noWindowWrites) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (noWindowWrites) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		kept := cmds[:0:0]
		for _, c := range cmds {
			if n := c.Name(); n == "hset" || n == "pexpire" {
				continue
			}
			kept = append(kept, c)
		}
		return next(ctx, kept)
	}
}

// One sync of 1,000 idle breakers sends 2 commands per breaker, and one
// that re-stamps them 4: 3,001 a sync on average, where every sync sent
// 4,000 before; busy breakers still send 4 each.
func TestCommandsPerSyncOfAThousandBreakers(t *testing.T) {
	const n = 1000
	for _, tt := range []struct {
		name  string
		busy  bool
		syncs [2]int // commands sent by two syncs in a row
	}{
		{name: "idle", syncs: [2]int{1 + 2*n, 1 + 4*n}},
		{name: "busy", busy: true, syncs: [2]int{1 + 4*n, 1 + 4*n}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			bs := make([]*circuitbreaker.Breaker, n)
			for i := range bs {
				b, err := circuitbreaker.New(circuitbreaker.WithName("svc"+strconv.Itoa(i)), circuitbreaker.WithClock(w.clk))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				bs[i] = b
			}
			// The test counts commands, not time: a sync of 4,000 commands
			// under -race on two busy cores took more than the default
			// 500 ms bound once, and failed.
			c, err := cluster.New(rdb, clusterConf(func(c *cluster.Config) { c.SyncInterval, c.Timeout = time.Second, time.Minute }), cluster.WithClock(w.clk), cluster.WithInstanceID("a"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close) // before the breakers and the client
			for _, b := range bs {
				c.Add(b)
			}
			rec := &recorder{clk: w.clk}
			rdb.AddHook(rec)
			if err := c.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			rec.take()
			for i, want := range tt.syncs {
				w.clk.Advance(interval)
				if tt.busy {
					for _, b := range bs {
						_ = b.Execute(context.Background(), func(context.Context) error { return nil })
					}
				}
				if err := c.Sync(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got := len(rec.take()); got != want {
					t.Fatalf("sync %d sent %d commands, want %d", i+1, got, want)
				}
			}
		})
	}
}
