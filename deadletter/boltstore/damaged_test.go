package boltstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
)

// A file damaged on disk (one page overwritten, a file cut short): Open or
// the first read must return an error, never panic. bbolt panics on a page
// that does not identify itself or a freelist that is not one, and the
// store does not recover: in the queue's goroutine (round → Next → view)
// or in grpcmw.New (Open, Keys), that panic kills the process.
func TestBoltDamagedFileIsAnErrorNotAPanic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(f *os.File, size int64) error
	}{
		{"page 2 overwritten", func(f *os.File, _ int64) error {
			_, err := f.WriteAt([]byte(strings.Repeat("\xAB", 4096)), 2*4096)
			return err
		}},
		{"cut to half", func(f *os.File, size int64) error { return f.Truncate(size / 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dl.db")
			s, err := boltstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 5 {
				for i := range 100 {
					e := deadletter.Entry{ID: fmt.Sprint("e", i), Key: fmt.Sprint("key-", k), Payload: []byte(strings.Repeat("x", 200))}
					if err := s.Append(t.Context(), e, deadletter.Config{}.Limits()); err != nil {
						t.Fatal(err)
					}
				}
			}
			_ = s.Close()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			err = tc.damage(f, fi.Size())
			_ = f.Close()
			if err != nil {
				t.Fatal(err)
			}
			step := "Open"
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic in %s on a damaged file: %v", step, r)
				}
			}()
			s, err = boltstore.Open(path)
			if err != nil {
				return // an error is the right answer
			}
			defer s.Close()
			step = "Keys"
			if _, err := s.Keys(t.Context()); err != nil {
				return
			}
			step = "Lease.Next"
			l, err := s.Lease(t.Context(), "key-0", "o", time.Minute)
			if err != nil {
				return
			}
			defer l.Release(t.Context())
			_, _, _ = l.Next(t.Context())
		})
	}
}
