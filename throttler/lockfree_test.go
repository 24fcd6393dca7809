package throttler_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

// Goroutines on every processor count verdicts slot after slot, all in the
// same slot at a time (a barrier between slots), so that the first of them
// into each slot recycles its bucket while the others count. The counts
// take no lock: a count that meets a bucket being recycled is lost, and the
// throttler's bound is at most one lost count per other goroutine at each
// rollover, ten rollovers a window. Nothing is ever counted twice or moved
// into the window from outside it.
func TestConcurrentCountsAtRolloversWithinTheBound(t *testing.T) {
	const (
		perSlot = 50 // verdicts per goroutine per slot
		slots   = 60
	)
	goroutines := 2 * runtime.GOMAXPROCS(0)
	t0 := time.Unix(0, 0)
	clock := resiliencetest.NewClock(t0)
	th := newThrottler(t, clock)
	slot := th.Config().Window / 10
	barriers := make([]sync.WaitGroup, slots)
	for i := range barriers {
		barriers[i].Add(goroutines)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for s := range slots {
				for k := range perSlot {
					_, p, err := th.Enter(context.Background())
					if err != nil {
						t.Errorf("a healthy backend's call was throttled: %v", err)
						return
					}
					// Spread over the slot, each goroutine its own instants.
					end := t0.Add(time.Duration(s)*slot + time.Duration(g*perSlot+k)*slot/time.Duration(goroutines*perSlot))
					_ = th.Exit(context.Background(), p, ok(end))
				}
				barriers[s].Done()
				barriers[s].Wait()
			}
		})
	}
	wg.Wait()
	clock.Set(t0.Add(time.Duration(slots-1) * slot))
	want := int64(10 * goroutines * perSlot)
	maxLost := int64(10 * (goroutines - 1))
	r, a := th.Counts()
	t.Logf("%d goroutines, %d verdicts in the window: %d requests and %d accepts counted (bound: at most %d lost)", goroutines, want, r, a, maxLost)
	for _, c := range []struct {
		name string
		got  int64
	}{{"requests", r}, {"accepts", a}} {
		if c.got > want || c.got < want-maxLost {
			t.Errorf("%s = %d, want within [%d, %d]", c.name, c.got, want-maxLost, want)
		}
	}
}

// The counts take no lock, but a source of random draws given with
// WithRandom (a math/rand/v2 generator is not safe for concurrent use) is
// still called by one goroutine at a time: many goroutines draw at once
// against a backend that refuses everything, and the source, which yields
// its processor in the middle of each draw, notices a second caller.
func TestWithRandomIsCalledOneAtATime(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	src := rand.New(rand.NewPCG(3, 4))
	var inside, overlaps atomic.Int64
	random := func() float64 {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		runtime.Gosched()
		return src.Float64()
	}
	th, err := throttler.New(throttler.WithClock(clock), throttler.WithRandom(random))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 { // the window fills with refusals: every Enter now draws
		_, p, _ := th.Enter(t.Context())
		_ = th.Exit(t.Context(), p, refused(clock.Now()))
	}
	if th.RejectionRate() == 0 {
		t.Fatal("rejection rate 0 after 100 refusals: the calls below would not draw")
	}
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for range 200 {
				if _, p, err := th.Enter(context.Background()); err == nil {
					_ = th.Exit(context.Background(), p, resilience.Result{Outcome: resilience.Ignored, End: clock.Now()})
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("the WithRandom source was called %d times while another call was in it", n)
	}
}

// Calls that end in the same slot are counted exactly, however many end at
// once: a count that meets its bucket being recycled waits for the new slot
// instead of being dropped (a cold burst of 40 ending together lost one).
// Each round, many goroutines end one call each at the same instant of a
// new slot, released together, so that they meet the bucket's recycling.
func TestCallsEndingTogetherInANewSlotAreAllCounted(t *testing.T) {
	const rounds = 300
	goroutines := 8 * runtime.GOMAXPROCS(0)
	t0 := time.Unix(0, 0)
	clock := resiliencetest.NewClock(t0)
	th := newThrottler(t, clock)
	slot := th.Config().Window / 10
	for round := range rounds {
		end := t0.Add(time.Duration(round) * slot)
		clock.Set(end)
		permits := make([]resilience.Permit, goroutines)
		for i := range permits {
			var err error
			if _, permits[i], err = th.Enter(context.Background()); err != nil {
				t.Fatalf("round %d: a healthy backend's call was throttled: %v", round, err)
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range permits {
			wg.Go(func() {
				<-start
				_ = th.Exit(context.Background(), p, ok(end))
			})
		}
		close(start)
		wg.Wait()
		want := int64(min(round+1, 10) * goroutines)
		if r, a := th.Counts(); r != want || a != want {
			t.Fatalf("round %d: %d requests and %d accepts in the window, want %d of each", round, r, a, want)
		}
	}
}
