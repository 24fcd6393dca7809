package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A call deferred once its context has ended — above all one whose every
// attempt failed because its caller's deadline passed (DEADLINE_EXCEEDED is
// a failure, on: [RETRIES_EXHAUSTED]) — is kept in Redis as in a bbolt
// file, whose Append takes no context. The Redis store was handed the
// ended context: its append failed at once ("context deadline exceeded"),
// the call was counted refused, logged as a store error, and the losing
// alert fired for every such call.
func TestACallWhoseContextEndedIsStillKept(t *testing.T) {
	srv := redistest.Start(t)
	clk := resiliencetest.NewClock(time.Now())
	events := newCounter()
	q := queue(t, open(t, client(t, srv), "ended"), clk, events, "pod")
	// The breaker stays open: a replay round leaves the entries waiting.
	if err := q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen }); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for i, ctx := range []context.Context{expired, cancelled} {
		err := q.Defer(ctx, entry(i), context.DeadlineExceeded)
		if !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("Defer with an ended context (%v) = %v, want the call kept (ErrDeferred)", ctx.Err(), err)
		}
	}
	st, err := open(t, client(t, srv), "ended").Stats(context.Background(), "pkg.Svc")
	if err != nil {
		t.Fatal(err)
	}
	if st.Waiting != 2 {
		t.Fatalf("waiting %d in Redis, want 2", st.Waiting)
	}
}
