package dlqueues_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlqueues"
	"github.com/meshless/meshless/resilience"
)

// An engine's queues: a key's queue made on its first deferrable call, a
// call deferred in it, replayed when the key's breaker closes (Kick), and
// everything closed in two steps.
func Example() {
	dir, err := os.MkdirTemp("", "dlqueues-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	replayed := make(chan deadletter.Entry, 1)
	qs := dlqueues.New(dlqueues.Options{
		Clock: resilience.SystemClock(),
		Replay: func(_ context.Context, e deadletter.Entry) error { // the transport makes the call again
			replayed <- e
			return nil
		},
	})

	dl := config.DeadLetter{Config: deadletter.DefaultConfig()}
	dl.Config.Path = filepath.Join(dir, "deadletter.db")
	q, err := qs.Queue("pkg.Svc", dl)
	if err != nil {
		fmt.Println(err)
		return
	}
	again, _ := qs.Queue("pkg.Svc", dl)
	fmt.Println("same queue for the same section:", again == q)

	err = q.Defer(context.Background(), deadletter.Entry{Key: "pkg.Svc", Method: "/pkg.Svc/Notify", Payload: []byte("hi")}, errors.New("circuit open"))
	fmt.Println("deferred:", errors.Is(err, deadletter.ErrDeferred))

	qs.Kick("pkg.Svc") // the key's breaker closed
	e := <-replayed
	fmt.Println("replayed:", e.Method, string(e.Payload))

	closeQueues := qs.Detach() // under the engine's lock
	closeQueues()              // once the lock is released
	// Output:
	// same queue for the same section: true
	// deferred: true
	// replayed: /pkg.Svc/Notify hi
}
