package boltstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
)

// An entry that says it belongs to another key than the bucket it was
// read from (a corrupted or hand-edited file) must not be replayed under
// the other key's identity, listed as the bucket's, nor reached by a purge
// of the bucket's key: Next reports it as corrupt, naming both keys, and
// drops it; List does not return it as a readable entry.
func TestBoltEntryOfAnotherKeyIsCorrupt(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		blob, err := deadletter.Entry{ID: "stray", Key: "other", Enqueued: time.Now()}.MarshalBinary()
		if err != nil {
			return err
		}
		if err := w.Put(seq(1), blob); err != nil {
			return err
		}
		return w.Put(seq(2), goodBlob(t, "good"))
	})
	s := open(t, path)
	es, err := s.List(t.Context(), "k", deadletter.Waiting, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Key != "k" {
			t.Errorf("List of key %q returned entry %q of key %q", "k", e.ID, e.Key)
		}
	}
	l, err := s.Lease(t.Context(), "k", "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(t.Context()))
	e, ok, err := l.Next(t.Context())
	var ce *deadletter.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("first Next: entry %q of key %q, %v, %v; want a CorruptError: it was read under key %q", e.ID, e.Key, ok, err, "k")
	}
	if msg := err.Error(); !strings.Contains(msg, `"other"`) || !strings.Contains(msg, `"k"`) || !errors.Is(err, deadletter.ErrInvalidEntry) {
		t.Errorf("the error %q should match ErrInvalidEntry and name both keys", msg)
	}
	if e, ok, err := l.Next(t.Context()); err != nil || !ok || e.ID != "good" {
		t.Fatalf("second Next: %q %v %v, want the good entry", e.ID, ok, err)
	}
}
