package throttler_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

var errDown = errors.New("backend down")

func newThrottler(t *testing.T, clock resilience.Clock, opts ...throttler.Option) *throttler.Throttler {
	t.Helper()
	th, err := throttler.New(append([]throttler.Option{throttler.WithClock(clock),
		throttler.WithRandom(rand.New(rand.NewPCG(1, 2)).Float64)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return th
}

// offer sends n requests, spread over d, to a backend that accepts each one
// accept says; it returns the requests that reached the backend and those it
// accepted.
func offer(th *throttler.Throttler, clock *resiliencetest.Clock, n int, d time.Duration, accept func(i int) bool) (reached, accepted int) {
	for range n {
		clock.Advance(d / time.Duration(n))
		_ = th.Execute(context.Background(), func(context.Context) error {
			reached++
			if accept(reached) {
				accepted++
				return nil
			}
			return errDown
		})
	}
	return reached, accepted
}

// Under a total outage the throttler rejects at its cap: 90 % by default,
// so a tenth of the requests still reach the backend and would see it come
// back.
func TestRejectionRateUnderTotalOutage(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	reached, _ := offer(th, clock, 10_000, 10*time.Second, func(int) bool { return false })
	if got := th.RejectionRate(); got != 0.9 {
		t.Errorf("rejection rate after a total outage = %v, want the cap 0.9", got)
	}
	// The first 20 go through (minimumRequests), then about 10 % of the rest.
	if frac := float64(reached) / 10_000; frac < 0.09 || frac > 0.12 {
		t.Errorf("%d of 10000 requests reached a backend that was down (%.3f), want about 0.1", reached, frac)
	}

	// A lower cap lets fewer through; the floor stays.
	th = newThrottler(t, clock, throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.MaxRejectionRate = 99 })))
	reached, _ = offer(th, clock, 10_000, 10*time.Second, func(int) bool { return false })
	if frac := float64(reached) / 10_000; frac < 0.005 || frac > 0.02 {
		t.Errorf("cap 99%%: %d of 10000 requests reached the backend (%.3f), want about 0.01", reached, frac)
	}
}

// Little traffic always flows: below minimumRequests in the window nothing
// is rejected, however many of them fail.
func TestFloorFlowsWhenTrafficIsLow(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	// 1 request a second against a 10 s window: never more than 10 in it.
	reached, _ := offer(th, clock, 100, 100*time.Second, func(int) bool { return false })
	if reached != 100 {
		t.Errorf("%d of 100 requests at 1 a second reached the backend, want all (below minimumRequests)", reached)
	}
	if r, a := th.Counts(); r != 10 || a != 0 {
		t.Errorf("counts = %d requests, %d accepts, want 10 and 0 (a 10 s window)", r, a)
	}
}

// An overloaded backend that accepts 40 % of what it gets: the throttler
// sends it about K times what it accepts, and the requests it accepts stay
// what it can take.
func TestOverloadSendsKTimesAccepts(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	// The backend accepts 400 a second of 1000 offered: one in 2.5.
	served := 0
	second := time.Unix(0, 0)
	reached, accepted := offer(th, clock, 30_000, 30*time.Second, func(int) bool {
		if now := clock.Now(); now.Sub(second) >= time.Second {
			second, served = now, 0
		}
		if served < 400 {
			served++
			return true
		}
		return false
	})
	perSecond := float64(reached) / 30
	if perSecond < 700 || perSecond > 900 {
		t.Errorf("the backend received %.0f requests a second, want about K × 400 = 800", perSecond)
	}
	if a := float64(accepted) / 30; a < 390 {
		t.Errorf("the backend accepted %.0f a second, want its capacity, 400", a)
	}
}

// A healthy backend is never throttled, nor one that fails less than 1 − 1/K
// of the time.
func TestNoRejectionBelowTheThreshold(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	reached, _ := offer(th, clock, 5000, 10*time.Second, func(i int) bool { return i%3 != 0 }) // 33 % fail
	if reached != 5000 {
		t.Errorf("%d of 5000 reached a backend that accepts two thirds, want all", reached)
	}
}

// Once the backend is back, traffic returns as a ramp, not a step: each
// window lets through about K times what the one before saw accepted, so
// the rejections stop within a few windows.
func TestRecoveryRamps(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock, throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.Window = time.Second })))
	offer(th, clock, 1000, time.Second, func(int) bool { return false })
	if th.RejectionRate() == 0 {
		t.Fatal("no rejection after an outage")
	}
	var reached []int
	for range 4 {
		n, _ := offer(th, clock, 1000, time.Second, func(int) bool { return true })
		reached = append(reached, n)
	}
	t.Logf("requests that reached the backend, window by window after it came back: %v of 1000", reached)
	for i := 1; i < len(reached); i++ {
		if reached[i] <= reached[i-1] && reached[i] != 1000 {
			t.Errorf("window %d let %d through after %d: want a ramp up", i+1, reached[i], reached[i-1])
		}
	}
	if reached[0] < 100 || reached[0] > 500 {
		t.Errorf("first window after the outage let %d of 1000 through, want a gentle start", reached[0])
	}
	if th.RejectionRate() != 0 || reached[3] != 1000 {
		t.Errorf("rejection rate %v four windows after the backend came back (%d of 1000 reached it), want 0", th.RejectionRate(), reached[3])
	}
}

// A rejection is a resilience.Rejection that matches ErrThrottled; a result
// that says nothing (Ignored) takes its request back.
func TestRejectionAndUncounted(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock, throttler.WithConfig(throttlerConf(func(c *throttler.Config) {
		c.MinimumRequests = 0
		c.MaxRejectionRate = 99
	})), throttler.WithName("payments"))
	var err error
	for range 100 {
		if err = th.Execute(context.Background(), func(context.Context) error { return errDown }); errors.Is(err, throttler.ErrThrottled) {
			break
		}
	}
	if !errors.Is(err, throttler.ErrThrottled) || !resilience.IsRejection(err) || !strings.Contains(err.Error(), `"payments"`) {
		t.Fatalf("err = %v, want a rejection by the throttler named payments", err)
	}
	th = newThrottler(t, clock)
	for range 50 {
		_ = th.Execute(context.Background(), func(context.Context) error { return context.Canceled })
	}
	if r, a := th.Counts(); r != 0 || a != 0 {
		t.Errorf("after 50 cancelled calls: %d requests, %d accepts counted, want none", r, a)
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		opt  throttler.Option
		want string
	}{
		{throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.Multiplier = 0.5 })), "multiplier: must be in [1, 1000], got 0.5"},
		{throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.Window = time.Millisecond })), "window: must be in [10ms, 1h], got 1ms"},
		{throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.MinimumRequests = -1 })), "minimumRequests: must be in [0, 1000000], got -1"},
		{throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.MaxRejectionRate = 100 })), "maxRejectionRate: must be in [0, 100), got 100"},
	} {
		_, err := throttler.New(tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
	if _, err := throttler.New(throttler.WithClock(nil)); err == nil {
		t.Error("WithClock(nil): no error")
	}
}

// Entering and leaving, admitted or rejected, allocates nothing.
func TestNoAllocation(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock, throttler.WithConfig(throttlerConf(func(c *throttler.Config) { c.MinimumRequests = 0 })))
	ctx := context.Background()
	r := resilience.Result{Err: errDown, Outcome: resilience.Failure}
	if n := testing.AllocsPerRun(1000, func() {
		_, p, err := th.Enter(ctx)
		if err == nil {
			_ = th.Exit(ctx, p, r)
		}
	}); n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
}

// Reset forgets the outage at once; a permit without a Ref counts nothing.
func TestResetAndUncountedPermit(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	offer(th, clock, 1000, time.Second, func(int) bool { return false })
	if th.RejectionRate() == 0 {
		t.Fatal("no rejection after an outage")
	}
	th.Reset()
	if r, a := th.Counts(); r != 0 || a != 0 || th.RejectionRate() != 0 {
		t.Errorf("after Reset: %d requests, %d accepts, rate %v; want nothing", r, a, th.RejectionRate())
	}
	_ = th.Exit(context.Background(), resilience.Permit{}, resilience.Result{Outcome: resilience.Success})
	if r, a := th.Counts(); r != 0 || a != 0 {
		t.Errorf("an Exit with an empty permit counted %d requests, %d accepts", r, a)
	}
}
