package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/internal/redistest"
)

// list prints no payload, only its size, yet it read every listed entry's
// payload (a page of 1000 entries of 1 MiB: a GiB read, from disk or over
// the network, and allocated); show read every payload up to the entry it
// looked for. The encoding puts the payload last, after its length: both
// now read the entries' heads only, and show the one entry it prints.
// Measured in bytes allocated by the command: 20 parked entries of 1 MiB.
func TestListAndShowDoNotReadEveryPayload(t *testing.T) {
	const n, size = 20, 1 << 20
	park := func(t *testing.T, s deadletter.Store) {
		t.Helper()
		ctx := context.Background()
		payload := []byte(strings.Repeat("x", size))
		for i := range n {
			e := deadletter.Entry{ID: fmt.Sprintf("e%02d", i), Key: "k", Method: "/pkg.Svc/M", Payload: payload, Enqueued: time.Unix(1000, 0)}
			if err := s.Append(ctx, e, deadletter.Limits{MaxEntries: 100, MaxBytes: 1 << 30}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := s.Lease(ctx, "k", "park", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		for range n {
			e, _, err := l.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, parked, err := l.Fail(ctx, e, 1); err != nil || !parked {
				t.Fatalf("park: %v %v", parked, err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) []string
	}{
		{name: "bbolt file", store: func(t *testing.T) []string {
			path := filepath.Join(t.TempDir(), "dl.db")
			s, err := boltstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			park(t, s)
			_ = s.Close()
			return []string{"-file", path}
		}},
		{name: "redis", store: func(t *testing.T) []string {
			srv := redistest.Start(t)
			s, rdb := redisStore(t, srv.Addr(), "big")
			defer func() { _ = s.Close(); _ = rdb.Close() }()
			park(t, s)
			return []string{"-redis", srv.Addr(), "-namespace", "big"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := tc.store(t)
			for _, c := range []struct {
				args  []string
				want  string
				bound uint64 // bytes the command may allocate
			}{
				{args: []string{"list", "k", "parked"}, want: "1048576", bound: 2 << 20},
				{args: []string{"show", "k", fmt.Sprintf("e%02d", n-1)}, want: "payload:        1048576 bytes", bound: 2*size + 2<<20},
			} {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				code, out, stderr := cli(append(append([]string{}, flags...), c.args...)...)
				runtime.ReadMemStats(&after)
				if code != 0 || !strings.Contains(out, c.want) {
					t.Fatalf("%v: exit %d, %q, stderr %q", c.args, code, out, stderr)
				}
				if got := after.TotalAlloc - before.TotalAlloc; got > c.bound {
					t.Errorf("%v allocated %d MiB for %d entries of 1 MiB; want at most %d MiB: it reads payloads it does not print",
						c.args, got>>20, n, c.bound>>20)
				}
			}
		})
	}
}
