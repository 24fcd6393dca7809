package boltstore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter/boltstore"
)

// A bbolt file that is not a dead-letter store: another program's (a path
// mistyped in a configuration or on the operator's command line), or a
// newer version's (its root bucket named otherwise). Open must refuse it,
// naming it, and leave it as it was: not add its own bucket to it and
// report no keys, which the operator's command printed as an empty queue.
func TestBoltForeignFileIsRefusedAndLeftAsItWas(t *testing.T) {
	for _, bucket := range []string{"sessions", "meshless-deadletter/v2"} {
		t.Run(bucket, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "other.db")
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte(bucket))
				if err != nil {
					return err
				}
				return b.Put([]byte("x"), []byte("y"))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := boltstore.Open(path)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open accepted a file that is not a dead-letter store")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a dead-letter store") {
				t.Errorf("the error does not say which file, and why: %v", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("Open wrote into a file that is not a dead-letter store")
			}
		})
	}
}
