package boltstore_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
)

// Counters that the entries deny (a hostile file, or one whose counters
// drifted from its entries): a count of 2^40 waiting entries, 2^50 bytes,
// a parked count with no parked entry. They were trusted because they were
// well-formed: the key reported 2^40 waiting entries to the gauges and
// refused every deferral as full, forever, since only the removal of an
// entry ever lowered them. The Redis store counts its streams, and never
// says so; the file's counters are now checked against the entries and
// rebuilt when out of bounds or when they say a state is empty that is not
// (or the reverse).
func TestBoltCountersTheEntriesDenyAreRebuilt(t *testing.T) {
	put := func(b *bolt.Bucket, name string, v uint64) error {
		return b.Put([]byte(name), binary.BigEndian.AppendUint64(nil, v))
	}
	for _, tc := range []struct {
		name       string
		nw, np, nb uint64
	}{
		{"huge counts", 1 << 40, 1 << 40, 1 << 50},
		{"huge bytes", 1, 0, 1 << 50},
		{"a parked count with nothing parked", 1, 7, 100},
		{"nothing waiting said of a waiting entry", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var size int
			path := hostileFile(t, func(w *bolt.Bucket) error {
				blob := goodBlob(t, "e1")
				size = len(blob)
				if err := w.Put(seq(1), blob); err != nil {
					return err
				}
				k := w.Tx().Bucket([]byte("meshless-deadletter/v1")).Bucket([]byte("k"))
				if err := put(k, "nw", tc.nw); err != nil {
					return err
				}
				if err := put(k, "np", tc.np); err != nil {
					return err
				}
				return put(k, "nb", tc.nb)
			})
			s := open(t, path)
			st, err := s.Stats(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if st.Waiting != 1 || st.Parked != 0 || st.Bytes != int64(size) {
				t.Errorf("stats %+v, want the one waiting entry of %d bytes", st, size)
			}
			lim := deadletter.Limits{MaxEntries: 10, MaxBytes: 1 << 20}
			e := deadletter.Entry{ID: "e2", Key: "k"}
			if err := s.Append(t.Context(), e, lim); err != nil {
				t.Errorf("a second entry under a bound of 10: %v", err)
			}
		})
	}
}

// An entry whose failed replays are at the bound a decoder accepts (2^30: a
// hostile file, or a count that only grew): its next failure parked it
// with 2^30+1 written in, which no decoder accepts, so the parked entry
// was unreadable: skipped by List, never found by Requeue or Purge by ID.
// The Redis store clamps the count it reads. The count now stops at the
// bound.
func TestBoltAFailureAtTheBoundOfReplaysKeepsTheEntryReadable(t *testing.T) {
	path := hostileFile(t, func(w *bolt.Bucket) error {
		blob, err := deadletter.Entry{ID: "e1", Key: "k", Replays: 1 << 30, Enqueued: time.Now()}.MarshalBinary()
		if err != nil {
			return err
		}
		return w.Put(seq(1), blob)
	})
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
	if _, parked, err := l.Fail(t.Context(), e, 5); err != nil || !parked {
		t.Fatalf("Fail: parked %v, %v", parked, err)
	}
	parked, err := s.List(t.Context(), "k", deadletter.Parked, "", 10)
	if err != nil || len(parked) != 1 || parked[0].ID != "e1" {
		t.Fatalf("parked %+v, %v: want e1, readable", parked, err)
	}
	if err := s.Requeue(t.Context(), "k", "e1", time.Now()); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
}
