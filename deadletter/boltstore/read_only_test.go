package boltstore_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
)

// A store file the process may not write (mode 0444, as an operator's
// copy of a dead pod's file often is; the same error comes from a
// read-only filesystem, EROFS, checked by hand with a read-only tmpfs)
// is an error at Open that names the path and says why: never a hang on
// the file's lock, never a panic, never a store that fails at its first
// write. A process that may write it anyway (root ignores the mode) gets a
// working store.
func TestAReadOnlyFileIsAnErrorThatNamesIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), deadletter.Entry{ID: "a", Key: "k", Enqueued: time.Now()}, deadletter.Limits{MaxEntries: 10, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	s, err = boltstore.Open(path) // a hang would end at go test's -timeout
	if err != nil {
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open of a read-only file: %v; want an error matching fs.ErrPermission that names %s", err, path)
		}
		return
	}
	t.Log("this process may write a 0444 file (root): the store must work")
	defer s.Close()
	if err := s.Append(t.Context(), deadletter.Entry{ID: "b", Key: "k", Enqueued: time.Now()}, deadletter.Limits{MaxEntries: 10, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if es, err := s.List(t.Context(), "k", deadletter.Waiting, "", 10); err != nil || len(es) != 2 {
		t.Fatalf("List: %d entries, %v; want 2", len(es), err)
	}
}
