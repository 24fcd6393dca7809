package deadletter_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// An entry read back from the store with an Enqueued far in the future (a
// hostile or damaged store, a writer whose clock was years ahead): it must
// be bounded (its age clamped) or dropped. It is taken as is: it never
// expires however long it waits, and the oldest-age gauge reads 0 while it
// waits.
func TestFutureEnqueuedStillExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{MaxAge: time.Hour}, deadletter.WithListener(l))
		// What another writer left: stamped 100 years ahead.
		hostile := deadletter.Entry{ID: "future", Key: "k", Enqueued: time.Now().AddDate(100, 0, 0)}
		if err := store.Append(t.Context(), hostile, deadletter.Config{}.Limits()); err != nil {
			t.Fatal(err)
		}
		var g gate
		g.set(errOpen) // the backend stays down: it waits
		_ = q.Handle("k", g.handle)
		time.Sleep(3 * time.Hour) // three times MaxAge
		synctest.Wait()
		q.Kick("k")
		synctest.Wait()
		if n := l.count("k", deadletter.EventExpired); n != 1 {
			w, _, age := l.gauges("k")
			t.Fatalf("an entry stamped 100 years ahead has waited 3h with maxAge 1h: expired %d, still waiting %d (oldest-age gauge %v)", n, w, age)
		}
	})
}
