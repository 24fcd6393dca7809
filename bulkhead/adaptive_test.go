package bulkhead_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// failsafe-go's adaptive limiter measures each call from its permit's
// acquisition to Record with time.Now, and reconsiders its limit on a Record
// once its recent window holds at least 50 samples and at least a second
// (or twice the fastest call) has passed since it last did. Inside a
// synctest bubble time.Now is fake, so calls that "take" a latency with
// time.Sleep take exactly that long, instantly, and the limit moves the same
// way on every run.

// load drives an adaptive bulkhead with waves of callers that all start
// together, hold their permit for a latency, then end it.
type load struct {
	t       *testing.T
	b       *bulkhead.Bulkhead
	callers int
	limits  []int // the limit after each simulated second
}

// run sends waves for d of fake time, each call taking latency(now) and
// ending with end.
func (l *load) run(d time.Duration, latency func(elapsed time.Duration) time.Duration, end func(permit)) {
	start := time.Now()
	next := start.Add(time.Second)
	for time.Since(start) < d {
		lat := latency(time.Since(start))
		var wg sync.WaitGroup
		for range l.callers {
			p, err := enter(l.b, context.Background())
			if err != nil {
				l.t.Fatalf("Acquire at limit %d, %d active: %v", l.b.Limit(), l.b.Active(), err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(lat)
				end(p)
			}()
		}
		wg.Wait()
		if !time.Now().Before(next) {
			l.limits = append(l.limits, l.b.Limit())
			next = next.Add(time.Second)
		}
	}
}

func newAdaptiveLoad(t *testing.T) *load {
	// Ten callers at a time: failsafe-go caps the limit at 5 × the calls in
	// flight, so the limit can rise above its initial 20, up to 50.
	b := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
		c.Adaptive = true
		c.AdaptiveLimits = bulkhead.Adaptive{}
	})), bulkhead.WithClock(resilience.SystemClock()))
	return &load{t: t, b: b, callers: 10}
}

func constant(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// rising latency: 10ms, growing by 20% every simulated second.
func rising(elapsed time.Duration) time.Duration {
	lat := 10 * time.Millisecond
	for range int(elapsed / time.Second) {
		lat = lat * 12 / 10
	}
	return lat
}

func release(p permit) { p.Release() }

func TestAdaptiveLimitLowersUnderRisingLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptiveLoad(t)
		l.run(20*time.Second, constant(10*time.Millisecond), release)
		steady := l.b.Limit()
		if steady <= 20 {
			t.Fatalf("limit %d after 20s of steady 10ms calls, want above the initial 20 (limits %v)", steady, l.limits)
		}
		n := len(l.limits)
		l.run(15*time.Second, rising, release)
		loaded := l.b.Limit()
		t.Logf("limit per second: steady %v, rising latency %v", l.limits[:n], l.limits[n:])
		if loaded > steady-5 {
			t.Fatalf("limit %d after 15s of latency rising 20%%/s, want at most %d (steady %d - 5)", loaded, steady-5, steady)
		}
		// failsafe-go smooths the recent latency (a moving median of 5 windows,
		// then moving averages), so the limit turns a few seconds after the
		// latency does; from its peak on, it only comes down.
		rise := l.limits[n:]
		peak := 0
		for i, v := range rise {
			if v > rise[peak] {
				peak = i
			}
		}
		if peak > 5 {
			t.Fatalf("the limit peaked %ds into the rising latency, want within 5s: %v", peak+1, rise)
		}
		for i := peak + 1; i < len(rise); i++ {
			if rise[i] > rise[i-1] {
				t.Fatalf("the limit rose again (%d -> %d) after its peak: %v", rise[i-1], rise[i], rise)
			}
		}
	})
}

// Calls that end early are dropped: their duration is no sample, so however
// slow they are, they do not move the limit. (failsafe-go may still take one
// step on the samples that earlier calls left in its recent window, when a
// dropped call is the first to end after the window's time is up.)
func TestDroppedCallsDoNotMoveTheLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(permit)
	}{
		{name: "Drop", end: func(p permit) { p.Drop() }},
		{name: "Done(context.DeadlineExceeded)", end: func(p permit) { p.Done(context.DeadlineExceeded) }},
		{name: "Done(context.Canceled)", end: func(p permit) { p.Done(context.Canceled) }},
		{name: "Done(a rejection)", end: func(p permit) { p.Done(bulkhead.ErrFull) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newAdaptiveLoad(t)
				l.run(20*time.Second, constant(10*time.Millisecond), release)
				steady := l.b.Limit()
				n := len(l.limits)
				l.run(15*time.Second, rising, tt.end)
				dropped := l.limits[n:]
				for _, got := range dropped {
					if got != dropped[0] || got < steady-1 || got > steady+1 {
						t.Fatalf("limit moved from %d on dropped calls: %v", steady, dropped)
					}
				}
			})
		})
	}
}

// A call that failed is released, not dropped: a dependency that fails
// slowly is still slow, and the limit comes down.
func TestFailedCallsStillCountTheirLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newAdaptiveLoad(t)
		l.run(20*time.Second, constant(10*time.Millisecond), release)
		steady := l.b.Limit()
		l.run(15*time.Second, rising, func(p permit) { p.Done(errUnavailable) })
		if got := l.b.Limit(); got >= steady-5 {
			t.Fatalf("limit %d after slow failures, want well below the steady %d", got, steady)
		}
	})
}
