package boltstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		deferThenWait() // a child process of TestSIGKILLBetweenDeferAndReplay
		return
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestKeepsTheStoreContract(t *testing.T) {
	deadlettertest.TestStore(t, func(t *testing.T) deadletter.Store {
		return open(t, filepath.Join(t.TempDir(), "dl.db"))
	})
}

func TestOpeningOnePathTwiceSharesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dl.db")
	a := open(t, path)
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	b := open(t, filepath.Join(dir, "link", ".", "dl.db")) // another spelling of the same file
	e := deadletter.Entry{ID: "1", Key: "k", Enqueued: time.Now()}
	if err := a.Append(t.Context(), e, deadletter.Config{}.Limits()); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Stats(t.Context(), "k"); err != nil || st.Waiting != 1 {
		t.Fatalf("the second handle sees %+v, %v", st, err)
	}
	// Leases are shared: one holder per key in the process.
	l, err := a.Lease(t.Context(), "k", "one", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lease(t.Context(), "k", "two", time.Minute); !errors.Is(err, deadletter.ErrLeased) {
		t.Fatalf("a second holder through the other handle: %v", err)
	}
	_ = l.Release(t.Context())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Stats(t.Context(), "k"); err != nil || st.Waiting != 1 {
		t.Fatalf("after closing the first handle the second sees %+v, %v", st, err)
	}
	if _, err := a.Stats(t.Context(), "k"); !errors.Is(err, deadletter.ErrClosed) {
		t.Fatalf("a closed handle: %v", err)
	}
	_ = b.Close()
	c := open(t, path) // closed with its last handle: it opens again
	if st, _ := c.Stats(t.Context(), "k"); st.Waiting != 1 {
		t.Fatal("the entry did not survive closing and reopening")
	}
}

func TestALockedFileIsAnErrorNotAWait(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dl.db")
	open(t, path)
	// A hard link is another path to the same file: this process holds its
	// lock through the first path, as another process would.
	if err := os.Link(path, filepath.Join(dir, "hard.db")); err != nil {
		t.Skip("no hard links here:", err)
	}
	start := time.Now()
	_, err := boltstore.Open(filepath.Join(dir, "hard.db"))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("locked by another process")) {
		t.Fatalf("Open of a locked file: %v", err)
	}
	if took := time.Since(start); took > 10*boltstore.LockTimeout {
		t.Fatalf("Open waited %v", took)
	}
}

// The file's bytes never hold metadata that is not on the allow-list.
func TestMetadataOffTheAllowListNeverReachesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	store := open(t, path)
	q, err := deadletter.New(store, deadletter.Config{Metadata: deadletter.Allow("x-request-id")}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Handle("k", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen })
	md := map[string][]string{
		"x-request-id":  {"REQUEST-ID-KEPT-4711"},
		"authorization": {"Bearer SECRET-TOKEN-0815"},
		"cookie":        {"session=SECRET-COOKIE-42"},
	}
	if err := q.Defer(t.Context(), deadletter.Entry{Key: "k", Metadata: md}, circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatal(err)
	}
	_ = q.Close()
	_ = store.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("REQUEST-ID-KEPT-4711")) {
		t.Fatal("the allowed metadata is not in the file: the check below would prove nothing")
	}
	for _, secret := range []string{"SECRET-TOKEN-0815", "SECRET-COOKIE-42", "authorization", "cookie"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the file holds %q", secret)
		}
	}
}

// A file damaged outside the store: counters missing, an entry that does
// not decode. The store recounts, drops the bad entry (reported), and goes
// on with the rest.
func TestADamagedFileIsReadAsHostile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	good, _ := deadletter.Entry{ID: "good", Key: "k", Enqueued: time.Now()}.MarshalBinary()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		root, _ := tx.CreateBucketIfNotExists([]byte("meshless-deadletter/v1"))
		k, _ := root.CreateBucket([]byte("k"))
		w, _ := k.CreateBucket([]byte("w"))
		_, _ = k.CreateBucket([]byte("p"))
		_ = w.Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("garbage"))
		_ = k.Put([]byte("nw"), []byte("not a counter"))
		_, _ = root.CreateBucket([]byte("bad\x00key")) // not a valid key: never listed
		return w.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, good)
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	if st, err := s.Stats(t.Context(), "k"); err != nil || st.Waiting != 2 {
		t.Fatalf("recounted stats %+v, %v", st, err)
	}
	if keys, _ := s.Keys(t.Context()); !slices.Equal(keys, []string{"k"}) {
		t.Fatalf("keys %q", keys)
	}
	l, _ := s.Lease(t.Context(), "k", "o", time.Minute)
	defer l.Release(context.WithoutCancel(t.Context()))
	_, _, err = l.Next(t.Context())
	var ce *deadletter.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, deadletter.ErrInvalidEntry) {
		t.Fatalf("the garbage entry: %v", err)
	}
	if e, ok, err := l.Next(t.Context()); err != nil || !ok || e.ID != "good" {
		t.Fatalf("after dropping it: %v %v %v", e.ID, ok, err)
	}
}

const childEnv = "BOLTSTORE_TEST_CHILD_PATH"

var quiet = deadletter.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// deferThenWait runs in a child process: it defers 20 entries (the
// breaker is open, so none is replayed), says so, and waits to be killed.
func deferThenWait() {
	store, err := boltstore.Open(os.Getenv(childEnv))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	q, err := deadletter.New(store, deadletter.Config{}, quiet)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	_ = q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen })
	for i := range 20 {
		e := deadletter.Entry{ID: "e" + strconv.Itoa(100+i), Key: "pkg.Svc", Payload: []byte{byte(i)}}
		if err := q.Defer(context.Background(), e, circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	fmt.Println("deferred")
	select {} // until SIGKILL
}

func TestSIGKILLBetweenDeferAndReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "deferred\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child said %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no defer, no Close, no flush
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// The next start.
	clk := resiliencetest.NewClock(time.Now())
	store := open(t, path)
	q, err := deadletter.New(store, deadletter.Config{}, deadletter.WithClock(clk), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var (
		mu  sync.Mutex
		got []string
	)
	done := make(chan struct{})
	err = q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.ID)
		if len(got) == 20 {
			close(done)
		}
		clk.Advance(time.Second) // past the replay pace
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-done // the start-up round, with no kick
	var want []string
	for i := range 20 {
		want = append(want, "e"+strconv.Itoa(100+i))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("replayed after the kill %v, want %v", got, want)
	}
}

// A full key refuses, and the caller gets the breaker's own rejection; the
// file holds exactly the entries it accepted.
func TestAFullFileRefusesWithTheOriginalRejection(t *testing.T) {
	store := open(t, filepath.Join(t.TempDir(), "dl.db"))
	q, err := deadletter.New(store, deadletter.Config{MaxEntries: 3}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_ = q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen })
	rejection := &circuitbreaker.OpenError{Name: "pkg.Svc", State: circuitbreaker.StateOpen}
	for i := range 5 {
		err := q.Defer(t.Context(), deadletter.Entry{Key: "pkg.Svc", Payload: []byte{byte(i)}}, rejection)
		switch {
		case i < 3 && !errors.Is(err, deadletter.ErrDeferred):
			t.Fatalf("deferral %d: %v", i, err)
		case i >= 3 && err != error(rejection):
			t.Fatalf("deferral %d into a full key returned %v, want the original rejection", i, err)
		}
	}
	if st, _ := store.Stats(t.Context(), "pkg.Svc"); st.Waiting != 3 {
		t.Fatalf("the file holds %d entries, want 3", st.Waiting)
	}
}
