package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/internal/redistest"
)

// An operator lists a key to find the entries to requeue. list printed N
// rows (-n, 100 by default, at most 1000), those that do not decode
// among them: behind more unreadable entries than that, every page was
// unreadable rows, and the readable entries behind them did not show
// unless the operator paged on, with no sign that any were there. list
// now shows up to N readable entries, however many unreadable ones stand
// before them; the unreadable ones up to a bound (maxUnreadableShown)
// with their position and reason, and a count of the others with where
// they lie.
func TestListShowsTheReadableEntriesBehindManyUnreadableOnes(t *testing.T) {
	srv := redistest.Start(t)
	s, rdb := redisStore(t, srv.Addr(), "ops")
	t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
	fill(t, s, "pkg.Svc") // p0 and p1 parked
	ctx := context.Background()
	stream := "ops:dl:{pkg.Svc}:p"
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("parked stream: %v %v", msgs, err)
	}
	// 150 unreadable entries, then p0 and p1 again (moved behind them).
	var first, last string
	for i := range 150 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"e", "garbage", "r", "1"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if i == maxUnreadableShown {
			first = id
		}
		last = id
	}
	for _, m := range msgs {
		if err := rdb.XDel(ctx, stream, m.ID).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: m.Values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := cli("-redis", srv.Addr(), "-namespace", "ops", "list", "pkg.Svc", "parked")
	if code != 0 {
		t.Fatalf("list: exit %d, %q", code, stderr)
	}
	if !strings.Contains(out, "p0") || !strings.Contains(out, "p1") {
		t.Fatalf("list does not show the readable entries behind 150 unreadable ones:\n%s", out)
	}
	if n := strings.Count(out, "(unreadable)"); n != maxUnreadableShown {
		t.Errorf("list shows %d unreadable rows, want %d", n, maxUnreadableShown)
	}
	if !strings.Contains(out, "150 entries do not decode") || !strings.Contains(out, first) || !strings.Contains(out, last) {
		t.Errorf("list does not count the unreadable entries it does not show, from %s to %s:\n%s", first, last, out)
	}
	// -n counts the readable entries.
	code, out, _ = cli("-redis", srv.Addr(), "-namespace", "ops", "list", "pkg.Svc", "parked", "-n", "1")
	if code != 0 || !strings.Contains(out, "p0") || strings.Contains(out, "p1") {
		t.Errorf("list -n 1: exit %d, want p0 alone:\n%s", code, out)
	}
}
