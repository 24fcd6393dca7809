package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlraw"
	"github.com/meshless/meshless/internal/redistest"
)

// Beside its entries' field e the store reads a few small values: a
// parked entry's failed replays (field r), a waiting one's (f:ID in the
// counters hash), the byte counter, the names in the set of keys. Each
// was read whole, though the store writes a number or a key there, as was
// every other field of a stream entry whose e it wanted: a hostile value
// of hundreds of MiB in any of them was read into the client by every
// listing, every refresh of the figures, every replay of the entry, every
// start. Each is now bounded in Redis before it is sent: a number of more
// than 32 bytes is none (zero), a name longer than any key is skipped,
// and a stream entry's other fields stay in Redis.
func TestRedisHugeValuesBesideTheEntriesAreNeverReadWhole(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "hv")
	huge := strings.Repeat("9", 24<<20)
	w, p, m := "hv:dl:{pkg.Svc}:w", "hv:dl:{pkg.Svc}:p", "hv:dl:{pkg.Svc}:m"
	// e000 parked with a huge r and a huge other field; e001 waiting with
	// a huge f:ID and a huge other field; a huge byte counter and key.
	if err := s.Append(ctx, entry(0), lim); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, entry(1), lim); err != nil {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(ctx, w, "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatal(msgs, err)
	}
	if err := rdb.XDel(ctx, w, msgs[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: p, Values: []any{"e", msgs[0].Values["e"], "r", huge, "x", huge}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XDel(ctx, w, msgs[1].ID).Err(); err != nil {
		t.Fatal(err)
	}
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"x", huge, "e", msgs[1].Values["e"]}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, m, "f:"+id, huge, "bytes", huge).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, "hv:dl:keys", huge).Err(); err != nil {
		t.Fatal(err)
	}

	hook := &replySizes{}
	rdb.AddHook(hook)
	check := func(what string) {
		t.Helper()
		if hook.largest > 1<<20 {
			t.Fatalf("%s: %s brought back %d bytes: a hostile value, read whole", what, hook.by, hook.largest)
		}
	}
	if keys, err := s.Keys(ctx); err != nil || len(keys) != 1 {
		t.Fatalf("keys: %q, %v", keys, err)
	}
	check("Keys")
	if _, err := s.Stats(ctx, "pkg.Svc"); err != nil {
		t.Fatal(err)
	}
	check("Stats")
	for _, state := range []deadletter.State{deadletter.Waiting, deadletter.Parked} {
		es, err := s.List(ctx, "pkg.Svc", state, "", 10)
		if err != nil || len(es) != 1 || es[0].Replays != 0 {
			t.Fatalf("list %s: %+v, %v", state, es, err)
		}
		check("List " + state.String())
		items, err := dlraw.Of(s).Scan(ctx, "pkg.Svc", state, "", 10)
		if err != nil || len(items) != 1 || items[0].Err != nil {
			t.Fatalf("scan %s: %+v, %v", state, items, err)
		}
		check("Scan " + state.String())
	}
	l, err := s.Lease(ctx, "pkg.Svc", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	if e, ok, err := l.Next(ctx); err != nil || !ok || e.ID != "e001" || e.Replays != 0 {
		t.Fatalf("next: %+v %v %v", e, ok, err)
	}
	check("Next")
	if err := s.Requeue(ctx, "pkg.Svc", "e000", time.Now()); err != nil {
		t.Fatal(err)
	}
	check("Requeue")
}
