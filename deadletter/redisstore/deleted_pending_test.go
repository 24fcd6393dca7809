package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/internal/redistest"
)

// Many IDs pending in the replay group whose entries are gone (read by a
// stranger consumer, then deleted or trimmed without XACK): the next
// script clears them from the group a bounded number a call, and when
// they outnumbered its bound it said "nothing waiting". The round ended
// as if the key were empty, and the next came an interval (10s) later:
// with a million such IDs, hours with entries waiting and none replayed.
// Next now goes on until they are cleared, each call clearing its share.
func TestRedisManyDeletedPendingIDsDoNotEndTheRound(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "pend")
	if err := s.Append(ctx, entry(0), lim); err != nil { // creates the stream and its group
		t.Fatal(err)
	}
	w := "pend:dl:{pkg.Svc}:w"
	const n = 5000
	pipe := rdb.Pipeline()
	for range n {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"e", "x"}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "replay", Consumer: "stranger", Streams: []string{w, ">"}, Count: n + 1}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != n+1 {
		t.Fatalf("XREADGROUP: %d %v", len(res), err)
	}
	for _, m := range res[0].Messages {
		pipe.XDel(ctx, w, m.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, entry(1), lim); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(ctx, "pkg.Svc", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	e, ok, err := l.Next(ctx)
	if err != nil || !ok || e.ID != "e001" {
		t.Fatalf("next behind %d deleted pending IDs: %+v, %v, %v; want e001", n, e, ok, err)
	}
}
