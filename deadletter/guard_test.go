package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// A consumer's handler guarded by a breaker: while the backend fails the
// breaker opens, events are deferred (the consumer acks them), and once the
// backend is back they are replayed through the same handler and breaker,
// in order, each exactly once.
func TestGuardDefersWhileOpenAndReplaysAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newListener()
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{}, deadletter.WithListener(l))
		br, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowSize = 4
			c.MinimumNumberOfCalls = 4
			c.WaitDurationInOpenState = 5 * time.Second
			c.PermittedNumberOfCallsInHalfOpenState = 1
		})), circuitbreaker.WithName("orders"))
		if err != nil {
			t.Fatal(err)
		}
		defer br.Close()
		var down atomic.Bool
		down.Store(true)
		var backend replays
		g, err := deadletter.NewGuard(q, br, func(ctx context.Context, e deadletter.Entry) error {
			if down.Load() {
				return errBoom
			}
			if id, replay := deadletter.ReplayID(ctx); replay && id != e.ID {
				t.Errorf("replay id %q for entry %q", id, e.ID)
			}
			backend.add(string(e.Payload))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var failed, deferred []string
		for i := range 10 {
			ev := deadletter.Entry{Payload: []byte{'a' + byte(i)}}
			switch err := g.Do(t.Context(), ev); {
			case errors.Is(err, deadletter.ErrDeferred):
				deferred = append(deferred, string(ev.Payload))
			case errors.Is(err, errBoom):
				failed = append(failed, string(ev.Payload))
			default:
				t.Fatalf("event %d: %v", i, err)
			}
		}
		if len(failed) != 4 || len(deferred) != 6 {
			t.Fatalf("failed %v deferred %v: want 4 failures open the breaker, then 6 deferred", failed, deferred)
		}
		down.Store(false)
		time.Sleep(11 * time.Second) // the open wait (5s), then the timer's round (10s) probes, closes and drains
		synctest.Wait()
		if got := backend.got(); !slices.Equal(got, deferred) {
			t.Fatalf("the backend saw %v, want the deferred events in order %v", got, deferred)
		}
		if br.State() != circuitbreaker.StateClosed || l.count("orders", deadletter.EventReplayed) != 6 {
			t.Fatalf("breaker %v, replayed %d", br.State(), l.count("orders", deadletter.EventReplayed))
		}
		// Live events go straight through now.
		if err := g.Do(t.Context(), deadletter.Entry{Payload: []byte("z")}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGuardFullQueueReturnsTheBreakersRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{MaxEntries: 1})
		br, _ := circuitbreaker.New(circuitbreaker.WithName("orders"))
		defer br.Close()
		g, err := deadletter.NewGuard(q, br, func(context.Context, deadletter.Entry) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		br.ForceOpen()
		if err := g.Do(t.Context(), deadletter.Entry{}); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("first event: %v", err)
		}
		err = g.Do(t.Context(), deadletter.Entry{})
		var oe *circuitbreaker.OpenError
		if !errors.As(err, &oe) || errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("with the queue full: %v, want the breaker's own rejection", err)
		}
	})
}

func TestGuardNeedsItsParts(t *testing.T) {
	q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
	if _, err := deadletter.NewGuard(q, nil, nil); err == nil {
		t.Fatal("no error")
	}
}

func TestGuardAPanicIsAFailureAndGoesOnUp(t *testing.T) {
	q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
	br, _ := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 2
		c.MinimumNumberOfCalls = 2
	})), circuitbreaker.WithName("orders"))
	defer br.Close()
	g, _ := deadletter.NewGuard(q, br, func(context.Context, deadletter.Entry) error { panic("bug") })
	for range 2 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not go on up")
				}
			}()
			_ = g.Do(t.Context(), deadletter.Entry{})
		}()
	}
	if br.State() != circuitbreaker.StateOpen {
		t.Fatalf("after two panics the breaker is %v, want open (each a failure)", br.State())
	}
}

func TestGuardSuccessDoesNotAllocate(t *testing.T) {
	q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{})
	br, _ := circuitbreaker.New(circuitbreaker.WithName("orders"))
	defer br.Close()
	g, _ := deadletter.NewGuard(q, br, func(context.Context, deadletter.Entry) error { return nil })
	ctx := t.Context()
	e := deadletter.Entry{Payload: []byte("x")}
	if n := testing.AllocsPerRun(200, func() { _ = g.Do(ctx, e) }); n != 0 {
		t.Fatalf("a successful event through the guard allocates %v times", n)
	}
}
