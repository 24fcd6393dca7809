package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlraw"
	"github.com/meshless/meshless/internal/redistest"
)

// afterFirstScript is a go-redis hook that runs do once, after the first
// script call that succeeded (the listing's read of the entries' heads).
type afterFirstScript struct {
	once sync.Once
	do   func()
}

func (h *afterFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && strings.HasPrefix(cmd.Name(), "eval") {
			h.once.Do(h.do)
		}
		return err
	}
}

func (h *afterFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An entry whose head is longer than the part a listing reads first (big
// metadata) is read whole in a second step. When a replay removed it in
// between, List failed ("removed while it was read; read again"): an
// operator's q.List failed now and then while the key drained. The
// command's raw listing must say so (its page would be short), but List
// fills its page from the entries behind, and goes on.
func TestRedisListSkipsAnEntryRemovedWhileItIsRead(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "gone")
	for i := range 3 {
		e := entry(i)
		e.Metadata = map[string][]string{"x-big": {strings.Repeat("m", 4<<10)}}
		if err := s.Append(ctx, e, lim); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := rdb.XRange(ctx, "gone:dl:{pkg.Svc}:w", "-", "+").Result()
	if err != nil || len(msgs) != 3 {
		t.Fatal(msgs, err)
	}
	other := client(t, srv)
	rdb.AddHook(&afterFirstScript{do: func() {
		if err := other.XDel(context.WithoutCancel(ctx), "gone:dl:{pkg.Svc}:w", msgs[0].ID).Err(); err != nil {
			t.Error(err)
		}
	}})
	es, err := s.List(ctx, "pkg.Svc", deadletter.Waiting, "", 10)
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	if err != nil || !slices.Equal(ids, []string{"e001", "e002"}) {
		t.Fatalf("list while e000 is removed: %v, %v; want e001 e002", ids, err)
	}
	rdb.AddHook(&afterFirstScript{do: func() {
		if err := other.XDel(context.WithoutCancel(ctx), "gone:dl:{pkg.Svc}:w", msgs[1].ID).Err(); err != nil {
			t.Error(err)
		}
	}})
	if items, err := dlraw.Of(s).Scan(ctx, "pkg.Svc", deadletter.Waiting, "", 10); err == nil {
		t.Fatalf("raw scan while e001 is removed: %+v, want an error (its page would be short)", items)
	}
}
