package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// hostileFile writes a bbolt file by hand: root/k with waiting bucket w,
// parked bucket p, and whatever fill puts into w.
func hostileFile(t *testing.T, fill func(w *bolt.Bucket) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dl.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists([]byte("meshless-deadletter/v1"))
		if err != nil {
			return err
		}
		k, err := root.CreateBucket([]byte("k"))
		if err != nil {
			return err
		}
		w, err := k.CreateBucket([]byte("w"))
		if err != nil {
			return err
		}
		if _, err := k.CreateBucket([]byte("p")); err != nil {
			return err
		}
		return fill(w)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func seq(n byte) []byte { return []byte{0, 0, 0, 0, 0, 0, 0, n} }

func goodBlob(t *testing.T, id string) []byte {
	t.Helper()
	b, err := deadletter.Entry{ID: id, Key: "k", Enqueued: time.Now()}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A nested bucket where a waiting entry should be (a hostile or damaged
// file): Next reports it as corrupt and must remove it, so that the next
// Next moves on. It reports the same corrupt entry again and again.
func TestBoltNestedBucketInWaitingIsDroppedOnce(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		if _, err := w.CreateBucket(seq(1)); err != nil {
			return err
		}
		return w.Put(seq(2), goodBlob(t, "good"))
	})
	s := open(t, path)
	l, err := s.Lease(t.Context(), "k", "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(t.Context()))
	var ce *deadletter.CorruptError
	if _, _, err := l.Next(t.Context()); !errors.As(err, &ce) {
		t.Fatalf("first Next: %v, want a CorruptError", err)
	}
	e, ok, err := l.Next(t.Context())
	if err != nil || !ok || e.ID != "good" {
		t.Fatalf("second Next: %q %v %v, want the good entry: the corrupt one was reported as dropped but is still at the head", e.ID, ok, err)
	}
}

// dropCounter is a listener that signals when events reach a count.
type dropCounter struct {
	mu       sync.Mutex
	n        map[string]int
	dropped  chan struct{} // closed at 100 drops
	replayed chan struct{} // closed at the first replay
}

func newDropCounter() *dropCounter {
	return &dropCounter{n: map[string]int{}, dropped: make(chan struct{}), replayed: make(chan struct{})}
}

func (d *dropCounter) Entries(_, event string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n[event] += n
	if event == deadletter.EventDropped && d.n[event] == 100 {
		close(d.dropped)
	}
	if event == deadletter.EventReplayed && d.n[event] == 1 {
		close(d.replayed)
	}
}

func (d *dropCounter) Watch(string, func() (int64, int64, time.Duration)) func() { return func() {} }

// The same file through a queue: the round spins on the corrupt entry in a
// hot loop (no pacing, no check of the queue's context), counting it as
// dropped without end, and never reaches the good entry; Close would wait
// for it forever.
func TestBoltNestedBucketDoesNotSpinTheRound(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		if _, err := w.CreateBucket(seq(1)); err != nil {
			return err
		}
		return w.Put(seq(2), goodBlob(t, "good"))
	})
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d := newDropCounter()
	clk := resiliencetest.NewClock(time.Now())
	q, err := deadletter.New(s, deadletter.Config{}, deadletter.WithClock(clk), deadletter.WithListener(d), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Handle("k", func(context.Context, deadletter.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.replayed:
		_ = q.Close()
		_ = s.Close()
	case <-d.dropped:
		_ = s.Close() // breaks the loop (Next then fails with ErrClosed), so that Close returns
		_ = q.Close()
		t.Fatal("the round dropped the same corrupt entry 100 times in a hot loop and never replayed the good entry behind it")
	}
}

// A waiting entry stored under a key that is not an 8-byte sequence number
// (a hostile file): it decodes, so it is replayed, but Ack, Fail and Expire
// cannot parse its Pos, so it is never removed, never counted failed, never
// parked: it is replayed again every round, for ever, and the key behind it
// is blocked.
func TestBoltEntryUnderANonSequenceKeyIsNotReplayedForever(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		if err := w.Put([]byte{0}, goodBlob(t, "odd")); err != nil {
			return err
		}
		return w.Put(seq(2), goodBlob(t, "good"))
	})
	s := open(t, path)
	l, err := s.Lease(t.Context(), "k", "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(t.Context()))
	for i := range 3 {
		e, ok, err := l.Next(t.Context())
		var ce *deadletter.CorruptError
		if errors.As(err, &ce) {
			continue // dropped as hostile: fine
		}
		if err != nil || !ok {
			t.Fatalf("Next %d: %v %v", i, ok, err)
		}
		if e.ID == "good" {
			return // the odd entry was dealt with
		}
		if err := l.Ack(t.Context(), e); err != nil {
			if i == 2 {
				t.Fatalf("entry %q (pos %q) replayed 3 times and still cannot be acknowledged: %v", e.ID, e.Pos, err)
			}
			continue
		}
	}
	t.Fatal("never reached the good entry")
}

// Close during that hot loop: the queue's context is cancelled, yet the
// round goes on dropping (it never looks at the context on that path, and
// bbolt's Next ignores it), so Close never returns.
func TestBoltNonSequenceKeyBlocksTheKey(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		if err := w.Put([]byte{0}, goodBlob(t, "odd")); err != nil {
			return err
		}
		return w.Put(seq(2), goodBlob(t, "good"))
	})
	s := open(t, path)
	clk := resiliencetest.NewClock(time.Now())
	q, err := deadletter.New(s, deadletter.Config{}, deadletter.WithClock(clk), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	calls := make(chan string, 100)
	if err := q.Handle("k", func(_ context.Context, e deadletter.Entry) error {
		calls <- e.ID
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 4 {
		select {
		case id := <-calls:
			got = append(got, id)
			if id == "good" {
				return
			}
		case <-t.Context().Done():
			t.Fatal("test timed out")
		}
		clk.WaitPending(1) // the key's goroutine waits for its next round
		clk.Advance(deadletter.DefaultInterval)
	}
	t.Fatalf("replays %v: the same entry replayed (successfully) at every round, never removed; the good entry behind it never replayed", got)
}

// A counter name ("nw") that is a bucket in the key's bucket (a hostile
// file): every write of the counters fails, so an entry is read and replayed
// but can never be acknowledged: it is replayed again at every round.
func TestBoltCounterThatIsABucketDoesNotReplayForever(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		root, _ := tx.CreateBucketIfNotExists([]byte("meshless-deadletter/v1"))
		k, _ := root.CreateBucket([]byte("k"))
		w, _ := k.CreateBucket([]byte("w"))
		_, _ = k.CreateBucket([]byte("p"))
		_, _ = k.CreateBucket([]byte("nw"))
		return w.Put(seq(1), goodBlob(t, "once"))
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	l, err := s.Lease(t.Context(), "k", "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(t.Context()))
	e, ok, err := l.Next(t.Context())
	if err != nil || !ok {
		t.Fatalf("Next: %v %v", ok, err)
	}
	if err := l.Ack(t.Context(), e); err != nil {
		t.Fatalf("Ack of a replayed entry fails for ever (it will be replayed at every round): %v", err)
	}
}
