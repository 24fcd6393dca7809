package dlqueues

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
)

// Keys whose sections name the same file share one store; another file is
// another store.
func TestKeysNamingTheSameFileShareAStore(t *testing.T) {
	r := newRig(t, Options{})
	p, p2 := tempPath(t, "a.db"), tempPath(t, "b.db")
	qa := r.queue(t, "pkg.A", local(p))
	qb := r.queue(t, "pkg.B", local(p))
	if qa == qb {
		t.Fatal("two keys got one queue: want one queue per key")
	}
	if n := r.nStores(); n != 1 {
		t.Fatalf("%d stores for two keys on one file, want 1", n)
	}
	r.queue(t, "pkg.C", local(p2))
	if n := r.nStores(); n != 2 {
		t.Fatalf("%d stores for two files, want 2", n)
	}
}

// A key's queue is kept while its section does not change — the trigger
// (on) is the method's, not the queue's — and the same key asked again
// gets the same queue.
func TestQueueIsKeptWhileItsSectionDoesNotChange(t *testing.T) {
	r := newRig(t, Options{})
	cfg := local(tempPath(t, "dl.db"))
	q := r.queue(t, "pkg.A", cfg)
	if again := r.queue(t, "pkg.A", cfg); again != q {
		t.Fatal("the same section got a new queue")
	}
	onBoth := cfg
	onBoth.Config.On = deadletter.OnCircuitOpen | deadletter.OnRetriesExhausted
	if again := r.queue(t, "pkg.A", onBoth); again != q {
		t.Fatal("a section that changed only `on` got a new queue")
	}
}

// A reload that changes a key's section gives it a new queue on the same
// store: it replays what the old one kept, and the old one is closed.
func TestQueueIsReplacedWhenItsSectionChanges(t *testing.T) {
	r := newRig(t, Options{})
	cfg := local(tempPath(t, "dl.db"))
	old := r.queue(t, "pkg.A", cfg)
	r.clk.WaitPending(1) // its first round is over: it waits for a kick
	deferTo(t, old, entry("pkg.A", "kept-by-old"))

	changed := cfg
	changed.Config.MaxReplays = 3
	q := r.queue(t, "pkg.A", changed)
	if q == old {
		t.Fatal("a changed section kept the old queue")
	}
	if got := q.Config().MaxReplays; got != 3 {
		t.Fatalf("new queue's maxReplays %d, want 3", got)
	}
	if n := r.nStores(); n != 1 {
		t.Fatalf("%d stores, want the old queue's one", n)
	}
	if e := r.next(t); e.ID != "kept-by-old" { // the new queue's first round, at once
		t.Fatalf("replayed %q, want the old queue's entry", e.ID)
	}
	r.retiring.Wait()
	if err := old.Defer(context.Background(), entry("pkg.A", "late"), errCause); err != errCause {
		t.Fatalf("Defer on the replaced queue: %v, want the cause back (closed)", err)
	}
	if again := r.queue(t, "pkg.A", changed); again != q {
		t.Fatal("the new section asked again got yet another queue")
	}
}

// A queue's replay may build a method anew after a reload, and so ask for
// its key's queue with the new section: Queue replaces the queue without
// waiting for the old one to close (which waits for that very replay).
func TestQueueReplacedFromInsideItsOwnReplayDoesNotWaitForIt(t *testing.T) {
	cfg := local(tempPath(t, "dl.db"))
	changed := cfg
	changed.Config.ReplayRate = 10
	type result struct {
		q   *deadletter.Queue
		err error
	}
	got := make(chan result, 1)
	var r *rig
	r = newRig(t, Options{Replay: func(context.Context, deadletter.Entry) error {
		q, err := r.Queue("pkg.A", changed) // a deadlock hangs here: go test's -timeout reports it
		got <- result{q, err}
		return nil
	}})
	old := r.queue(t, "pkg.A", cfg)
	r.clk.WaitPending(1)
	deferTo(t, old, entry("pkg.A", "e1"))
	old.Kick("pkg.A")
	res := <-got
	if res.err != nil || res.q == nil || res.q == old {
		t.Fatalf("Queue inside the old queue's replay: %v, %v; want a new queue", res.q, res.err)
	}
	r.retiring.Wait() // the old queue closes once its replay has returned
	if err := old.Defer(context.Background(), entry("pkg.A", "late"), errCause); err != errCause {
		t.Fatalf("Defer on the replaced queue: %v, want the cause back (closed)", err)
	}
}

// A section on another file moves the key to another store.
func TestQueueOnAnotherFileGetsAnotherStore(t *testing.T) {
	r := newRig(t, Options{})
	q := r.queue(t, "pkg.A", local(tempPath(t, "a.db")))
	if q2 := r.queue(t, "pkg.A", local(tempPath(t, "b.db"))); q2 == q {
		t.Fatal("a section naming another file kept the queue")
	}
	if n := r.nStores(); n != 2 {
		t.Fatalf("%d stores, want 2", n)
	}
}

// A store that cannot be opened and settings the queue refuses are
// errors, and leave the key without a queue.
func TestQueueErrors(t *testing.T) {
	r := newRig(t, Options{})
	if _, err := r.Queue("pkg.A", local(filepath.Join(t.TempDir(), "no", "such", "dir", "dl.db"))); err == nil {
		t.Fatal("Queue on a file in a missing directory: no error")
	}
	bad := local(tempPath(t, "dl.db"))
	bad.Config.MaxReplays = -1
	if _, err := r.Queue("pkg.A", bad); err == nil {
		t.Fatal("Queue with maxReplays -1: no error")
	}
	if _, err := r.Queue("", local(tempPath(t, "dl.db"))); err == nil {
		t.Fatal("Queue of an empty key: no error")
	}
	if ks := r.keys(); len(ks) != 0 {
		t.Fatalf("keys with a queue after errors only: %v", ks)
	}
}

// Kick replays a key's entries now (the fake clock never moves here); an
// empty key kicks every key; a key without a queue is ignored.
func TestKick(t *testing.T) {
	r := newRig(t, Options{})
	r.Kick("pkg.None") // no queue at all
	r.Kick("")
	p := tempPath(t, "dl.db")
	qa := r.queue(t, "pkg.A", local(p))
	qb := r.queue(t, "pkg.B", local(p))
	r.clk.WaitPending(2) // both first rounds are over
	deferTo(t, qa, entry("pkg.A", "a1"))
	deferTo(t, qb, entry("pkg.B", "b1"))

	r.Kick("pkg.None")
	r.Kick("pkg.A")
	if e := r.next(t); e.ID != "a1" {
		t.Fatalf("Kick(pkg.A) replayed %q", e.ID)
	}
	r.clk.WaitPending(2) // A's round is over; B was not kicked
	select {
	case e := <-r.replayed:
		t.Fatalf("Kick(pkg.A) replayed %q too", e.ID)
	default:
	}
	r.Kick("")
	if e := r.next(t); e.ID != "b1" {
		t.Fatalf("Kick(\"\") replayed %q, want b1", e.ID)
	}
}

// Detach closes in two steps: at once, no queue is made any more; the
// queues, then the stores close when the caller runs what it returned,
// which may run more than once, as Detach may.
func TestDetachThenClose(t *testing.T) {
	r := newRig(t, Options{})
	qa := r.queue(t, "pkg.A", local(tempPath(t, "a.db")))
	qb := r.queue(t, "pkg.B", local(tempPath(t, "b.db")))
	r.mu.Lock()
	var stores []deadletter.Store
	for _, st := range r.stores {
		stores = append(stores, st)
	}
	r.mu.Unlock()

	closeAll := r.Detach()
	if _, err := r.Queue("pkg.A", local(tempPath(t, "a.db"))); !errors.Is(err, deadletter.ErrClosed) {
		t.Fatalf("Queue after Detach: %v, want ErrClosed", err)
	}
	r.Kick("pkg.A")
	r.Kick("")
	// Not closed yet: the caller closes them once it holds no lock.
	deferTo(t, qa, entry("pkg.A", "before-close"))

	closeAll()
	for _, q := range []*deadletter.Queue{qa, qb} {
		if err := q.Defer(context.Background(), entry("pkg.A", "after-close"), errCause); err != errCause {
			t.Fatalf("Defer after close: %v, want the cause back", err)
		}
	}
	for i, st := range stores {
		if _, err := st.Keys(context.Background()); !errors.Is(err, deadletter.ErrClosed) {
			t.Fatalf("store %d after close: Keys %v, want ErrClosed", i, err)
		}
	}
	closeAll()
	r.Detach()()
}

// Resume without a deadLetter section opens nothing.
func TestResumeWithoutDeadLetterOpensNothing(t *testing.T) {
	r := newRig(t, Options{})
	cfg := parse(t, "services:\n  pkg.A:\n    retry: { maxAttempts: 2 }\n")
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err != nil {
		t.Fatal(err)
	}
	if n := r.nStores(); n != 0 {
		t.Fatalf("%d stores opened, want 0", n)
	}
}

// Resume opens the stores the configuration names, and gives a queue to
// each key that holds entries and that the configuration still defers —
// keyed by service or by method — and to no other; those queues replay at
// once.
func TestResumeGivesAQueueOnlyToKeysWithEntries(t *testing.T) {
	p := tempPath(t, "dl.db")
	fill(t, p, map[string]int{"pkg.A": 1, "pkg.M/Do": 1, "pkg.Gone": 1, "pkg.Off": 1})
	drain(t, p, "pkg.B")
	cfg := parse(t, `
services:
  pkg.A: { deadLetter: { path: "`+p+`" } }
  pkg.B: { deadLetter: { path: "`+p+`" } }
  pkg.Idle: { deadLetter: { path: "`+p+`" } }
  pkg.Off: { deadLetter: { enabled: false } }
  pkg.M:
    circuitBreaker: { keyBy: method }
    deadLetter: { path: "`+p+`" }
`)
	r := newRig(t, Options{})
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err != nil {
		t.Fatal(err)
	}
	ks := r.keys()
	if len(ks) != 2 || !ks["pkg.A"] || !ks["pkg.M/Do"] {
		t.Fatalf("keys with a queue after Resume: %v, want pkg.A and pkg.M/Do", ks)
	}
	seen := map[string]bool{}
	for range 2 {
		seen[r.next(t).Key] = true
	}
	if !seen["pkg.A"] || !seen["pkg.M/Do"] {
		t.Fatalf("replayed at once: %v", seen)
	}
	if n := r.nStores(); n != 1 {
		t.Fatalf("%d stores, want 1", n)
	}
}

// A store that cannot be opened is Resume's error.
func TestResumeErrorOnAStoreThatCannotOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing", "dl.db")
	cfg := parse(t, "services:\n  pkg.A: { deadLetter: { path: \""+p+"\" } }\n")
	r := newRig(t, Options{})
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err == nil {
		t.Fatal("Resume on a file in a missing directory: no error")
	}
}

// A method's own deadLetter section (keyBy: method) may name a store its
// service does not: Resume opens it too, and resumes the method's key.
func TestResumeReadsAStoreOnlyAMethodNames(t *testing.T) {
	p := tempPath(t, "do.db")
	fill(t, p, map[string]int{"pkg.M/Do": 1})
	cfg := parse(t, `
services:
  pkg.M:
    circuitBreaker: { keyBy: method }
    methods:
      Do: { deadLetter: { path: "`+p+`" } }
`)
	r := newRig(t, Options{})
	if err := r.Resume(cfg, config.GRPC, other, anyKey); err != nil {
		t.Fatal(err)
	}
	if ks := r.keys(); !ks["pkg.M/Do"] {
		t.Fatalf("keys with a queue after Resume: %v, want pkg.M/Do (its store is named by the method only)", ks)
	}
	if e := r.next(t); e.Key != "pkg.M/Do" {
		t.Fatalf("replayed %q", e.Key)
	}
}
