package circuitbreaker_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

func TestReconfigureKeepsStateAndCounts(t *testing.T) {
	h := newHarness(t, small...) // window 10, minimum 5, 50 %
	h.calls(3, ok, 0)
	h.calls(2, fail, 0) // 2 of 5 = 40 %: closed
	h.wantState(circuitbreaker.StateClosed)
	// Lower the threshold to 30 %: the calls already in the window stay, and
	// the next failure (3 of 6 = 50 %) trips under the new rule.
	if err := h.cb.Reconfigure(smallWith(circuitbreaker.WithClock(h.clk), circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.FailureRateThreshold = 30 })))...); err != nil {
		t.Fatal(err)
	}
	if m := h.cb.Metrics(); m.Calls != 5 || m.FailedCalls != 2 {
		t.Fatalf("metrics after Reconfigure %+v, want the 5 calls kept", m)
	}
	h.wantState(circuitbreaker.StateClosed)
	h.calls(1, ok, 0) // 2 of 6 = 33 %: at or above 30 %
	h.wantState(circuitbreaker.StateOpen)
	// The open state is kept too.
	if err := h.cb.Reconfigure(small...); err != nil {
		t.Fatal(err)
	}
	h.wantState(circuitbreaker.StateOpen)
}

func TestReconfigureRefusesANewWindow(t *testing.T) {
	h := newHarness(t, small...)
	err := h.cb.Reconfigure(smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.SlidingWindowSize = 20 })))...)
	var oe *resilience.OptionError
	if !errors.As(err, &oe) || oe.Option != "slidingWindowSize" || !strings.Contains(err.Error(), "keeps its window (COUNT_BASED 10)") {
		t.Fatalf("Reconfigure with another window = %v", err)
	}
	if err := h.cb.Reconfigure(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.FailureRateThreshold = 500 }))); err == nil || !strings.Contains(err.Error(), "failureRateThreshold") {
		t.Fatalf("Reconfigure with an invalid option = %v", err)
	}
}

func TestReconfigureChangesTheMode(t *testing.T) {
	h := newHarness(t, small...)
	if err := h.cb.Reconfigure(smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeForcedOpen })))...); err != nil {
		t.Fatal(err)
	}
	h.wantState(circuitbreaker.StateForcedOpen)
	if err := h.cb.Reconfigure(small...); err != nil {
		t.Fatal(err)
	}
	h.wantState(circuitbreaker.StateClosed)
}

func TestReconfigureUnderLoad(t *testing.T) {
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeMetricsOnly })))...)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					h.call(fail, 0)
				}
			}
		}()
	}
	for i := range 200 {
		_ = h.cb.Reconfigure(smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) {
			c.Mode = circuitbreaker.ModeMetricsOnly
			c.FailureRateThreshold = float64(10 + i%80)
			c.WaitDurationInOpenState = time.Duration(1+i) * time.Second
		})))...)
	}
	close(stop)
	wg.Wait()
	h.wantState(circuitbreaker.StateMetricsOnly)
}
