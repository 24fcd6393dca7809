package redisstore_test

import (
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// Every Redis key of one dead-letter key must hash to one slot in Redis
// Cluster, whatever the name holds: the store's scripts take the waiting
// and parked streams, the counters and the lease together. A name that
// starts with "}" made the hash tag "ns:dl:{}…" empty, so each key hashed
// whole to a slot of its own, and every append failed with CROSSSLOT: the
// queue refused every entry of that key. Braces elsewhere in a name kept a
// tag common to the four keys, and keep their names.
func TestRedisClusterEveryNameKeepsItsKeysInOneSlot(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster())
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "tag")
	names := []string{"pkg.Svc", "}", "}x", "}}", "}{", "} {x}", "a}b", "{a}", "{}", "{", "}:w"}
	for _, key := range names {
		e := deadletter.Entry{ID: "id1", Key: key, Payload: []byte("p"), Enqueued: time.Now()}
		if err := s.Append(ctx, e, lim); err != nil {
			t.Fatalf("key %q: append: %v", key, err)
		}
		if st, err := s.Stats(ctx, key); err != nil || st.Waiting != 1 {
			t.Fatalf("key %q: stats %+v, %v; want one waiting", key, st, err)
		}
		l, err := s.Lease(ctx, key, "me", time.Minute)
		if err != nil {
			t.Fatalf("key %q: lease: %v", key, err)
		}
		got, ok, err := l.Next(ctx)
		if err != nil || !ok || got.ID != "id1" || got.Key != key {
			t.Fatalf("key %q: next: %+v %v %v", key, got, ok, err)
		}
		if _, parked, err := l.Fail(ctx, got, 1); err != nil || !parked {
			t.Fatalf("key %q: fail: parked %v, %v", key, parked, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("key %q: release: %v", key, err)
		}
		if es, err := s.List(ctx, key, deadletter.Parked, "", 10); err != nil || len(es) != 1 {
			t.Fatalf("key %q: list parked: %v, %v", key, es, err)
		}
		if err := s.Requeue(ctx, key, "id1", time.Now()); err != nil {
			t.Fatalf("key %q: requeue: %v", key, err)
		}
		l, err = s.Lease(ctx, key, "me", time.Minute)
		if err != nil {
			t.Fatalf("key %q: lease: %v", key, err)
		}
		if got, ok, err = l.Next(ctx); err != nil || !ok || got.ID != "id1" {
			t.Fatalf("key %q: next after requeue: %+v %v %v", key, got, ok, err)
		}
		if err := l.Ack(ctx, got); err != nil {
			t.Fatalf("key %q: ack: %v", key, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("key %q: release: %v", key, err)
		}
		if st, err := s.Stats(ctx, key); err != nil || st.Waiting+st.Parked != 0 || st.Bytes != 0 {
			t.Fatalf("key %q: stats %+v, %v; want empty", key, st, err)
		}
	}
	keys, err := s.Keys(ctx)
	if err != nil || len(keys) != len(names) {
		t.Fatalf("keys %q, %v; want the %d names", keys, err, len(names))
	}
	// An ordinary name keeps its keys' names: what a store wrote before
	// stays readable.
	if n, err := rdb.Exists(ctx, "tag:dl:{pkg.Svc}:m").Result(); err != nil || n != 1 {
		t.Fatalf("tag:dl:{pkg.Svc}:m exists: %d, %v", n, err)
	}
	if n, err := rdb.Exists(ctx, "tag:dl:{a}b}:m").Result(); err != nil || n != 1 {
		t.Fatalf("tag:dl:{a}b}:m exists: %d, %v", n, err)
	}
}
