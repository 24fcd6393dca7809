package deadletter_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// maxAge shorter than the pace of a slow replayRate: the round checked an
// entry's age, then waited for its turn (a minute at one replay a minute),
// then replayed it, twice maxAge old. An entry past maxAge must be expired,
// never replayed: the age is checked again once its turn has come.
func TestAnEntryThatAgesPastMaxAgeWhileItWaitsForItsTurnIsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		cfg := deadletter.Config{MaxAge: 30 * time.Second, ReplayRate: 1.0 / 60}
		q := newQueue(t, deadlettertest.NewStore(nil), cfg, deadletter.WithListener(l))
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		synctest.Wait() // the first round found nothing
		deferN(t, q, "k", 3)
		g.set(nil)
		q.Kick("k")
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, []string{"k-00"}) {
			t.Errorf("replayed %v, want only k-00: the others were past maxAge (30s) when their turn came (one a minute)", got)
		}
		if n := l.count("k", deadletter.EventExpired); n != 2 {
			t.Errorf("expired %d, want 2", n)
		}
	})
}
