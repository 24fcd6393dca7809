package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/resilience"
)

// Every queue test runs in a synctest bubble over the in-memory store: the
// queue reads the system clock, which is the bubble's, and synctest.Wait
// returns once every round in flight is over.

func TestReplayWaitsForTheBreakerThenGoesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{}, deadletter.WithListener(l))
		var g gate
		g.set(errOpen) // the breaker is still open
		if err := q.Handle("pkg.Svc", g.handle); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first round, at once, is over: its refresh cannot race the deferrals
		want := deferN(t, q, "pkg.Svc", 5)
		if w, _, _ := l.gauges("pkg.Svc"); w != 5 {
			t.Fatalf("waiting gauge %d after 5 deferrals", w)
		}
		q.Kick("pkg.Svc")
		synctest.Wait()
		if got := g.r.got(); len(got) != 0 || l.count("pkg.Svc", deadletter.EventFailed) != 0 {
			t.Fatalf("replayed %v (failed %d) through an open breaker: a rejection must stop the round, uncounted",
				got, l.count("pkg.Svc", deadletter.EventFailed))
		}
		g.set(nil) // the breaker closed
		q.Kick("pkg.Svc")
		time.Sleep(time.Second) // bubble time: 5 replays at 50/s take 80 ms
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, want) {
			t.Fatalf("replayed %v, want %v", got, want)
		}
		if n := l.count("pkg.Svc", deadletter.EventReplayed); n != 5 {
			t.Fatalf("replayed counted %d, want 5", n)
		}
		if w, p, age := l.gauges("pkg.Svc"); w != 0 || p != 0 || age != 0 {
			t.Fatalf("gauges after draining: waiting %d parked %d age %v", w, p, age)
		}
	})
}

func TestStartupRoundReplaysWhatAPreviousRunLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := deadlettertest.NewStore(nil)
		first := newQueue(t, store, deadletter.Config{})
		var g1 gate
		g1.set(errOpen)
		_ = first.Handle("k", g1.handle)
		want := deferN(t, first, "k", 3)
		_ = first.Close() // the process ends; the store keeps its entries

		var g2 gate
		second := newQueue(t, store, deadletter.Config{})
		_ = second.Handle("k", g2.handle) // no kick: the start-up round
		time.Sleep(time.Second)
		synctest.Wait()
		if got := g2.r.got(); !slices.Equal(got, want) {
			t.Fatalf("start-up round replayed %v, want %v", got, want)
		}
	})
}

func TestTheTimerReplaysWithoutAKick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{}, deadletter.WithInterval(30*time.Second))
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		synctest.Wait() // the start-up round found nothing
		deferN(t, q, "k", 2)
		g.set(nil)
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if got := g.r.got(); len(got) != 0 {
			t.Fatalf("replayed %v before the interval", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := g.r.got(); len(got) != 2 {
			t.Fatalf("after the interval replayed %v, want 2 entries", got)
		}
	})
}

func TestPoisonEntryIsParkedAfterMaxReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{MaxReplays: 3}, deadletter.WithListener(l))
		var good replays
		attempts := 0
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			if e.ID == "k-00" {
				attempts++
				return errBoom // this one always fails
			}
			good.add(e.ID)
			return nil
		})
		ids := deferN(t, q, "k", 3)
		q.Kick("k")
		time.Sleep(time.Minute) // backoffs of 1s, 2s, then the rest
		synctest.Wait()
		if attempts != 3 {
			t.Fatalf("the poison entry was replayed %d times, want 3 (maxReplays)", attempts)
		}
		if l.count("k", deadletter.EventFailed) != 2 || l.count("k", deadletter.EventParked) != 1 {
			t.Fatalf("failed %d parked %d, want 2 and 1", l.count("k", deadletter.EventFailed), l.count("k", deadletter.EventParked))
		}
		if got := good.got(); !slices.Equal(got, ids[1:]) {
			t.Fatalf("the entries behind it: %v, want %v", got, ids[1:])
		}
		parked, err := q.List(t.Context(), "k", deadletter.Parked, "", 10)
		if err != nil || len(parked) != 1 || parked[0].ID != "k-00" || parked[0].Replays != 3 {
			t.Fatalf("parked %+v %v", parked, err)
		}
		if _, p, _ := l.gauges("k"); p != 1 {
			t.Fatalf("parked gauge %d", p)
		}
	})
}

func TestAFailureStopsTheRoundAndKeepsTheOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{MaxReplays: 10})
		var g gate
		g.set(errBoom)
		_ = q.Handle("k", g.handle)
		want := deferN(t, q, "k", 3)
		q.Kick("k")
		synctest.Wait()
		g.set(nil)
		time.Sleep(time.Minute) // the backoff's round
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, want) {
			t.Fatalf("replayed %v, want %v: a failed head must not be overtaken", got, want)
		}
	})
}

func TestMaxAgeExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{MaxAge: time.Hour}, deadletter.WithListener(l))
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		deferN(t, q, "k", 2)
		time.Sleep(30 * time.Minute)
		if err := q.Defer(t.Context(), deadletter.Entry{ID: "young", Key: "k"}, errOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
		if _, _, age := l.gauges("k"); age != 30*time.Minute {
			t.Fatalf("oldest age %v, want 30m", age)
		}
		time.Sleep(30 * time.Minute) // the first two are an hour old
		g.set(nil)
		q.Kick("k")
		time.Sleep(time.Second) // the round may wait for its pace
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, []string{"young"}) {
			t.Fatalf("replayed %v, want only the young entry", got)
		}
		if n := l.count("k", deadletter.EventExpired); n != 2 {
			t.Fatalf("expired %d, want 2", n)
		}
	})
}

func TestReplaysArePacedAtTheReplayRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{ReplayRate: 4})
		var starts []time.Duration
		t0 := time.Now()
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			starts = append(starts, time.Since(t0))
			return nil
		})
		deferN(t, q, "k", 5)
		q.Kick("k")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}
		if !slices.Equal(starts, want) {
			t.Fatalf("replays started at %v, want %v (4 a second)", starts, want)
		}
	})
}

func TestEachReplayHasItsOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{ReplayTimeout: 3 * time.Second}, deadletter.WithListener(l))
		var took time.Duration
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			start := time.Now()
			<-ctx.Done() // a backend that never answers
			took = time.Since(start)
			return ctx.Err()
		})
		deferN(t, q, "k", 1)
		q.Kick("k")
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if took != 3*time.Second || l.count("k", deadletter.EventFailed) != 1 {
			t.Fatalf("the replay ended after %v (failed %d), want 3s and one failure", took, l.count("k", deadletter.EventFailed))
		}
	})
}

func TestAPanickingHandlerIsAFailedReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{MaxReplays: 1}, deadletter.WithListener(l))
		_ = q.Handle("k", func(context.Context, deadletter.Entry) error { panic("bug") })
		deferN(t, q, "k", 1)
		q.Kick("k")
		synctest.Wait()
		if l.count("k", deadletter.EventParked) != 1 {
			t.Fatalf("parked %d after a panic with maxReplays 1", l.count("k", deadletter.EventParked))
		}
	})
}

func TestCloseStopsAReplayInFlightUncounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		started := make(chan struct{})
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		deferN(t, q, "k", 1)
		q.Kick("k")
		<-started
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if n := l.count("k", deadletter.EventFailed); n != 0 {
			t.Fatalf("a replay cut by Close counted as failed (%d)", n)
		}
		if st, _ := store.Stats(t.Context(), "k"); st.Waiting != 1 {
			t.Fatalf("the entry is gone after Close: %+v", st)
		}
		if err := q.Defer(t.Context(), deadletter.Entry{Key: "k"}, errOpen); err != errOpen {
			t.Fatalf("Defer after Close returned %v, want the cause unchanged", err)
		}
	})
}

func TestNotKeptReturnsTheCauseUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(s *deadlettertest.Store)
		key   string
	}{
		{name: "full", setup: func(*deadlettertest.Store) {}, key: "k"},
		{name: "store error", setup: func(s *deadlettertest.Store) { s.FailNext("Append", errBoom) }, key: "k"},
		{name: "no handler", setup: func(*deadlettertest.Store) {}, key: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newListener()
				store := deadlettertest.NewStore(nil)
				q := newQueue(t, store, deadletter.Config{MaxEntries: 2}, deadletter.WithListener(l))
				var g gate
				g.set(errOpen)
				_ = q.Handle("k", g.handle)
				if tc.name == "full" {
					deferN(t, q, "k", 2)
				}
				tc.setup(store)
				err := q.Defer(t.Context(), deadletter.Entry{Key: tc.key, Payload: []byte("x")}, errOpen)
				if err != errOpen {
					t.Fatalf("Defer returned %v, want the original rejection itself", err)
				}
				if errors.Is(err, deadletter.ErrDeferred) {
					t.Fatal("a refused entry matches ErrDeferred")
				}
				if n := l.count(tc.key, deadletter.EventRefused); n != 1 {
					t.Fatalf("refused counted %d", n)
				}
			})
		})
	}
}

func TestDeferredErrorIsARejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		err := q.Defer(t.Context(), deadletter.Entry{Key: "k"}, errOpen)
		var de *deadletter.DeferredError
		if !errors.As(err, &de) || de.Key != "k" || len(de.ID) != 32 || de.Cause != errOpen {
			t.Fatalf("Defer returned %#v", err)
		}
		r, ok := resilience.AsRejection(err)
		if !ok || r.RejectedBy() != resilience.KindDeadLetter {
			t.Fatalf("not a dead-letter rejection: %v", err)
		}
		if errors.Is(err, errOpen) {
			t.Fatal("a deferred call matches the breaker's ErrOpen: a consumer would redeliver it")
		}
	})
}

func TestAReplayIsNeverDeferredAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		var inner error
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			inner = q.Defer(ctx, e, errOpen) // what an engine would do on a rejection
			return inner
		})
		deferN(t, q, "k", 1)
		q.Kick("k")
		synctest.Wait()
		if inner != errOpen || l.count("k", deadletter.EventDeferred) != 1 {
			t.Fatalf("a replay's Defer returned %v, deferred %d times", inner, l.count("k", deadletter.EventDeferred))
		}
		if st, _ := store.Stats(t.Context(), "k"); st.Waiting != 1 {
			t.Fatalf("waiting %d, want the one entry", st.Waiting)
		}
	})
}

func TestACorruptEntryIsDroppedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{}, deadletter.WithListener(l))
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		synctest.Wait() // the first round, at once, is over: none runs while the test defers and corrupts
		ids := deferN(t, q, "k", 2)
		store.Corrupt("k")
		g.set(nil)
		q.Kick("k")
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, ids[1:]) || l.count("k", deadletter.EventDropped) != 1 {
			t.Fatalf("replayed %v, dropped %d", got, l.count("k", deadletter.EventDropped))
		}
	})
}

func TestOnlyAllowedMetadataIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := deadlettertest.NewStore(nil)
		q := newQueue(t, store, deadletter.Config{Metadata: deadletter.Allow("X-Request-ID")})
		var g gate
		g.set(errOpen)
		_ = q.Handle("k", g.handle)
		md := map[string][]string{"X-Request-Id": {"r-1"}, "authorization": {"Bearer secret"}}
		if err := q.Defer(t.Context(), deadletter.Entry{Key: "k", Metadata: md}, errOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
		es, err := store.List(t.Context(), "k", deadletter.Waiting, "", 1)
		if err != nil || len(es) != 1 {
			t.Fatal(es, err)
		}
		if got := es[0].Metadata; len(got) != 1 || !slices.Equal(got["x-request-id"], []string{"r-1"}) {
			t.Fatalf("kept metadata %v, want only x-request-id", got)
		}
	})
}

func TestOperatorRequeueAndPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{MaxReplays: 1}, deadletter.WithListener(l))
		var g gate
		g.set(errBoom)
		_ = q.Handle("k", g.handle)
		deferN(t, q, "k", 2)
		q.Kick("k")
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := l.count("k", deadletter.EventParked); n != 2 {
			t.Fatalf("parked %d, want 2", n)
		}
		g.set(nil)
		if err := q.Requeue(t.Context(), "k", "k-01"); err != nil {
			t.Fatal(err)
		}
		if err := q.Purge(t.Context(), "k", "k-00"); err != nil {
			t.Fatal(err)
		}
		if err := q.Purge(t.Context(), "k", "k-00"); !errors.Is(err, deadletter.ErrNotFound) {
			t.Fatalf("a second purge: %v", err)
		}
		synctest.Wait() // Requeue kicked a round
		if got := g.r.got(); !slices.Equal(got, []string{"k-01"}) {
			t.Fatalf("after requeue replayed %v", got)
		}
		if l.count("k", deadletter.EventRequeued) != 1 || l.count("k", deadletter.EventPurged) != 1 {
			t.Fatal("requeue or purge not counted")
		}
	})
}

func TestHandleTwiceAndBadKeys(t *testing.T) {
	q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
	h := func(context.Context, deadletter.Entry) error { return nil }
	if err := q.Handle("k", h); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		fn        deadletter.Handler
	}{
		{name: "twice", key: "k", fn: h},
		{name: "empty key", key: "", fn: h},
		{name: "control character", key: "a\nb", fn: h},
		{name: "nil handler", key: "j", fn: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := q.Handle(tc.key, tc.fn); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// A replay that another policy than the breaker refuses (a full bulkhead,
// while live calls and replays share it) ends the round uncounted, and the
// next round comes failureBackoff (1s) later, not the interval: no close of
// the breaker will kick the queue. A replay the breaker refuses waits for
// that kick (or the interval).
func TestAReplayRefusedByAFullBulkheadIsTriedAgainSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{}, deadletter.WithListener(l))
		var g gate
		g.set(bulkhead.ErrFull)
		if err := q.Handle("pkg.Svc", g.handle); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want := deferN(t, q, "pkg.Svc", 3)
		q.Kick("pkg.Svc")
		synctest.Wait() // the round met the full bulkhead
		g.set(nil)      // the bulkhead has room again; the breaker never opened
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, want) {
			t.Fatalf("1.5s after a replay met a full bulkhead: replayed %v, want %v (the next round waited for the interval)", got, want)
		}
		if n := l.count("pkg.Svc", deadletter.EventFailed); n != 0 {
			t.Fatalf("%d failed replays counted for a local rejection", n)
		}
	})
}

func TestASecondCloseWaitsForTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
		started, release := make(chan struct{}), make(chan struct{})
		_ = q.Handle("k", func(ctx context.Context, e deadletter.Entry) error {
			close(started)
			<-release // a handler slow to see its context cancelled
			return ctx.Err()
		})
		deferN(t, q, "k", 1)
		q.Kick("k")
		<-started
		var first, second atomic.Bool
		go func() { _ = q.Close(); first.Store(true) }()
		synctest.Wait() // the first Close waits for the replay
		go func() { _ = q.Close(); second.Store(true) }()
		synctest.Wait()
		early1, early2 := first.Load(), second.Load()
		close(release)
		synctest.Wait()
		if early1 || early2 {
			t.Fatalf("Close returned while a replay was still running (first %v, second %v): "+
				"the store may be closed under it", early1, early2)
		}
		if !first.Load() || !second.Load() {
			t.Fatalf("Close still waiting after the replay ended (first %v, second %v)", first.Load(), second.Load())
		}
	})
}
