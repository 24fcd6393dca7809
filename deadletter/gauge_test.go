package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// interleave is an in-memory store whose next call of an operation can be
// held once the store has run it, until the test releases it: a test
// orders a round's read of the figures against a deferral, a requeue or a
// purge.
type interleave struct {
	*deadlettertest.Store
	mu    sync.Mutex
	holds map[string]*hold
}

// hold is one held call: ran is closed once the store ran it; the call
// returns once release is closed.
type hold struct{ ran, release chan struct{} }

func newInterleave() *interleave {
	return &interleave{Store: deadlettertest.NewStore(nil), holds: map[string]*hold{}}
}

// holdNext holds the next call of op.
func (s *interleave) holdNext(op string) *hold {
	h := &hold{ran: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[op] = h
	return h
}

func (s *interleave) pause(op string) {
	s.mu.Lock()
	h := s.holds[op]
	delete(s.holds, op)
	s.mu.Unlock()
	if h != nil {
		close(h.ran)
		<-h.release
	}
}

func (s *interleave) Stats(ctx context.Context, key string) (deadletter.Stats, error) {
	st, err := s.Store.Stats(ctx, key)
	s.pause("Stats")
	return st, err
}

func (s *interleave) Purge(ctx context.Context, key, id string) error {
	err := s.Store.Purge(ctx, key, id)
	s.pause("Purge")
	return err
}

// A deferral that lands while a round reads the key's figures (after the
// read, before the round stores what it read) must still count: the guard
// kicks a replay after a successful live event only when entries wait, and
// the oldest-age gauge must show the entry's age.
func TestADeferralDuringARefreshIsStillCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newInterleave()
		read := store.holdNext("Stats") // the start-up round's read of the figures
		l := newListener()
		q := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		br, err := circuitbreaker.New(circuitbreaker.WithName("orders"))
		if err != nil {
			t.Fatal(err)
		}
		defer br.Close()
		var backend replays
		g, err := deadletter.NewGuard(q, br, func(ctx context.Context, e deadletter.Entry) error {
			backend.add(string(e.Payload))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		<-read.ran // the start-up round read the store: nothing waits
		br.ForceOpen()
		if err := g.Do(t.Context(), deadletter.Entry{Payload: []byte("deferred")}); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("with the breaker open: %v", err)
		}
		close(read.release) // the round stores what it read
		synctest.Wait()
		time.Sleep(time.Second)
		if n := q.Pending("orders"); n != 1 {
			t.Errorf("Pending %d after a deferral that landed during the round's read, want 1", n)
		}
		if w, _, age := l.gauges("orders"); w != 1 || age != time.Second {
			t.Errorf("gauges: waiting %d, oldest age %v; want 1 and 1s", w, age)
		}
		br.Reset() // the backend is back
		if err := g.Do(t.Context(), deadletter.Entry{Payload: []byte("live")}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // no time passes: only a kick can replay now
		if got := backend.got(); !slices.Equal(got, []string{"live", "deferred"}) {
			t.Fatalf("the backend saw %v, want [live deferred]: the successful live event must kick the replay "+
				"of the waiting entry, not leave it to the interval", got)
		}
	})
}

// The same for a requeue: the entry moved back to the waiting ones counts
// as waiting while the next round runs.
func TestARequeueDuringARefreshIsStillCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newInterleave()
		l := newListener()
		q := newQueue(t, store, deadletter.Config{MaxReplays: 1}, deadletter.WithListener(l))
		var g gate
		g.set(errBoom)
		_ = q.Handle("k", g.handle)
		ids := deferN(t, q, "k", 1)
		q.Kick("k")
		synctest.Wait() // the entry failed once: parked
		if w, p, _ := l.gauges("k"); w != 0 || p != 1 {
			t.Fatalf("after the park: waiting %d parked %d", w, p)
		}
		g.set(errOpen) // replays are refused from now on: the entry stays waiting
		first := store.holdNext("Stats")
		q.Kick("k")
		<-first.ran // the round read the figures: none waiting, one parked
		if err := q.Requeue(t.Context(), "k", ids[0]); err != nil {
			t.Fatal(err)
		}
		second := store.holdNext("Stats") // the round the requeue kicked
		close(first.release)
		<-second.ran
		if w, _, _ := l.gauges("k"); w != 1 {
			t.Errorf("waiting gauge %d after a requeue that landed during a round's read, want 1", w)
		}
		close(second.release)
		synctest.Wait()
		if w, p, _ := l.gauges("k"); w != 1 || p != 0 {
			t.Errorf("after the next round: waiting %d parked %d, want 1 and 0", w, p)
		}
	})
}

// A purge that lands before a round reads the figures but is counted after
// the round stored them must not take the parked gauge below what the
// store holds.
func TestAPurgeDuringARefreshIsNotCountedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newInterleave()
		l := newListener()
		q := newQueue(t, store, deadletter.Config{MaxReplays: 1}, deadletter.WithListener(l))
		var g gate
		g.set(errBoom)
		_ = q.Handle("k", g.handle)
		ids := deferN(t, q, "k", 2)
		q.Kick("k")
		time.Sleep(time.Minute) // each fails once, a round apart: both parked
		synctest.Wait()
		if w, p, _ := l.gauges("k"); w != 0 || p != 2 {
			t.Fatalf("after the parks: waiting %d parked %d", w, p)
		}
		purge := store.holdNext("Purge")
		done := make(chan error)
		go func() { done <- q.Purge(t.Context(), "k", ids[0]) }()
		<-purge.ran // the store purged it; the queue has not counted it yet
		q.Kick("k")
		synctest.Wait() // the round read one parked entry and stored it
		close(purge.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, p, _ := l.gauges("k"); p != 1 {
			t.Errorf("parked gauge %d with one entry parked", p)
		}
	})
}

// With a store shared by several queues the store's figures stay the
// authority: what another queue replayed leaves this queue's gauge at its
// next round, while a deferral that raced that round's read still counts.
func TestTheSharedStoreStaysTheAuthorityOverTheGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newInterleave()
		l := newListener()
		qa := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		var ga gate
		ga.set(errOpen)
		_ = qa.Handle("k", ga.handle)
		synctest.Wait()
		deferN(t, qa, "k", 2)
		qb := newQueue(t, store, deadletter.Config{}) // another instance, whose backend is back
		var gb gate
		_ = qb.Handle("k", gb.handle) // its start-up round replays both
		time.Sleep(time.Second)       // its pace: 50 replays a second
		synctest.Wait()
		if got := gb.r.got(); len(got) != 2 {
			t.Fatalf("the other queue replayed %v, want both entries", got)
		}
		read := store.holdNext("Stats")
		qa.Kick("k")
		<-read.ran // qa's round read the store: nothing waits
		if err := qa.Defer(t.Context(), deadletter.Entry{ID: "late", Key: "k"}, errOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
		close(read.release)
		synctest.Wait()
		if n := qa.Pending("k"); n != 1 {
			t.Fatalf("Pending %d, want 1: the two the other queue replayed are gone, the late deferral waits", n)
		}
	})
}

// A round whose read of the figures fails leaves the gauges as they were,
// and the deferrals after it count as before.
func TestAFailedReadKeepsTheGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := deadlettertest.NewStore(nil)
		l := newListener()
		q := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		synctest.Wait()
		deferN(t, q, "k", 2)
		store.FailNext("Stats", errBoom)
		q.Kick("k")
		synctest.Wait()
		if w, _, _ := l.gauges("k"); w != 2 {
			t.Fatalf("waiting gauge %d after a failed read, want 2 (kept)", w)
		}
		if err := q.Defer(t.Context(), deadletter.Entry{ID: "third", Key: "k"}, errOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
		if w, _, _ := l.gauges("k"); w != 3 {
			t.Fatalf("waiting gauge %d, want 3", w)
		}
		q.Kick("k")
		synctest.Wait()
		if w, _, _ := l.gauges("k"); w != 3 {
			t.Fatalf("waiting gauge %d after a good read, want 3", w)
		}
	})
}
