package dlqueues

import (
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

// The Redis store's set of keys is shared, so hostile: one of the wrong
// type (a string left at n:dl:keys by hand or by another tool) made Keys
// fail with WRONGTYPE, so Resume failed, and with it the engine's New: no
// client of that namespace could start. It is now taken for an empty set
// and replaced, filled again by the deferrals that follow.
func TestResumeGoesOnOverAKeySetOfTheWrongType(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	if err := rdb.Set(t.Context(), "n:dl:keys", "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, `
services:
  pkg.A: { deadLetter: { store: redis, namespace: n, redis: { addr: "`+srv.Addr()+`" } } }
`)
	r := newRig(t, Options{})
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err != nil {
		t.Fatalf("Resume over a key set of the wrong type: %v", err)
	}
	st, err := redisstore.New(client(t, srv), redisstore.WithNamespace("n"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Again before a deferral: it replaces the set, or the key is not
	// listed at the next start.
	if err := rdb.Set(t.Context(), "n:dl:keys", "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	appendTo(t, st, map[string]int{"pkg.A": 1})
	if keys, err := st.Keys(t.Context()); err != nil || len(keys) != 1 || keys[0] != "pkg.A" {
		t.Fatalf("keys after a deferral: %q, %v; want pkg.A", keys, err)
	}
}
