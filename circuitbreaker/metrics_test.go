package circuitbreaker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestTimeBasedWindowForgetsOldSeconds(t *testing.T) {
	h := newHarness(t, smallWith(
		circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowType = circuitbreaker.TimeBased
			c.SlidingWindowSize = 10
		})),
	)...)
	h.calls(4, fail, 0)
	h.clk.Advance(10 * time.Second) // those four leave the window
	h.calls(1, fail, 0)
	h.calls(1, ok, 0)
	if m := h.cb.Metrics(); m.Calls != 2 || m.FailedCalls != 1 {
		t.Fatalf("metrics %+v, want 2 calls, 1 failure", m)
	}
	h.wantState(circuitbreaker.StateClosed)
	h.calls(3, fail, 0) // 4 of 5 in this second
	h.wantState(circuitbreaker.StateOpen)
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, small...)
	if m := h.cb.Metrics(); m.FailureRate != -1 || m.SlowCallRate != -1 {
		t.Fatalf("empty breaker rates = %v, %v; want -1 (not enough calls)", m.FailureRate, m.SlowCallRate)
	}
	h.calls(4, ok, 0)
	h.calls(1, fail, 2*time.Second)
	h.calls(1, ok, 2*time.Second)
	want := circuitbreaker.Metrics{
		State: circuitbreaker.StateClosed, FailureRate: 100.0 / 6, SlowCallRate: 200.0 / 6,
		Calls: 6, SuccessfulCalls: 5, FailedCalls: 1,
		SlowCalls: 2, SlowSuccessfulCalls: 1, SlowFailedCalls: 1,
	}
	if m := h.cb.Metrics(); m != want {
		t.Fatalf("Metrics() = %+v, want %+v", m, want)
	}
	h.calls(4, fail, 0) // 5 of 10: opens
	h.wantRejected()
	h.wantRejected()
	m := h.cb.Metrics()
	if m.State != circuitbreaker.StateOpen || m.FailureRate != 50 || m.NotPermittedCalls != 2 {
		t.Fatalf("open metrics = %+v, want the tripping rate 50 kept and 2 not permitted", m)
	}
}

func TestObserverEvents(t *testing.T) {
	h := newHarness(t, small...)
	src := h.obs.Sources()
	if len(src) != 1 || src[0].Kind != resilience.KindCircuitBreaker || src[0].Name != "test" || src[0].Snapshot == nil {
		t.Fatalf("sources = %+v, want the breaker", src)
	}
	h.calls(1, ok, 1500*time.Millisecond)
	h.calls(1, ign, 0)
	h.calls(4, fail, 0) // 4 of 5 fail: opens
	h.wantRejected()
	var got []string
	for _, e := range h.obs.Events() {
		s := e.Type.String()
		switch e.Type {
		case resilience.EventCall:
			s += " " + e.Outcome.String() + " " + e.Duration.String()
			if e.Slow {
				s += " slow"
			}
		case resilience.EventRejection:
			s += " " + e.State.String()
			if !errors.Is(e.Err, circuitbreaker.ErrOpen) {
				t.Errorf("rejection event carries %v, want the OpenError", e.Err)
			}
		case resilience.EventTransition:
			s += " " + e.From.String() + "->" + e.To.String() + " " + e.Reason.String()
		}
		got = append(got, s)
	}
	want := []string{
		"call success 1.5s slow", "call ignored 0s",
		"call failure 0s", "call failure 0s", "call failure 0s", "call failure 0s",
		"transition CLOSED->OPEN failure_rate",
		"rejection OPEN",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%v\nwant:\n%v", got, want)
	}
	if s := src[0].Snapshot(); s.State != circuitbreaker.StateOpen || s.FailureRate != 80 {
		t.Fatalf("snapshot = %+v, want OPEN with the tripping failure rate", s)
	}
}

func TestDisabledReportsNothing(t *testing.T) {
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeDisabled })))...)
	h.calls(10, fail, 0)
	if e := h.obs.Events(); len(e) != 0 {
		t.Fatalf("a disabled breaker reported %d events", len(e))
	}
}

func TestOpenError(t *testing.T) {
	h := newHarness(t, small...)
	h.open()
	_, err := h.enter(context.Background())
	var oe *circuitbreaker.OpenError
	if !errors.As(err, &oe) {
		t.Fatalf("rejection %T is not an *OpenError", err)
	}
	if !errors.Is(err, circuitbreaker.ErrOpen) || !resilience.IsRejection(err) || !resilience.IsRejection(circuitbreaker.ErrOpen) {
		t.Fatal("the rejection does not match ErrOpen or is not a resilience.Rejection")
	}
	if oe.Name != "test" || oe.State != circuitbreaker.StateOpen || !oe.Until.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("OpenError = %+v", oe)
	}
	if got := err.Error(); got != `circuit breaker "test" is OPEN` {
		t.Fatalf("Error() = %q", got)
	}
	h.clk.Advance(4 * time.Second)
	if d := oe.RetryAfter(h.clk.Now()); d != 6*time.Second {
		t.Fatalf("RetryAfter = %v, want 6s", d)
	}
	if d := oe.RetryAfter(t0.Add(time.Hour)); d != 0 {
		t.Fatalf("RetryAfter past the wait = %v, want 0", d)
	}
	_, err2 := h.enter(context.Background())
	if err2 != err {
		t.Fatal("two rejections in one open state are not the same prebuilt error")
	}
}

// Issue 9 item 8: a TIME_BASED window keeps counting after the wall clock
// steps back (NTP, a VM restored). Before, every call recorded at a second
// older than the window was dropped, so the breaker could not open for as
// long as the step.
func TestIssue9TimeWindowKeepsCountingWhenTheClockStepsBack(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, -3 * time.Second, time.Hour} {
		clk := resiliencetest.NewClock(time.Unix(1_000_000, 0))
		cb, err := circuitbreaker.New(circuitbreaker.WithClock(clk),
			circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
				c.SlidingWindowType = circuitbreaker.TimeBased
				c.SlidingWindowSize = 10
				c.MinimumNumberOfCalls = 4
			})))
		if err != nil {
			t.Fatal(err)
		}
		fail := errors.New("down")
		for range 2 {
			_ = cb.Execute(context.Background(), func(context.Context) error { return fail })
		}
		clk.Step(step)
		for range 2 {
			_ = cb.Execute(context.Background(), func(context.Context) error { return fail })
		}
		want := circuitbreaker.StateOpen
		if step > 0 {
			// A step forward past the window is time passing: the first two
			// left the window.
			want = circuitbreaker.StateClosed
		}
		if cb.State() != want {
			t.Fatalf("step %v: breaker %v %+v, want %v", step, cb.State(), cb.Metrics(), want)
		}
	}
}

// Issue 9 item 8: on its defaults a standalone breaker measures durations
// with the precise system clock, so an 8ms call is slow against a 5ms
// threshold every time; the coarse clock, the default before, lagged by up
// to 20ms with the processors busy and missed it.
func TestIssue9DefaultClockJudgesSlowCallsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cb, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlowCallDurationThreshold = 5 * time.Millisecond
			c.Mode = circuitbreaker.ModeMetricsOnly
		})))
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			_ = cb.Execute(t.Context(), func(context.Context) error { time.Sleep(8 * time.Millisecond); return nil })
		}
		if m := cb.Metrics(); m.SlowCalls != 50 {
			t.Fatalf("%d of 50 calls of 8ms counted slow against 5ms, want all", m.SlowCalls)
		}
	})
}
