package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// A key's streams and counters hash are shared, so hostile: a value of
// another type at one of them (a string left by hand or by another tool)
// made every script of the key fail with WRONGTYPE, for good: every
// deferral of the key refused; with the counters hash (m) or the waiting
// stream (w), no replay; with the parked stream (p), the head entry
// replayed again every round, past maxReplays, since it could never be
// parked, and the entries behind it never. Such a value holds nothing the
// store wrote: it is dropped (counters are rebuilt from the streams, as
// for counters that are not numbers), and the key goes on.
func TestRedisAKeyOfTheWrongTypeIsReplaced(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	for _, suffix := range []string{"w", "p", "m"} {
		ns := "wrong" + suffix
		s := open(t, rdb, ns)
		// e000 parked, e001 waiting; then the value of another type.
		if err := s.Append(ctx, entry(0), lim); err != nil {
			t.Fatal(err)
		}
		l, err := s.Lease(ctx, "pkg.Svc", "o", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, parked, err := l.Fail(ctx, e, 1); err != nil || !parked {
			t.Fatal(parked, err)
		}
		_ = l.Release(ctx)
		if err := s.Append(ctx, entry(1), lim); err != nil {
			t.Fatal(err)
		}
		k := ns + ":dl:{pkg.Svc}:" + suffix
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, k, "not ours", 0).Err(); err != nil {
			t.Fatal(err)
		}

		if err := s.Append(ctx, entry(2), lim); err != nil {
			t.Fatalf("%s of the wrong type: append: %v", suffix, err)
		}
		l, err = s.Lease(ctx, "pkg.Svc", "o", time.Minute)
		if err != nil {
			t.Fatalf("%s of the wrong type: lease: %v", suffix, err)
		}
		e, ok, err := l.Next(ctx)
		if err != nil || !ok {
			t.Fatalf("%s of the wrong type: next: %v %v", suffix, ok, err)
		}
		if _, parked, err := l.Fail(ctx, e, 1); err != nil || !parked {
			t.Fatalf("%s of the wrong type: fail: parked %v, %v", suffix, parked, err)
		}
		_ = l.Release(context.WithoutCancel(ctx))
		if err := s.Requeue(ctx, "pkg.Svc", e.ID, time.Now()); err != nil {
			t.Fatalf("%s of the wrong type: requeue: %v", suffix, err)
		}
		st, err := s.Stats(ctx, "pkg.Svc")
		if err != nil || st.Waiting == 0 || st.Bytes == 0 {
			t.Fatalf("%s of the wrong type: stats %+v, %v", suffix, st, err)
		}
		for _, state := range []deadletter.State{deadletter.Waiting, deadletter.Parked} {
			if _, err := s.List(ctx, "pkg.Svc", state, "", 10); err != nil {
				t.Fatalf("%s of the wrong type: list %s: %v", suffix, state, err)
			}
		}
	}
}
