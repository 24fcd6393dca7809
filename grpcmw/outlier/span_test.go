package outlier

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// timedEndpoint returns an endpoint of a balancer timing calls against
// threshold on clock.
func timedEndpoint(clock resilience.Clock, threshold time.Duration) (*endpoint, *outlierBalancer) {
	b := &outlierBalancer{kick: make(chan struct{}, 1)}
	b.settings.Store(newSettings(newClassifier(DefaultFailureStatusCodes()), clock, 0, threshold))
	return b.newEndpoint("10.0.0.1:50051"), b
}

// A timed call counts as slow only if it took longer than the threshold,
// and always if it took longer by more than a tick, wherever in its tick it
// was picked.
func TestTimedCallIsSlowOnlyBeyondTheThreshold(t *testing.T) {
	const threshold = 64 * time.Millisecond
	tick := tickOf(threshold)
	if tick != time.Millisecond {
		t.Fatalf("tick of %v = %v, want 1ms", threshold, tick)
	}
	t0 := time.Unix(100, 0)
	for _, off := range []time.Duration{0, 1, tick / 2, tick - 1} {
		for _, d := range []time.Duration{0, tick, threshold - 1, threshold, threshold + 1, threshold + tick/2,
			threshold + tick, threshold + tick + 1, 10 * threshold} {
			t.Run(fmt.Sprintf("picked %v into a tick, took %v", off, d), func(t *testing.T) {
				clock := resiliencetest.NewClock(t0)
				e, b := timedEndpoint(clock, threshold)
				st := b.settings.Load()
				clock.Set(t0.Add(7*tick + off))
				s := e.span(st)
				clock.Advance(d)
				s.fn(balancer.DoneInfo{})
				slow := e.slow.Load() == 1
				switch {
				case d <= threshold && slow:
					t.Errorf("counted slow, but it took %v, not longer than the %v threshold", d, threshold)
				case d > threshold+tick && !slow:
					t.Errorf("not counted slow, but it took %v, more than a tick over the %v threshold", d, threshold)
				}
				if e.success.Load() != 1 {
					t.Errorf("success = %d, want the call counted once", e.success.Load())
				}
			})
		}
	}
}

// A failed timed call is classified as an untimed one is, and counts slow
// by the same rule.
func TestTimedFailureIsClassified(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(100, 0))
	e, b := timedEndpoint(clock, 64*time.Millisecond)
	s := e.span(b.settings.Load())
	clock.Advance(time.Second)
	s.fn(balancer.DoneInfo{Err: status.Error(codes.Unavailable, "down")})
	s.fn(balancer.DoneInfo{Err: status.Error(codes.Canceled, "gone")})
	s.fn(balancer.DoneInfo{Err: status.Error(codes.NotFound, "no such thing")})
	if f, ok, sl := e.failure.Load(), e.success.Load(), e.slow.Load(); f != 1 || ok != 1 || sl != 2 {
		t.Fatalf("failure, success, slow = %d, %d, %d; want 1, 1 (NOT_FOUND), 2 (CANCELLED ignored)", f, ok, sl)
	}
}

// The calls picked within one tick share a span; a new tick, new settings
// or a clock set back make a new one.
func TestSpansAreSharedWithinATick(t *testing.T) {
	t0 := time.Unix(100, 0)
	clock := resiliencetest.NewClock(t0)
	e, b := timedEndpoint(clock, 64*time.Millisecond)
	st := b.settings.Load()
	tick := st.tick
	first := e.span(st)
	clock.Advance(tick - 1)
	if e.span(st) != first {
		t.Fatal("a pick later in the same tick made a new span")
	}
	clock.Advance(1)
	second := e.span(st)
	if second == first {
		t.Fatal("a pick in the next tick shared the last tick's span")
	}
	st2 := newSettings(st.cls, clock, 0, st.slow)
	if e.span(st2) == second {
		t.Fatal("new settings shared the old settings' span")
	}
}

// backClock is a clock that a test sets, backwards too (a custom Clock may
// step back; the fake clock of resiliencetest cannot).
type backClock struct {
	resilience.Clock
	now time.Time
}

func (c *backClock) Now() time.Time { return c.now }

// A span made before the clock stepped back is not reused: its tick is in
// the future of every call picked now, which would make them look faster
// than they are by up to the step.
func TestSpanNotReusedAfterTheClockSteppedBack(t *testing.T) {
	t0 := time.Unix(100, 0)
	clock := &backClock{Clock: resilience.SystemClock(), now: t0}
	e, b := timedEndpoint(clock, 64*time.Millisecond)
	st := b.settings.Load()
	clock.now = t0.Add(time.Hour)
	later := e.span(st)
	clock.now = t0.Add(time.Second)
	if s := e.span(st); s == later || s.end > time.Second+st.tick {
		t.Fatalf("a pick after the clock stepped back got a span ending %v after the base, want within a tick of 1s", s.end)
	}
}

// fixedPicker always picks sc.
type fixedPicker struct{ sc *subConn }

func (p fixedPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{SubConn: p.sc}, nil
}

// A pick and its Done allocate nothing, timed or not, on a fake clock and on
// the system clock (one span per endpoint per tick, a millisecond at most,
// is less than one allocation per call).
func TestPickAndDoneAllocateNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		clock     resilience.Clock
		threshold time.Duration
	}{
		{"timed, fake clock", resiliencetest.NewClock(time.Unix(100, 0)), 500 * time.Millisecond},
		{"timed, system clock", resilience.SystemClock(), 500 * time.Millisecond},
		{"untimed", resilience.SystemClock(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, b := timedEndpoint(tc.clock, tc.threshold)
			p := &picker{child: fixedPicker{&subConn{ep: e}}, b: b}
			info := balancer.PickInfo{FullMethodName: "/s/m", Ctx: t.Context()}
			if n := testing.AllocsPerRun(10_000, func() {
				res, err := p.Pick(info)
				if err != nil {
					t.Fatal(err)
				}
				res.Done(balancer.DoneInfo{})
			}); n != 0 {
				t.Errorf("%v allocations per pick and done, want 0", n)
			}
			if e.success.Load() == 0 {
				t.Error("no call was counted")
			}
		})
	}
}
