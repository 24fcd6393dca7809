package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/internal/redistest"
)

// `requeue KEY -all` listed the parked entries, then requeued each by its
// ID, and the Redis store finds a parked entry by ID by reading the heads
// of the parked stream from its start, a page of 500 at a time: for N
// entries, Redis sent up to 500 heads per entry (O(N²) for N up to 500,
// then 500·N). It now requeues each entry at the position the listing
// gave: Redis sends each entry once for the listing's head and once whole.
func TestRequeueAllReadsEachEntryOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := t.Context()
	const n = 1000
	p := "adv:dl:{pkg.Svc}:p"
	payload := bytes.Repeat([]byte("x"), 100)
	var size int64
	for i := range n {
		blob, err := deadletter.Entry{ID: fmt.Sprintf("p%04d", i), Key: "pkg.Svc", Method: "/pkg.Svc/M",
			Payload: payload, Replays: 5, Enqueued: time.Now()}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		size += int64(len(blob))
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: p, Values: []any{"e", string(blob), "r", "5"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sent := func() int64 {
		info, err := rdb.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
				b, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatal("no total_net_output_bytes in INFO stats")
		return 0
	}
	before := sent()
	code, out, errOut := cli("-redis", srv.Addr(), "-namespace", "adv", "requeue", "pkg.Svc", "-all")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("requeued %d", n)) {
		t.Fatalf("requeue -all: exit %d, %q %q", code, out, errOut)
	}
	got := sent() - before
	if left, _ := rdb.XLen(ctx, p).Result(); left != 0 {
		t.Errorf("%d entries left parked", left)
	}
	if waiting, _ := rdb.XLen(ctx, "adv:dl:{pkg.Svc}:w").Result(); waiting != n {
		t.Errorf("%d entries waiting, want %d", waiting, n)
	}
	// Each entry whole once, its head once, and replies: 3x the entries'
	// size is ample; a search from the start read about 100x.
	if limit := 3 * size; got > limit {
		t.Errorf("Redis sent %d bytes for a requeue of %d entries of %d bytes in all, want at most %d", got, n, size, limit)
	}
}

// requeue -all, now by position, moves every parked entry back to the tail
// of the waiting ones, oldest first, as a requeue by ID does: its ID and
// payload kept, its failed replays back to 0; on either store.
func TestRequeueAllMovesEveryParkedEntryBack(t *testing.T) {
	for _, name := range []string{"bbolt file", "redis"} {
		t.Run(name, func(t *testing.T) {
			var (
				s     deadletter.Store
				flags []string
			)
			if name == "redis" {
				srv := redistest.Start(t)
				rs, rdb := redisStore(t, srv.Addr(), "ops")
				t.Cleanup(func() { _ = rs.Close(); _ = rdb.Close() })
				s, flags = rs, []string{"-redis", srv.Addr(), "-namespace", "ops"}
			} else {
				path := filepath.Join(t.TempDir(), "dl.db")
				bs, err := boltstore.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				s, flags = bs, []string{"-file", path}
			}
			fill(t, s, "pkg.Svc")
			if name == "bbolt file" {
				_ = s.Close() // the service is stopped: the command may open the file
			}
			step := func(args ...string) string {
				t.Helper()
				code, out, stderr := cli(append(append([]string{}, flags...), args...)...)
				if code != 0 {
					t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
				}
				return out
			}
			if out := step("requeue", "pkg.Svc", "-all"); out != "requeued 2\n" {
				t.Fatalf("requeue -all: %q", out)
			}
			if out := step("keys"); !strings.Contains(out, "pkg.Svc  4        0") {
				t.Fatalf("keys after requeue -all:\n%s", out)
			}
			out := step("list", "pkg.Svc", "waiting")
			order := []int{strings.Index(out, "w0"), strings.Index(out, "w1"), strings.Index(out, "p0"), strings.Index(out, "p1")}
			for i := 1; i < len(order); i++ {
				if order[i-1] < 0 || order[i] <= order[i-1] {
					t.Fatalf("the waiting entries are not w0, w1, p0, p1 in that order:\n%s", out)
				}
			}
			if out := step("show", "pkg.Svc", "p1"); !strings.Contains(out, "state:          waiting") ||
				!strings.Contains(out, `"payload p1"`) || !strings.Contains(out, "failed replays: 0") {
				t.Fatalf("show p1 after requeue -all:\n%s", out)
			}
		})
	}
}
