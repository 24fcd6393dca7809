package sysclock

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A reading lies between the readings of time.Now taken before and after
// it, on the monotonic clock, and carries a monotonic reading of its own.
func TestNowIsBetweenTheReadingsAroundIt(t *testing.T) {
	for i := range 1000 {
		before := time.Now()
		got := Now()
		after := time.Now()
		if got.Before(before) || got.After(after) {
			t.Fatalf("reading %d: %v, not between %v and %v", i, got, before, after)
		}
		if got == got.Round(0) {
			t.Fatalf("reading %d: %v has no monotonic reading", i, got)
		}
		if w := got.Round(0).Sub(before.Round(0)); w < -time.Second || w > time.Second {
			t.Fatalf("reading %d: wall clock %v away from time.Now's", i, w)
		}
	}
}

// A stale anchor is renewed: the reading after it is time.Now's own.
func TestAStaleAnchorIsRenewed(t *testing.T) {
	stale := time.Now().Add(-2 * Refresh)
	anchor.Store(&stale)
	before := time.Now()
	got := Now()
	if got.Before(before) {
		t.Fatalf("Now = %v, before %v: the stale anchor served", got, before)
	}
	if a := anchor.Load(); a == &stale || a.Before(before) {
		t.Fatalf("anchor %v not renewed (stale %v)", a, stale)
	}
}

// Inside a bubble Now is time.Now exactly, whatever the anchor was read
// in (the real clock, this bubble before a jump of the fake clock, another
// bubble), and the real clock's readings after the bubble are real again.
func TestNowInsideABubbleIsTheBubblesTime(t *testing.T) {
	Now() // a real anchor
	var wg sync.WaitGroup
	for b := range 2 {
		wg.Go(func() {
			synctest.Test(t, func(t *testing.T) {
				for i, step := range []time.Duration{0, time.Millisecond, Refresh / 2, Refresh, 3 * Refresh, time.Nanosecond} {
					time.Sleep(step + time.Duration(b)*time.Microsecond)
					if got, want := Now(), time.Now(); got != want {
						t.Fatalf("bubble %d, step %d: Now = %v, time.Now = %v", b, i, got, want)
					}
				}
			})
		})
	}
	wg.Wait()
	before := time.Now()
	if got := Now(); got.Before(before) || got == got.Round(0) {
		t.Fatalf("after the bubbles Now = %v, want a real reading after %v", got, before)
	}
}

// A reading allocates nothing while its anchor serves.
func TestNowAllocatesNothing(t *testing.T) {
	Now()
	if n := testing.AllocsPerRun(1000, func() { _ = Now() }); n != 0 {
		t.Fatalf("Now allocates %v times per reading", n)
	}
}

func BenchmarkNow(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("sysclock.Now", func(b *testing.B) {
		for b.Loop() {
			_ = Now()
		}
	})
}
