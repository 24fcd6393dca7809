package deadletter_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// A message-broker consumer whose handler calls a backend through a circuit
// breaker: while the breaker is open, events are deferred (the consumer
// acks them: they are kept), and replayed through the same handler and
// breaker once it closes. A real service keeps them in a bbolt file
// (deadletter/boltstore) or in Redis (deadletter/redisstore).
func ExampleGuard() {
	store := deadlettertest.NewStore(nil)
	defer store.Close()
	q, err := deadletter.New(store, deadletter.Config{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	br, err := circuitbreaker.New(circuitbreaker.WithName("orders"))
	if err != nil {
		panic(err)
	}
	defer br.Close()

	handled := make(chan string, 1)
	guard, err := deadletter.NewGuard(q, br, func(ctx context.Context, e deadletter.Entry) error {
		_, replay := deadletter.ReplayID(ctx) // the server can deduplicate on it
		handled <- fmt.Sprintf("%s (replay: %v)", e.Payload, replay)
		return nil
	})
	if err != nil {
		panic(err)
	}

	br.ForceOpen() // the backend is failing
	err = guard.Do(context.Background(), deadletter.Entry{ID: "msg-1", Payload: []byte("order 1")})
	fmt.Println("deferred:", errors.Is(err, deadletter.ErrDeferred))

	br.Reset()        // the backend is back and the breaker closed
	q.Kick(br.Name()) // what the engine does when a breaker closes
	fmt.Println(<-handled)
	// Output:
	// deferred: true
	// order 1 (replay: true)
}

// Deferring a call by hand: the error to return is what Defer returns.
func ExampleQueue_Defer() {
	store := deadlettertest.NewStore(nil)
	defer store.Close()
	q, err := deadletter.New(store, deadletter.Config{Metadata: deadletter.Allow("x-request-id")})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	_ = q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error {
		return circuitbreaker.ErrOpen // still open: the entry waits
	})

	rejection := circuitbreaker.ErrOpen // what the breaker said
	err = q.Defer(context.Background(), deadletter.Entry{
		Key: "pkg.Svc", Method: "/pkg.Svc/Notify", Payload: []byte("hello"),
		Metadata: map[string][]string{"x-request-id": {"r-1"}, "authorization": {"Bearer …"}},
	}, rejection)
	var de *deadletter.DeferredError
	fmt.Println(errors.As(err, &de), de.Key)

	kept, _ := store.List(context.Background(), "pkg.Svc", deadletter.Waiting, "", 10)
	fmt.Println(kept[0].Method, kept[0].Metadata)
	// Output:
	// true pkg.Svc
	// /pkg.Svc/Notify map[x-request-id:[r-1]]
}
