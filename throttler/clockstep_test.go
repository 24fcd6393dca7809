package throttler_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

// A clock without a monotonic reading steps back (NTP, a VM restored) while
// the backend refuses everything: the throttler keeps counting, in the
// newest slot it counted in, and keeps rejecting at its cap. Before, every
// verdict after the step met a bucket holding a newer slot and was dropped:
// for as long as the step the throttler counted and rejected nothing.
func TestTheThrottlerKeepsCountingWhenTheClockStepsBack(t *testing.T) {
	for _, step := range []time.Duration{0, -time.Hour, -30 * time.Second, -11 * time.Second, -time.Second} {
		t.Run(step.String(), func(t *testing.T) {
			clock := resiliencetest.NewClock(time.Unix(1_000_000, 0))
			th := newThrottler(t, clock)
			offer(th, clock, 1000, 10*time.Second, func(int) bool { return false })
			if got := th.RejectionRate(); got != 0.9 {
				t.Fatalf("before the step: rate %v, want the cap 0.9", got)
			}
			clock.Step(step)
			reached, _ := offer(th, clock, 1000, 10*time.Second, func(int) bool { return false })
			if got := th.RejectionRate(); got != 0.9 || reached > 200 {
				r, a := th.Counts()
				t.Errorf("after a step of %v, the backend refusing everything: rate %v (want 0.9), %d of 1000 reached it (want about 100), counts %d/%d",
					step, got, reached, r, a)
			}
			// The backend recovers: accepts counted after the step bring the
			// rate down, over a few windows, as without a step (0).
			offer(th, clock, 6000, 60*time.Second, func(int) bool { return true })
			if got := th.RejectionRate(); got != 0 {
				t.Errorf("after a step of %v and a healthy backend: rate %v, want 0", step, got)
			}
		})
	}
}

// The clock jumps years ahead, then back (a VM restored after running with
// a wrong clock): the throttler counts and rejects on both sides.
func TestTheThrottlerCountsAfterAJumpYearsAheadAndBack(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(1_000_000, 0))
	th := newThrottler(t, clock)
	clock.Step(5 * 365 * 24 * time.Hour)
	offer(th, clock, 200, 10*time.Second, func(int) bool { return false })
	if got := th.RejectionRate(); got != 0.9 {
		t.Fatalf("five years ahead: rate %v, want the cap 0.9", got)
	}
	clock.Step(-5 * 365 * 24 * time.Hour)
	reached, _ := offer(th, clock, 1000, 10*time.Second, func(int) bool { return false })
	if got := th.RejectionRate(); got != 0.9 || reached > 200 {
		r, a := th.Counts()
		t.Errorf("back from five years ahead, the backend refusing everything: rate %v (want 0.9), %d of 1000 reached it, counts %d/%d", got, reached, r, a)
	}
}

// A verdict whose End is a year ahead of the throttler's clock (a time not
// read from it) is dropped: the verdicts after it are counted as by a
// throttler that never had it, in a window that goes on sliding.
func TestAVerdictFromTheFutureIsDropped(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clock := resiliencetest.NewClock(t0)
	th, ref := newThrottler(t, clock), newThrottler(t, clock)
	_, p, err := th.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = th.Exit(context.Background(), p, refused(t0.Add(365*24*time.Hour)))
	if r, _ := th.Counts(); r != 0 {
		t.Fatalf("the future verdict was counted: %d requests", r)
	}
	refuse := func(n int) {
		for range n { // one every 100 ms: ten a slot
			clock.Advance(100 * time.Millisecond)
			for _, x := range []*throttler.Throttler{th, ref} {
				if _, p, err := x.Enter(context.Background()); err == nil {
					_ = x.Exit(context.Background(), p, refused(clock.Now()))
				}
			}
		}
	}
	for _, n := range []int{100, 50, 200} { // a window, half a window later, two more
		refuse(n)
		r, a := th.Counts()
		wr, wa := ref.Counts()
		if r != wr || a != wa || r == 0 {
			t.Fatalf("after %d more refusals: counts %d/%d, want %d/%d as without the verdict from the future", n, r, a, wr, wa)
		}
	}
}
