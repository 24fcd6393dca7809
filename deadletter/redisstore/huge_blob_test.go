package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// replySizes is a go-redis hook that keeps the largest reply a command
// brought back, in bytes of its strings.
type replySizes struct {
	mu      sync.Mutex
	largest int
	by      string
}

func (h *replySizes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replySizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.note(cmd)
		return err
	}
}

func (h *replySizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.note(c)
		}
		return err
	}
}

func (h *replySizes) note(cmd redis.Cmder) {
	n := 0
	switch c := cmd.(type) {
	case *redis.Cmd:
		n = size(c.Val())
	case *redis.StringCmd:
		n = len(c.Val())
	case *redis.SliceCmd:
		n = size(c.Val())
	case *redis.ScanCmd:
		keys, _ := c.Val()
		for _, k := range keys {
			n += len(k)
		}
	case *redis.XMessageSliceCmd:
		for _, m := range c.Val() {
			for k, v := range m.Values {
				n += len(k) + size(v)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > h.largest {
		h.largest, h.by = n, cmd.Name()
	}
}

func size(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case []any:
		n := 0
		for _, x := range v {
			n += size(x)
		}
		return n
	}
	return 0
}

// A waiting entry that is a huge blob (hostile, written by hand: the store
// never appends more than an entry's bound, 17 MiB): the refresh of the
// key's figures after every round (Stats, for the oldest entry's age) and
// the replay's Next read it whole, up to Redis's 512 MiB a value, into the
// client's memory, twice over once decoded — though a blob that size is no
// entry, which its length alone says. Both now read at most an entry's
// head of it: Stats takes no age from it, and Next drops it (counted) as
// an entry it cannot decode, its size the reason.
func TestRedisAHugeBlobIsNeverReadWhole(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "huge")
	good := entry(1)
	if err := s.Append(ctx, good, lim); err != nil { // creates the stream and its group
		t.Fatal(err)
	}
	w := "huge:dl:{" + good.Key + "}:w"
	blob := "\xd1\x01" + strings.Repeat("x", 24<<20)
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"e", blob}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, entry(2), lim); err != nil {
		t.Fatal(err)
	}
	// The first entry replayed, the blob is the head.
	l, err := s.Lease(ctx, good.Key, "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	if e, ok, err := l.Next(ctx); err != nil || !ok || e.ID != good.ID {
		t.Fatalf("next: %+v %v %v", e, ok, err)
	} else if err := l.Ack(ctx, e); err != nil {
		t.Fatal(err)
	}
	hook := &replySizes{}
	rdb.AddHook(hook)
	st, err := s.Stats(ctx, good.Key)
	if err != nil || st.Waiting != 2 || !st.Oldest.IsZero() {
		t.Fatalf("stats: %+v, %v; want 2 waiting, no age from the blob", st, err)
	}
	if hook.largest > 1<<20 {
		t.Fatalf("stats: %s brought back %d bytes: the blob, read whole", hook.by, hook.largest)
	}
	_, _, err = l.Next(ctx)
	var ce *deadletter.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("next on the blob: %v, want a CorruptError", err)
	}
	if e, ok, err := l.Next(ctx); err != nil || !ok || e.ID != "e002" {
		t.Fatalf("next after the blob: %+v %v %v", e, ok, err)
	}
	if hook.largest > 1<<20 {
		t.Fatalf("next: %s brought back %d bytes: the blob, read whole", hook.by, hook.largest)
	}
}
