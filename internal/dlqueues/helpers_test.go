package dlqueues

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// errCause is the rejection a test defers calls with.
var errCause = errors.New("circuit open")

// rig is a Queues on a fake clock whose replays are sent on replayed; its
// queues are closed when the test ends.
type rig struct {
	*Queues
	clk      *resiliencetest.Clock
	replayed chan deadletter.Entry
}

// newRig returns a rig; opts' Clock and Replay are the rig's unless set.
func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	r := &rig{clk: resiliencetest.NewClock(t0), replayed: make(chan deadletter.Entry, 16)}
	if opts.Clock == nil {
		opts.Clock = r.clk
	}
	if opts.Replay == nil {
		opts.Replay = func(_ context.Context, e deadletter.Entry) error {
			r.replayed <- e
			return nil
		}
	}
	r.Queues = New(opts)
	t.Cleanup(func() { r.Detach()() })
	return r
}

// queue is Queue, wanting no error.
func (r *rig) queue(t *testing.T, key string, cfg config.DeadLetter) *deadletter.Queue {
	t.Helper()
	q, err := r.Queue(key, cfg)
	if err != nil {
		t.Fatalf("Queue(%q): %v", key, err)
	}
	return q
}

// keys returns the keys that have a queue.
func (r *rig) keys() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ks := map[string]bool{}
	for k := range r.queues {
		ks[k] = true
	}
	return ks
}

// nStores returns how many stores are open.
func (r *rig) nStores() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stores)
}

// local is a section of the local store at path, defaults elsewhere.
func local(path string) config.DeadLetter {
	c := deadletter.DefaultConfig()
	c.Path = path
	return config.DeadLetter{Config: c}
}

// tempPath is a bbolt file's path in a directory of the test's own.
func tempPath(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

// entry is a call of key to defer.
func entry(key, id string) deadletter.Entry {
	return deadletter.Entry{ID: id, Key: key, Method: "/" + key + "/Do", Payload: []byte(id)}
}

// deferTo defers e in q and wants it kept.
func deferTo(t *testing.T, q *deadletter.Queue, e deadletter.Entry) {
	t.Helper()
	if err := q.Defer(context.Background(), e, errCause); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatalf("Defer(%s): %v, want it kept", e.ID, err)
	}
}

// next returns the next replayed entry.
func (r *rig) next(t *testing.T) deadletter.Entry {
	t.Helper()
	return <-r.replayed // a queue that never replays hangs the test: go test's -timeout reports it
}

// other is the engine's name of a group's fallback entry (engine.Other).
const other = "_OTHER"

// parse parses a configuration document.
func parse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fill writes n entries of each key into the bbolt file at path, as a
// previous run would have left them (enqueued at the fake clock's start).
func fill(t *testing.T, path string, n map[string]int) {
	t.Helper()
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendTo(t, st, n)
}

// appendTo appends n entries of each key to st.
func appendTo(t *testing.T, st deadletter.Store, n map[string]int) {
	t.Helper()
	lim := deadletter.DefaultConfig().Limits()
	for key, k := range n {
		for i := range k {
			e := entry(key, fmt.Sprintf("%s-%d", strings.ReplaceAll(key, "/", "."), i))
			e.Enqueued = t0
			if err := st.Append(context.Background(), e, lim); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// drain leaves key in the bbolt file at path with no entries, after it
// held one: the store still knows the key.
func drain(t *testing.T, path, key string) {
	t.Helper()
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	drainStore(t, st, key)
}

// drainStore appends one entry of key to st and acknowledges it.
func drainStore(t *testing.T, st deadletter.Store, key string) {
	t.Helper()
	ctx := context.Background()
	appendTo(t, st, map[string]int{key: 1})
	l, err := st.Lease(ctx, key, "test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	e, ok, err := l.Next(ctx)
	if err != nil || !ok {
		t.Fatalf("Next: %v, %v", ok, err)
	}
	if err := l.Ack(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// anyKey is Resume's reachable of a transport that names every method.
func anyKey(*config.Config, string) bool { return true }
