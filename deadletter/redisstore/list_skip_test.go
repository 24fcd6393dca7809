package redisstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// List skips the entries that do not decode and fills its page from the
// ones behind them, however many: a short page means the end, and a
// caller pages on until one is short. List gave up after 16 stream reads,
// each of the entries still missing from the page: behind 16 unreadable
// entries (a page of 1) or 16 pages of them, it returned a short page, and
// an operator listing through q.List saw no entry, or stopped paging, while
// readable ones waited behind.
func TestRedisListSeesEveryReadableEntryBehindUnreadableOnes(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "skip")
	for _, state := range []deadletter.State{deadletter.Waiting, deadletter.Parked} {
		key := "k-" + state.String()
		stream := "skip:dl:{" + key + "}:w"
		if state == deadletter.Parked {
			stream = "skip:dl:{" + key + "}:p"
		}
		var want []string
		add := func(i int) {
			e := deadletter.Entry{ID: fmt.Sprintf("e%03d", i), Key: key, Payload: []byte("p"), Enqueued: time.Now()}
			blob, err := e.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"e", string(blob), "r", "2"}}).Err(); err != nil {
				t.Fatal(err)
			}
			want = append(want, e.ID)
		}
		garbage := func(n int) {
			for range n {
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"e", "garbage"}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		garbage(40)
		add(0)
		garbage(3)
		add(1)
		add(2)
		garbage(100)
		add(3)
		garbage(5)
		for _, n := range []int{1, 2, 3, 10} {
			var got []string
			after := ""
			for range 20 {
				es, err := s.List(ctx, key, state, after, n)
				if err != nil {
					t.Fatalf("%s, pages of %d: %v", state, n, err)
				}
				for _, e := range es {
					got = append(got, e.ID)
				}
				if len(es) < n {
					break
				}
				after = es[len(es)-1].Pos
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, pages of %d: listed %v, want %v", state, n, got, want)
			}
		}
	}
}
