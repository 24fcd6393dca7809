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
)

// smallConf is a small breaker's configuration, with edits applied.
func smallConf(edits ...func(*circuitbreaker.Config)) circuitbreaker.Config {
	return breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 10
		c.MinimumNumberOfCalls = 5
		c.FailureRateThreshold = 50
		c.SlowCallDurationThreshold = time.Second
		c.SlowCallRateThreshold = 60
		c.WaitDurationInOpenState = 10 * time.Second
		c.MaxWaitDurationInOpenState = 35 * time.Second
		c.PermittedNumberOfCallsInHalfOpenState = 2
		for _, e := range edits {
			e(c)
		}
	})
}

var small = []circuitbreaker.Option{circuitbreaker.WithConfig(smallConf())}

func smallWith(opts ...circuitbreaker.Option) []circuitbreaker.Option {
	return append(slices.Clone(small), opts...)
}

// open trips a breaker made with small.
func (h *harness) open() {
	h.t.Helper()
	h.calls(5, fail, 0)
	h.wantState(circuitbreaker.StateOpen)
}

// halfOpen trips the breaker and waits out the open state.
func (h *harness) halfOpen() {
	h.t.Helper()
	h.open()
	h.clk.Advance(10 * time.Second)
	h.wantState(circuitbreaker.StateHalfOpen)
}

func TestTransitions(t *testing.T) {
	tests := []struct {
		name  string
		opts  []circuitbreaker.Option
		steps func(h *harness)
		want  circuitbreaker.State
		trans []string
	}{
		{
			name: "closed to open on failure rate, at the threshold",
			opts: small,
			steps: func(h *harness) {
				h.calls(3, ok, 0)
				h.calls(2, fail, 0)
				h.wantState(circuitbreaker.StateClosed)
				h.calls(1, fail, 0)
			},
			want:  circuitbreaker.StateOpen,
			trans: []string{"CLOSED->OPEN(failure_rate)"},
		},
		{
			name:  "just below the failure rate stays closed",
			opts:  small,
			steps: func(h *harness) { h.calls(6, ok, 0); h.calls(4, fail, 0); h.calls(1, ok, 0) },
			want:  circuitbreaker.StateClosed,
		},
		{
			name:  "closed to open on slow-call rate, with successes",
			opts:  small,
			steps: func(h *harness) { h.calls(2, ok, 0); h.calls(3, ok, 1001*time.Millisecond) },
			want:  circuitbreaker.StateOpen,
			trans: []string{"CLOSED->OPEN(slow_call_rate)"},
		},
		{
			name:  "a call of exactly the threshold is not slow",
			opts:  small,
			steps: func(h *harness) { h.calls(10, ok, time.Second) },
			want:  circuitbreaker.StateClosed,
		},
		{
			name:  "no decision before the minimum number of calls",
			opts:  small,
			steps: func(h *harness) { h.calls(4, fail, 0) },
			want:  circuitbreaker.StateClosed,
		},
		{
			name:  "the minimum counts only calls that entered the window",
			opts:  small,
			steps: func(h *harness) { h.calls(4, fail, 0); h.calls(20, ign, 0) },
			want:  circuitbreaker.StateClosed,
		},
		{
			name: "old failures leave a count-based window",
			opts: small,
			steps: func(h *harness) {
				h.calls(2, fail, 0)
				h.calls(8, ok, 0)   // 2 of 10
				h.calls(2, ok, 0)   // the two failures leave: 0 of 10
				h.calls(4, fail, 0) // 4 of 10; a window that kept them would hold 6 of 10
			},
			want: circuitbreaker.StateClosed,
		},
		{
			name: "open to half-open after the wait",
			opts: small,
			steps: func(h *harness) {
				h.open()
				h.clk.Advance(10*time.Second - 1)
				h.wantState(circuitbreaker.StateOpen)
				h.clk.Advance(1)
			},
			want:  circuitbreaker.StateHalfOpen,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)"},
		},
		{
			name: "half-open to closed when the probes succeed",
			opts: small,
			steps: func(h *harness) {
				h.halfOpen()
				h.calls(1, ok, 0)
				h.wantState(circuitbreaker.StateHalfOpen)
				h.calls(1, ok, 0)
			},
			want:  circuitbreaker.StateClosed,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)", "HALF_OPEN->CLOSED(probes_succeeded)"},
		},
		{
			name:  "half-open to open when the probes fail",
			opts:  small,
			steps: func(h *harness) { h.halfOpen(); h.calls(1, ok, 0); h.calls(1, fail, 0) },
			want:  circuitbreaker.StateOpen,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)", "HALF_OPEN->OPEN(failure_rate)"},
		},
		{
			name:  "half-open to open when the probes are slow",
			opts:  small,
			steps: func(h *harness) { h.halfOpen(); h.calls(2, ok, 2*time.Second) },
			want:  circuitbreaker.StateOpen,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)", "HALF_OPEN->OPEN(slow_call_rate)"},
		},
		{
			name: "half-open decides on its probes whatever the minimum says",
			opts: smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.PermittedNumberOfCallsInHalfOpenState = 1 }))),
			steps: func(h *harness) {
				h.halfOpen()
				h.calls(1, ok, 0)
			},
			want: circuitbreaker.StateClosed,
		},
		{
			name: "an ignored probe gives its place back",
			opts: small,
			steps: func(h *harness) {
				h.halfOpen()
				h.calls(3, ign, 0)
				h.wantState(circuitbreaker.StateHalfOpen)
				h.calls(2, ok, 0)
			},
			want: circuitbreaker.StateClosed,
		},
		{
			name: "half-open rejects past its permitted probes",
			opts: small,
			steps: func(h *harness) {
				h.halfOpen()
				p1, err1 := h.enter(context.Background())
				_, err2 := h.enter(context.Background())
				_, err3 := h.enter(context.Background())
				var oe *circuitbreaker.OpenError
				if err1 != nil || err2 != nil || !errors.As(err3, &oe) || oe.State != circuitbreaker.StateHalfOpen {
					h.t.Fatalf("acquires = %v, %v, %v; want two probes then a HALF_OPEN rejection", err1, err2, err3)
				}
				p1.Record(fail)
			},
			want: circuitbreaker.StateHalfOpen, // one probe still out
		},
		{
			name: "max wait in half-open re-opens",
			opts: smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.MaxWaitDurationInHalfOpenState = 5 * time.Second }))),
			steps: func(h *harness) {
				h.halfOpen()
				p, _ := h.enter(context.Background()) // a probe that never reports
				_ = p
				h.clk.Advance(5 * time.Second)
			},
			want:  circuitbreaker.StateOpen,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->HALF_OPEN(wait_elapsed)", "HALF_OPEN->OPEN(half_open_timeout)"},
		},
		{
			name:  "forced open by configuration",
			opts:  smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeForcedOpen }))),
			steps: func(h *harness) { h.clk.Advance(time.Hour); h.wantRejected() },
			want:  circuitbreaker.StateForcedOpen,
		},
		{
			name:  "disabled by configuration passes everything and never opens",
			opts:  smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeDisabled }))),
			steps: func(h *harness) { h.calls(50, fail, 0) },
			want:  circuitbreaker.StateDisabled,
		},
		{
			name:  "metrics only by configuration records but never opens",
			opts:  smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeMetricsOnly }))),
			steps: func(h *harness) { h.calls(50, fail, 0) },
			want:  circuitbreaker.StateMetricsOnly,
		},
		{
			name:  "ForceOpen",
			opts:  small,
			steps: func(h *harness) { h.cb.ForceOpen(); h.wantRejected(); h.clk.Advance(time.Hour) },
			want:  circuitbreaker.StateForcedOpen,
			trans: []string{"CLOSED->FORCED_OPEN(manual)"},
		},
		{
			name:  "Disable from open",
			opts:  small,
			steps: func(h *harness) { h.open(); h.cb.Disable(); h.calls(20, fail, 0); h.clk.Advance(time.Hour) },
			want:  circuitbreaker.StateDisabled,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->DISABLED(manual)"},
		},
		{
			name:  "MetricsOnly from forced open",
			opts:  small,
			steps: func(h *harness) { h.cb.ForceOpen(); h.cb.MetricsOnly(); h.calls(20, fail, 0) },
			want:  circuitbreaker.StateMetricsOnly,
			trans: []string{"CLOSED->FORCED_OPEN(manual)", "FORCED_OPEN->METRICS_ONLY(manual)"},
		},
		{
			name:  "Reset from open closes and stops the open timer",
			opts:  small,
			steps: func(h *harness) { h.open(); h.cb.Reset(); h.clk.Advance(time.Hour) },
			want:  circuitbreaker.StateClosed,
			trans: []string{"CLOSED->OPEN(failure_rate)", "OPEN->CLOSED(manual)"},
		},
		{
			name:  "Reset empties the window",
			opts:  small,
			steps: func(h *harness) { h.calls(4, fail, 0); h.cb.Reset(); h.calls(4, fail, 0) },
			want:  circuitbreaker.StateClosed,
		},
		{
			name:  "a manual transition to the current state does nothing",
			opts:  small,
			steps: func(h *harness) { h.cb.ForceOpen(); h.cb.ForceOpen() },
			want:  circuitbreaker.StateForcedOpen,
			trans: []string{"CLOSED->FORCED_OPEN(manual)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts...)
			tt.steps(h)
			h.wantState(tt.want)
			if tt.trans != nil && !slices.Equal(h.transitions(), tt.trans) {
				t.Fatalf("transitions = %v, want %v", h.transitions(), tt.trans)
			}
		})
	}
}

func (h *harness) wantRejected() {
	h.t.Helper()
	called := false
	err := h.cb.Execute(context.Background(), func(context.Context) error { called = true; return nil })
	if called || !errors.Is(err, circuitbreaker.ErrOpen) {
		h.t.Fatalf("Execute in %v: called = %v, err = %v; want a rejection", h.cb.State(), called, err)
	}
}

func TestOpenWaitDoublesOnEachReopenUpToTheCap(t *testing.T) {
	h := newHarness(t, small...) // wait 10s, cap 35s
	h.open()
	var waits []time.Duration
	for range 4 {
		var oe *circuitbreaker.OpenError
		if _, err := h.enter(context.Background()); !errors.As(err, &oe) {
			t.Fatalf("Acquire while open = %v, want an OpenError", err)
		}
		wait := oe.RetryAfter(h.clk.Now())
		waits = append(waits, wait)
		h.clk.Advance(wait)
		h.wantState(circuitbreaker.StateHalfOpen)
		h.calls(2, fail, 0) // probes fail: re-open
		h.wantState(circuitbreaker.StateOpen)
	}
	if want := []time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second}; !slices.Equal(waits, want) {
		t.Fatalf("open waits = %v, want %v", waits, want)
	}
	// Closing forgets the re-opens.
	h.clk.Advance(35 * time.Second)
	h.calls(2, ok, 0)
	h.open()
	var oe *circuitbreaker.OpenError
	_, err := h.enter(context.Background())
	if !errors.As(err, &oe) || oe.RetryAfter(h.clk.Now()) != 10*time.Second {
		t.Fatalf("after closing, the open wait is %v, want 10s again", oe.RetryAfter(h.clk.Now()))
	}
}

func TestOpenWaitWithoutGrowth(t *testing.T) {
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.MaxWaitDurationInOpenState = 0 })))...)
	h.open()
	for range 3 {
		h.clk.Advance(10 * time.Second)
		h.wantState(circuitbreaker.StateHalfOpen)
		h.calls(2, fail, 0)
	}
	h.clk.Advance(10 * time.Second)
	h.wantState(circuitbreaker.StateHalfOpen)
}

func TestOpenWaitJitterNeverPassesTheCap(t *testing.T) {
	// 10s doubled twice is 40s, capped at 35s; +/-50 % jitter must not
	// pass 35s.
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.OpenStateJitter = 0.5 })))...)
	h.open()
	for range 2 {
		h.clk.Advance(time.Minute)
		h.calls(2, fail, 0)
	}
	for range 100 {
		_, err := h.enter(context.Background())
		var oe *circuitbreaker.OpenError
		if !errors.As(err, &oe) {
			t.Fatalf("Acquire = %v, want open", err)
		}
		if w := oe.RetryAfter(h.clk.Now()); w > 35*time.Second || w < 15*time.Second {
			t.Fatalf("wait %v, want within [15s, 35s]", w)
		}
		h.clk.Advance(time.Minute)
		h.calls(2, fail, 0)
	}
}

func TestNilContextIsBackground(t *testing.T) {
	h := newHarness(t, small...)
	h.halfOpen()
	//lint:ignore SA1012 checking that a nil context does not panic
	p, err := h.enter(nil) //nolint:staticcheck
	if err != nil {
		t.Fatal(err)
	}
	p.Record(ok)
}

func TestOpenWaitJitterStaysInItsBounds(t *testing.T) {
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) {
		c.OpenStateJitter = 0.2
		c.MaxWaitDurationInOpenState = 0
	})))...)
	seen := map[time.Duration]bool{}
	for range 200 {
		h.cb.Reset()
		h.open()
		_, err := h.enter(context.Background())
		var oe *circuitbreaker.OpenError
		errors.As(err, &oe)
		w := oe.RetryAfter(h.clk.Now())
		if w < 8*time.Second || w > 12*time.Second {
			t.Fatalf("jittered wait %v outside 10s ± 20%%", w)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct waits in 200 opens: the jitter is not random", len(seen))
	}
}

func TestResultsFromAnEarlierStateDoNotCount(t *testing.T) {
	h := newHarness(t, small...)
	// Five calls start while closed; the breaker is forced open and reset
	// before they finish. Their failures belong to the old window.
	var ps []permit
	for range 5 {
		p, err := h.enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	h.cb.ForceOpen()
	h.cb.Reset()
	for _, p := range ps {
		p.Record(fail)
	}
	h.wantState(circuitbreaker.StateClosed)
	if m := h.cb.Metrics(); m.Calls != 0 {
		t.Fatalf("window holds %d calls, want 0: stale results counted", m.Calls)
	}

	// A probe that finishes after its half-open state ended does not count in
	// the next one.
	h.halfOpen()
	stale, _ := h.enter(context.Background())
	h.calls(1, fail, 0) // decides with the other probe? no: 2 are permitted
	h.cb.Reset()
	h.halfOpen() // trips again from the new window, waits, half-opens anew
	stale.Record(fail)
	if m := h.cb.Metrics(); m.Calls != 0 {
		t.Fatalf("new half-open state counts %d probes, want 0", m.Calls)
	}
}

func TestIgnoredOutcomesNeverEnterTheWindow(t *testing.T) {
	h := newHarness(t, small...)
	h.calls(100, ign, 5*time.Second)
	if m := h.cb.Metrics(); m.Calls != 0 || m.SlowCalls != 0 {
		t.Fatalf("metrics %+v, want an empty window", m)
	}
	// Errors that are rejections are ignored whatever the classifier says.
	h2 := newHarness(t, smallWith(circuitbreaker.WithClassifier(func(error) resilience.Outcome { return fail }))...)
	for range 10 {
		_ = h2.cb.Execute(context.Background(), func(context.Context) error { return circuitbreaker.ErrOpen })
	}
	if m := h2.cb.Metrics(); m.Calls != 0 {
		t.Fatalf("rejections entered the window: %+v", m)
	}
}

func TestExecuteClassifiesAndReturnsTheErrorUnchanged(t *testing.T) {
	notFound := errors.New("not found")
	h := newHarness(t, smallWith(circuitbreaker.WithClassifier(func(err error) resilience.Outcome {
		if errors.Is(err, notFound) {
			return resilience.Success
		}
		return resilience.Failure
	}))...)
	for range 10 {
		if err := h.cb.Execute(context.Background(), func(context.Context) error { return notFound }); err != notFound {
			t.Fatalf("Execute returned %v, want the call's error", err)
		}
	}
	h.wantState(circuitbreaker.StateClosed)
	for range 5 {
		_ = h.cb.Execute(context.Background(), func(context.Context) error { return errors.New("unavailable") })
	}
	h.wantState(circuitbreaker.StateOpen)
}

func TestPanicCountsAsFailureAndPropagates(t *testing.T) {
	h := newHarness(t, small...)
	for range 5 {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the call's panic", r)
				}
			}()
			_ = h.cb.Execute(context.Background(), func(context.Context) error { panic("boom") })
		}()
	}
	h.wantState(circuitbreaker.StateOpen)
}

func TestAbandonedProbeIsReleasedWhenItsContextEnds(t *testing.T) {
	// context.AfterFunc runs in a goroutine of its own: in a synctest
	// bubble, synctest.Wait returns once it has run.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, small...)
		h.halfOpen()
		// Two probes start and their callers vanish (a stream never closed, a
		// cancelled call that never reports).
		for range 2 {
			ctx, cancel := context.WithCancel(context.Background())
			if _, err := h.enter(ctx); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		synctest.Wait()
		// Both places are back: two probes succeed and close the breaker.
		h.calls(2, ok, 0)
		h.wantState(circuitbreaker.StateClosed)
	})
}

func TestProbeWhoseDeadlinePassesCountsAsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.PermittedNumberOfCallsInHalfOpenState = 1 })))...)
		h.halfOpen()
		ctx, cancel := context.WithDeadline(context.Background(), time.Now()) // already past
		defer cancel()
		p, err := h.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h.wantState(circuitbreaker.StateOpen)
		p.Record(ok) // too late: already settled as a failure
		h.wantState(circuitbreaker.StateOpen)
	})
}
