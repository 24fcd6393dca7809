package deadletter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/internal/engine"
)

// A replay the transport cannot make yet (engine.NotYet, e.g. grpcmw's
// errNoConn before the chain's first call, a KindDeadLetter rejection)
// waits for the transport's kick (or the interval), unlike another policy's
// refusal (a full bulkhead: 1s later): polling every second would lease,
// read and release the store for nothing until a call comes.
func TestAReplayWithNoConnectionYetWaitsForTheKick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
		var calls atomic.Int32
		notYet := engine.NotYet("no connection to replay on yet")
		if err := q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error {
			calls.Add(1)
			return notYet
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		deferN(t, q, "pkg.Svc", 1)
		q.Kick("pkg.Svc")
		synctest.Wait()
		time.Sleep(9 * time.Second) // less than the 10s interval
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d replays in 9s with no connection, want 1 (the next waits for the kick or the interval)", n)
		}
	})
}
