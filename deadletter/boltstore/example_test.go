package boltstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
)

// A queue over a local file: what Defer accepted is on disk, and a queue
// that opens the file after a restart replays it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "deadletter")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := boltstore.Open(filepath.Join(dir, "deadletter.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	q, err := deadletter.New(store, deadletter.Config{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	_ = q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error {
		return circuitbreaker.ErrOpen // the breaker is still open: the entry waits
	})
	err = q.Defer(context.Background(), deadletter.Entry{Key: "pkg.Svc", Payload: []byte("hi")}, circuitbreaker.ErrOpen)
	fmt.Println(err != nil)

	st, _ := store.Stats(context.Background(), "pkg.Svc")
	fmt.Println(st.Waiting, "waiting")
	// Output:
	// true
	// 1 waiting
}
