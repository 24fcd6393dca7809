package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// A hand-made group state: a stranger consumer holds e000 and e001
// pending, and e000 was then deleted from the stream by hand (XDEL without
// XACK). e002 was never delivered. Next must hand out e001 before e002: an
// entry is never replayed before an older one of its key. The script's
// XAUTOCLAIM ... COUNT 1 spends its count on the deleted e000 (it only
// clears it from the PEL), returns no entry, and the script then reads
// e002 with XREADGROUP '>': e002 overtakes e001.
func TestRedisDeletedPendingEntryLetsANewerOneOvertake(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "pel")
	w := "pel:dl:{pkg.Svc}:w"
	for i := range 2 {
		if err := s.Append(ctx, entry(i), lim); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "replay", Consumer: "stranger", Streams: []string{w, ">"}, Count: 2}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 2 {
		t.Fatalf("XREADGROUP: %v %v", res, err)
	}
	if err := rdb.XDel(ctx, w, res[0].Messages[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, entry(2), lim); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(ctx, "pkg.Svc", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var got []string
	for range 5 {
		e, ok, err := l.Next(ctx)
		var ce *deadletter.CorruptError
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, e.ID)
		if err := l.Ack(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[e001 e002]" {
		t.Fatalf("replay order %v, want [e001 e002]", got)
	}
}

// A lease key of the wrong type (a hash left by hand or by another tool):
// like a lease without a sane TTL it is nobody's and must be taken over.
// The lease script's GET fails with WRONGTYPE, so every round fails to
// lease and the key's entries are never replayed.
func TestRedisLeaseOfTheWrongTypeIsTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "lw")
	if err := s.Append(ctx, entry(0), lim); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "lw:dl:{pkg.Svc}:l", "owner", "zombie").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(ctx, "pkg.Svc", "me", time.Minute)
	if err != nil {
		t.Fatalf("a lease key of the wrong type blocks the key for ever: %v", err)
	}
	_ = l.Release(ctx)
}

// The consumer group's last delivered ID set past the stream's entries (a
// hand-made or hostile XGROUP SETID): nothing is pending and XREADGROUP
// delivers nothing, so every round found the key empty while entries
// waited. They were never replayed nor expired; the key filled up and
// refused every deferral. An entry in the stream that is not pending has
// never been delivered (a delivered one is deleted with its ack): the
// group is read again from the start.
func TestRedisGroupSetPastTheEntriesStillDeliversThem(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "setid")
	if err := s.Append(ctx, entry(0), lim); err != nil {
		t.Fatal(err)
	}
	w := "setid:dl:{pkg.Svc}:w"
	if err := rdb.Do(ctx, "XGROUP", "SETID", w, "replay", "99999999999999-0").Err(); err != nil {
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
	var got []string
	for range 3 {
		e, ok, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, e.ID)
		if err := l.Ack(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{entry(0).ID, entry(1).ID}) {
		t.Fatalf("replayed %v, want both entries in order", got)
	}
}

// Redis lost its data (restarted without persistence, flushed, or a
// replica promoted without the last writes) while the client ran: the
// store had cached that the key was in the key set, so entries deferred
// afterwards were in their streams but their key was not in the set:
// Keys (the start-up resume, the command's keys) never listed it, and
// after a restart of the service nothing replayed them unless a call of
// the key came. A key whose streams were empty before an append is added
// to the set again.
func TestRedisKeysListsAKeyAfterRedisLostItsData(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "lost")
	if err := s.Append(ctx, entry(0), lim); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart() // empty: no persistence
	if err := s.Append(ctx, entry(1), lim); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx)
	if err != nil || !slices.Equal(keys, []string{"pkg.Svc"}) {
		t.Fatalf("keys %v %v: want pkg.Svc, which holds an entry", keys, err)
	}
}
