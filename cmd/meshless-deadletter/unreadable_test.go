package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/internal/redistest"
)

// Parked entries that do not decode (a damaged file, one a newer version
// wrote, a hand-edited stream) were out of the operator's reach: list
// skipped them, purge found entries by an ID they no longer have, and
// `purge -all` listed only the readable ones; yet they counted towards the
// key's bounds (keys showed them parked) for ever. list now shows them,
// with their position and why they do not decode; purge -at POS and
// purge -all drop them; requeue -all, which cannot requeue them, says so
// and fails.
func TestUnreadableParkedEntriesCanBeSeenAndPurged(t *testing.T) {
	for _, tc := range []struct {
		name string
		// store returns the command's flags for a store whose key pkg.Svc
		// holds 2 waiting entries and 2 parked ones that do not decode,
		// and those 2 parked entries' positions.
		store func(t *testing.T) (flags []string, pos [2]string)
	}{
		{name: "bbolt file", store: func(t *testing.T) ([]string, [2]string) {
			path := filepath.Join(t.TempDir(), "dl.db")
			s, err := boltstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, s, "pkg.Svc")
			_ = s.Close()
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			var pos [2]string
			err = db.Update(func(tx *bolt.Tx) error {
				p := tx.Bucket([]byte("meshless-deadletter/v1")).Bucket([]byte("pkg.Svc")).Bucket([]byte("p"))
				var ks, vs [][]byte
				_ = p.ForEach(func(k, v []byte) error {
					ks, vs = append(ks, append([]byte(nil), k...)), append(vs, append([]byte(nil), v...))
					return nil
				})
				for i := range ks {
					vs[i][1] = 9 // a newer version's entry: same size, so the counters stay right
					if err := p.Put(ks[i], vs[i]); err != nil {
						return err
					}
					pos[i] = "56"[i : i+1]
				}
				return nil
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			return []string{"-file", path}, pos
		}},
		{name: "redis", store: func(t *testing.T) ([]string, [2]string) {
			srv := redistest.Start(t)
			s, rdb := redisStore(t, srv.Addr(), "ops")
			t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
			fill(t, s, "pkg.Svc")
			ctx := context.Background()
			stream := "ops:dl:{pkg.Svc}:p"
			msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
			if err != nil || len(msgs) != 2 {
				t.Fatalf("parked stream: %v %v", msgs, err)
			}
			var pos [2]string
			for i, m := range msgs {
				if err := rdb.XDel(ctx, stream, m.ID).Err(); err != nil {
					t.Fatal(err)
				}
				if pos[i], err = rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"e", "garbage", "r", "1"}}).Result(); err != nil {
					t.Fatal(err)
				}
			}
			return []string{"-redis", srv.Addr(), "-namespace", "ops"}, pos
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags, pos := tc.store(t)
			step := func(want int, args ...string) (string, string) {
				t.Helper()
				code, out, stderr := cli(append(append([]string{}, flags...), args...)...)
				if code != want {
					t.Fatalf("%v: exit %d, want %d; stdout %q, stderr %q", args, code, want, out, stderr)
				}
				return out, stderr
			}
			if out, _ := step(0, "keys"); !strings.Contains(out, "pkg.Svc  2        2") {
				t.Fatalf("keys: the unreadable entries should count as parked:\n%s", out)
			}
			out, _ := step(0, "list", "pkg.Svc", "parked")
			for _, p := range pos {
				if !strings.Contains(out, p) {
					t.Errorf("list parked does not show the unreadable entry at %s:\n%s", p, out)
				}
			}
			if !strings.Contains(out, "invalid entry") {
				t.Errorf("list parked does not say why the entries do not decode:\n%s", out)
			}
			out, stderr := step(1, "requeue", "pkg.Svc", "-all")
			if !strings.Contains(out, "requeued 0") || !strings.Contains(stderr, "2 parked entries do not decode") {
				t.Errorf("requeue -all: stdout %q, stderr %q; want it to say it left the 2 unreadable entries", out, stderr)
			}
			if out, _ := step(0, "purge", "pkg.Svc", "-at", pos[0]); out != "purged 1\n" {
				t.Errorf("purge -at %s: %q", pos[0], out)
			}
			if out, _ := step(0, "keys"); !strings.Contains(out, "pkg.Svc  2        1") {
				t.Fatalf("keys after purge -at:\n%s", out)
			}
			step(1, "purge", "pkg.Svc", "-at", pos[0]) // gone already
			if out, _ := step(0, "purge", "pkg.Svc", "-all"); out != "purged 1\n" {
				t.Errorf("purge -all: %q", out)
			}
			if out, _ := step(0, "keys"); !strings.Contains(out, "pkg.Svc  2        0") {
				t.Fatalf("keys after purge -all:\n%s", out)
			}
		})
	}
}

// A parked entry under a key that is no sequence number (a hostile file)
// is listed at a position that names that key; the listing pages past it,
// and purge -at drops it.
func TestAParkedEntryUnderAHostileKeyIsListedAndPurged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, "pkg.Svc")
	_ = s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		p := tx.Bucket([]byte("meshless-deadletter/v1")).Bucket([]byte("pkg.Svc")).Bucket([]byte("p"))
		return p.Put([]byte{0}, []byte("garbage")) // sorts first
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli("-file", path, "list", "pkg.Svc", "parked", "-n", "1")
	if code != 0 || !strings.Contains(out, `bad:"\x00"`) {
		t.Fatalf("list -n 1: exit %d, %q, %q", code, out, stderr)
	}
	code, out, stderr = cli("-file", path, "list", "pkg.Svc", "parked", "-after", `bad:"\x00"`)
	if code != 0 || !strings.Contains(out, "p0") || !strings.Contains(out, "p1") {
		t.Fatalf("list -after the hostile key: exit %d, %q, %q", code, out, stderr)
	}
	if code, out, stderr := cli("-file", path, "show", "pkg.Svc", "p0"); code != 0 || !strings.Contains(out, `"payload p0"`) {
		t.Fatalf("show p0 behind the hostile key: exit %d, %q, %q", code, out, stderr)
	}
	if code, out, stderr := cli("-file", path, "purge", "pkg.Svc", "-at", `bad:"\x00"`); code != 0 || out != "purged 1\n" {
		t.Fatalf("purge -at the hostile key: exit %d, %q, %q", code, out, stderr)
	}
	if code, out, _ := cli("-file", path, "keys"); code != 0 || !strings.Contains(out, "pkg.Svc  2        2") {
		t.Fatalf("keys after the purge:\n%s", out)
	}
}
