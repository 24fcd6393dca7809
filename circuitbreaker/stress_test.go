package circuitbreaker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
)

// TestHalfOpenNeverAdmitsMoreThanItsProbes runs many goroutines through a
// breaker that keeps going half-open, and counts the calls in flight inside
// the call itself.
func TestHalfOpenNeverAdmitsMoreThanItsProbes(t *testing.T) {
	const permits = 3
	h := newHarness(t, smallWith(circuitbreaker.WithConfig(smallConf(func(c *circuitbreaker.Config) { c.PermittedNumberOfCallsInHalfOpenState = permits })))...)
	var inflight, peak atomic.Int32
	for round := range 50 {
		h.cb.Reset()
		h.open()
		h.clk.Advance(10 * time.Second)
		h.wantState(circuitbreaker.StateHalfOpen)
		inflight.Store(0)
		var start, wg sync.WaitGroup
		start.Add(1)
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				_ = h.cb.Execute(context.Background(), func(context.Context) error {
					n := inflight.Add(1)
					defer inflight.Add(-1)
					if n > permits {
						t.Errorf("round %d: %d calls in flight in a half-open breaker that permits %d", round, n, permits)
					}
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					if g%2 == 0 {
						return errFailure
					}
					return nil
				})
			}()
		}
		start.Done()
		wg.Wait()
	}
	if peak.Load() < 2 {
		t.Logf("peak concurrency %d: the goroutines never overlapped (slow machine?)", peak.Load())
	}
}

var errFailure = errors.New("unavailable")

// TestConcurrentRecordingKeepsExactCounts hammers a closed, metrics-only
// breaker from many goroutines; every recorded call must be counted.
func TestConcurrentRecordingKeepsExactCounts(t *testing.T) {
	h := newHarness(t,
		circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.Mode = circuitbreaker.ModeMetricsOnly
			c.SlidingWindowSize = 10000
			c.MinimumNumberOfCalls = 1
		})))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				_ = h.cb.Execute(context.Background(), func(context.Context) error {
					if (g+i)%4 == 0 {
						return errFailure
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	m := h.cb.Metrics()
	if m.Calls != 8000 || m.FailedCalls != 2000 {
		t.Fatalf("metrics %+v, want 8000 calls with 2000 failures", m)
	}
}
