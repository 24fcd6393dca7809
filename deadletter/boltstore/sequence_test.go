package boltstore_test

import (
	"math"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
)

// A key's entries are kept under sequence numbers from its bucket's
// sequence. A file whose sequence is behind its entries (hand-made,
// damaged, or a hostile one) made the next append take the number of an
// entry still kept: bbolt's Put replaced that entry, lost without a count
// (and the counters drifted), and the new one was replayed in its place,
// before older ones. A sequence at its maximum wrapped to 0: the new entry
// went first. The next number is now past every entry's.
func TestBoltASequenceBehindTheEntriesNeverReplacesOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  uint64
	}{
		{"behind", 0},
		{"at its maximum", math.MaxUint64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := hostileFile(t, func(w *bolt.Bucket) error {
				for i, id := range []string{"e1", "e2"} {
					if err := w.Put(seq(byte(i+1)), goodBlob(t, id)); err != nil {
						return err
					}
				}
				p := w.Tx().Bucket([]byte("meshless-deadletter/v1")).Bucket([]byte("k")).Bucket([]byte("p"))
				if err := p.Put(seq(3), goodBlob(t, "p3")); err != nil {
					return err
				}
				return w.Tx().Bucket([]byte("meshless-deadletter/v1")).Bucket([]byte("k")).SetSequence(tc.seq)
			})
			s := open(t, path)
			lim := deadletter.Config{}.Limits()
			for _, id := range []string{"e4", "e5"} {
				if err := s.Append(t.Context(), deadletter.Entry{ID: id, Key: "k"}, lim); err != nil {
					t.Fatal(err)
				}
			}
			var ids []string
			es, err := s.List(t.Context(), "k", deadletter.Waiting, "", 10)
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			if err != nil || !slices.Equal(ids, []string{"e1", "e2", "e4", "e5"}) {
				t.Fatalf("waiting %v, %v; want e1 e2 e4 e5, in order", ids, err)
			}
			if es, err := s.List(t.Context(), "k", deadletter.Parked, "", 10); err != nil || len(es) != 1 {
				t.Fatalf("parked %v, %v; want p3", es, err)
			}
			if st, err := s.Stats(t.Context(), "k"); err != nil || st.Waiting != 4 || st.Parked != 1 {
				t.Fatalf("stats %+v, %v", st, err)
			}
		})
	}
}
