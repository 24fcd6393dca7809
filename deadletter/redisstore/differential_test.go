package redisstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

// The two durable stores side by side: one random script of operations
// (appends under both bounds, replay cycles that ack, fail, park and
// expire, listings, requeues and purges, close and reopen of the file, a
// crash and restart of a persistent Redis) is played against a bbolt store
// and a Redis store, and each step's answer, the entries in their order and
// the figures are compared. The stores differ where the contract lets them
// (positions, Keys of a key that held entries once), nowhere else.

// diffKeys are the keys the script uses.
var diffKeys = []string{"a", "b"}

type diffRun struct {
	t     *testing.T
	rnd   *rand.Rand
	srv   *redistest.Server
	rdb   *redis.Client
	path  string
	ns    string
	bolt  deadletter.Store
	redis deadletter.Store
	now   time.Time
	seq   int
	ids   []string // every ID appended so far
	log   []string // the steps so far, for the failure message
}

func TestStoresAgreeOnRandomScripts(t *testing.T) {
	srv := redistest.Start(t, redistest.Persistent())
	rdb := client(t, srv)
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := &diffRun{
				t: t, rnd: rand.New(rand.NewPCG(seed, seed)), srv: srv, rdb: rdb,
				path: filepath.Join(t.TempDir(), "dl.db"), ns: fmt.Sprint("diff", seed),
				now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			}
			r.open()
			defer func() { _ = r.bolt.Close(); _ = r.redis.Close() }()
			restarts := 0
			for step := range 150 {
				r.step(step, &restarts)
				if t.Failed() {
					t.Fatalf("steps:\n%s", strings.Join(r.log, "\n"))
				}
			}
		})
	}
}

func (r *diffRun) open() {
	r.t.Helper()
	b, err := boltstore.Open(r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	s, err := redisstore.New(r.rdb, redisstore.WithNamespace(r.ns))
	if err != nil {
		r.t.Fatal(err)
	}
	r.bolt, r.redis = b, s
}

func (r *diffRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *diffRun) entry(key string) deadletter.Entry {
	r.seq++
	e := deadletter.Entry{
		ID: fmt.Sprintf("id%03d", r.seq), Key: key, Method: "/pkg.Svc/M",
		Payload: make([]byte, r.rnd.IntN(300)), Enqueued: r.now,
	}
	for i := range e.Payload {
		e.Payload[i] = byte(r.rnd.IntN(256))
	}
	if r.rnd.IntN(3) == 0 {
		e.Metadata = map[string][]string{"x-request-id": {fmt.Sprint(r.seq)}, "x-bin": {"\x00\xff"}}
	}
	return e
}

// class names an error for comparison: the stores word them differently.
func class(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, deadletter.ErrFull):
		return "full"
	case errors.Is(err, deadletter.ErrNotFound):
		return "notfound"
	case errors.Is(err, deadletter.ErrLeased):
		return "leased"
	case errors.Is(err, deadletter.ErrLeaseLost):
		return "leaselost"
	}
	return "other: " + err.Error()
}

func (r *diffRun) same(what string, b, s error) {
	r.t.Helper()
	if class(b) != class(s) {
		r.t.Errorf("%s: bolt %v, redis %v", what, b, s)
	}
	if b != nil && class(b) == "other: "+b.Error() {
		r.t.Errorf("%s: %v", what, b)
	}
}

// show is an entry without its position, which differs by design.
func show(e deadletter.Entry) string {
	return fmt.Sprintf("%s/%s replays=%d enq=%s md=%v payload=%x", e.ID, e.Key, e.Replays,
		e.Enqueued.UTC().Format(time.RFC3339Nano), e.Metadata, e.Payload)
}

func shows(es []deadletter.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = show(e)
	}
	return out
}

func (r *diffRun) step(step int, restarts *int) {
	t := r.t
	ctx := t.Context()
	key := diffKeys[r.rnd.IntN(len(diffKeys))]
	r.now = r.now.Add(time.Duration(r.rnd.IntN(5000)) * time.Millisecond)
	switch op := r.rnd.IntN(20); {
	case op < 7: // append under bounds that the script reaches
		e := r.entry(key)
		lim := deadletter.Limits{MaxEntries: 3 + r.rnd.IntN(6), MaxBytes: int64(400 + r.rnd.IntN(1500))}
		r.logf("%d append %s %s len=%d lim=%+v", step, key, e.ID, len(e.Payload), lim)
		eb, es := r.bolt.Append(ctx, e, lim), r.redis.Append(ctx, e, lim)
		r.same("append", eb, es)
		if eb == nil {
			r.ids = append(r.ids, e.ID)
		}
	case op < 12: // a replay cycle: a few heads, each acked, failed or expired
		maxReplays := 1 + r.rnd.IntN(3)
		lb, errb := r.bolt.Lease(ctx, key, "owner", time.Minute)
		ls, errs := r.redis.Lease(ctx, key, "owner", time.Minute)
		r.same("lease", errb, errs)
		if errb != nil || errs != nil {
			return
		}
		defer func() { _ = lb.Release(ctx); _ = ls.Release(ctx) }()
		for range 1 + r.rnd.IntN(4) {
			hb, okb, errb := lb.Next(ctx)
			hs, oks, errs := ls.Next(ctx)
			r.same("next", errb, errs)
			if okb != oks || okb && show(hb) != show(hs) {
				t.Errorf("next of %s: bolt %v %s, redis %v %s", key, okb, show(hb), oks, show(hs))
				return
			}
			if !okb {
				r.logf("%d next %s: none", step, key)
				return
			}
			switch a := r.rnd.IntN(4); a {
			case 0, 1:
				r.logf("%d ack %s %s", step, key, hb.ID)
				r.same("ack", lb.Ack(ctx, hb), ls.Ack(ctx, hs))
			case 2:
				nb, pb, errb := lb.Fail(ctx, hb, maxReplays)
				ns, ps, errs := ls.Fail(ctx, hs, maxReplays)
				r.logf("%d fail %s %s max=%d → %d %v", step, key, hb.ID, maxReplays, nb, pb)
				r.same("fail", errb, errs)
				if nb != ns || pb != ps {
					t.Errorf("fail %s: bolt %d %v, redis %d %v", hb.ID, nb, pb, ns, ps)
				}
			case 3:
				r.logf("%d expire %s %s", step, key, hb.ID)
				r.same("expire", lb.Expire(ctx, hb), ls.Expire(ctx, hs))
			}
		}
	case op < 14: // requeue or purge a parked entry (or an unknown ID)
		id := "nope"
		parked, _ := r.bolt.List(ctx, key, deadletter.Parked, "", deadletter.MaxList)
		switch c := r.rnd.IntN(5); {
		case c < 3 && len(parked) > 0: // mostly one that is parked
			id = parked[r.rnd.IntN(len(parked))].ID
		case c < 4 && len(r.ids) > 0: // or any, waiting or gone
			id = r.ids[r.rnd.IntN(len(r.ids))]
		}
		if r.rnd.IntN(2) == 0 {
			r.logf("%d requeue %s %s", step, key, id)
			r.same("requeue", r.bolt.Requeue(ctx, key, id, r.now), r.redis.Requeue(ctx, key, id, r.now))
		} else {
			r.logf("%d purge %s %s", step, key, id)
			r.same("purge", r.bolt.Purge(ctx, key, id), r.redis.Purge(ctx, key, id))
		}
	case op < 15 && *restarts < 2: // close and reopen: the file, and Redis after a crash
		*restarts++
		r.logf("%d reopen", step)
		_ = r.bolt.Close()
		_ = r.redis.Close()
		r.srv.Kill()
		r.srv.Restart()
		r.open()
	case op < 17: // pages of a listing
		state := deadletter.State(r.rnd.IntN(2))
		n := 1 + r.rnd.IntN(3)
		r.same("list", r.compareList(key, state, n), nil)
	}
	r.compareAll()
}

// compareList pages through key's entries in state, n at a time, in both
// stores.
func (r *diffRun) compareList(key string, state deadletter.State, n int) error {
	ctx := r.t.Context()
	var all [2][]string
	for i, s := range []deadletter.Store{r.bolt, r.redis} {
		after := ""
		for range 100 {
			page, err := s.List(ctx, key, state, after, n)
			if err != nil {
				return err
			}
			all[i] = append(all[i], shows(page)...)
			if len(page) < n {
				break
			}
			after = page[len(page)-1].Pos
		}
	}
	if !slices.Equal(all[0], all[1]) {
		r.t.Errorf("list %s %s by %d:\nbolt  %v\nredis %v", key, state, n, all[0], all[1])
	}
	return nil
}

// compareAll compares every key's entries, both states, and figures.
func (r *diffRun) compareAll() {
	ctx := r.t.Context()
	for _, key := range diffKeys {
		for _, state := range []deadletter.State{deadletter.Waiting, deadletter.Parked} {
			eb, errb := r.bolt.List(ctx, key, state, "", deadletter.MaxList)
			es, errs := r.redis.List(ctx, key, state, "", deadletter.MaxList)
			r.same("list", errb, errs)
			if !slices.Equal(shows(eb), shows(es)) {
				r.t.Errorf("%s %s:\nbolt  %v\nredis %v", key, state, shows(eb), shows(es))
			}
		}
		sb, errb := r.bolt.Stats(ctx, key)
		ss, errs := r.redis.Stats(ctx, key)
		r.same("stats", errb, errs)
		if sb.Waiting != ss.Waiting || sb.Parked != ss.Parked || sb.Bytes != ss.Bytes || !sb.Oldest.Equal(ss.Oldest) {
			r.t.Errorf("stats of %s: bolt %+v, redis %+v", key, sb, ss)
		}
	}
	kb, errb := r.bolt.Keys(ctx)
	ks, errs := r.redis.Keys(ctx)
	r.same("keys", errb, errs)
	// Redis lists a key that held entries once; bbolt one that holds some.
	ks = slices.DeleteFunc(ks, func(k string) bool {
		st, err := r.redis.Stats(ctx, k)
		return err == nil && st.Waiting+st.Parked == 0
	})
	if !slices.Equal(kb, ks) {
		r.t.Errorf("keys: bolt %v, redis %v", kb, ks)
	}
}
